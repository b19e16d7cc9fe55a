"""The control runs an output needs: every arm in every env under each protocol, on seeds all of them share.

An output is made only when every arm of an environment has the seeds it needs in common; otherwise
that environment is reported missing, never drawn from part of its runs. Speed-ups pair a method with
standard PPO of the same seed (same initial policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from rlinfluence.figures.arms import Arm
from rlinfluence.figures.overlays import Overlay, method_values, overlay
from rlinfluence.figures.requirements import FigureData, RestrictableByEnvs
from rlinfluence.run.identity import CLEAN

# The committed runs' evaluation where it is cheaper than the paper's (env.eval_episodes every round), the same
# for every arm and seed of an env (docs/reproduction.md, "Evaluation episodes", "Evaluation cadence").
CPU_EVALUATION = {
    "acrobot": "eval.episodes=100",
    "minigrid": "eval.episodes=100",
    "doorkey": "eval.episodes=100",
    "lunarlander": "eval.episodes=50",
    "highway": "eval.episodes=50",
    "bipedalwalker": "eval.every=5 eval.episodes=50",
}


def cpu_eval_episodes(env: str) -> int:
    """The test episodes a round of the committed runs of `env` (its CPU_EVALUATION overrides)."""
    settings = dict(override.split("=") for override in CPU_EVALUATION[env].split())
    return int(settings["eval.episodes"])


def run_name(method_tag: str, protocol: str) -> str:
    """A run's method tag and protocol as its run dir names them (rundir.run_leaf, without the hash)."""
    return method_tag if protocol == CLEAN else f"{method_tag}-{protocol}"


class ArmRuns:
    """The rows of `arms` in `envs` under each of `protocols`, from the tidy rows of `experiment` (an arm's own
    overlay's for an arm that has one): the first `seeds` seeds all of them share, or with `all_seeds`
    every shared seed (studies that grow across sittings), at least `seeds`. A subclass says where the runs
    come from: those attributes and `command_for(env)`, the command that makes an env's runs."""

    arms: tuple[Arm, ...]
    all_seeds: bool

    if TYPE_CHECKING:  # a subclass's fields or properties (read-only here, so either fits)

        @property
        def experiment(self) -> str: ...
        @property
        def envs(self) -> tuple[str, ...]: ...
        @property
        def seeds(self) -> int: ...
        @property
        def protocols(self) -> tuple[str, ...]: ...

    def command_for(self, env: str) -> str:
        raise NotImplementedError

    def command_for_arms(self, env: str, arms: tuple[Arm, ...]) -> str:
        """The command that makes `arms`' runs of `env`: the env's whole command, where a subclass cannot narrow it."""
        return self.command_for(env)

    def source(self, env: str) -> tuple[str, str | None]:
        """The runs the output calls `env`: their env (the tidy rows' and run dirs') and optimizer (None: whichever
        the env's runs used). A subclass whose output names blocks of an env's runs (the twenty-seed study's MiniGrid
        under Adam beside MiniGrid under SGD) says which."""
        return env, None

    @property
    def command(self) -> str:
        """Every env's command, one after another."""
        return " && ".join(self.command_for(env) for env in self.envs)

    def experiment_of(self, arm: Arm) -> str:
        return overlay(arm.overlay).experiment if arm.overlay else self.experiment

    @property
    def experiments(self) -> tuple[str, ...]:
        """The output's experiment, then those of arms shared from other experiments."""
        return tuple(dict.fromkeys([self.experiment, *map(self.experiment_of, self.arms)]))

    def _env_runs(self, tidy: pd.DataFrame, env: str) -> tuple[pd.DataFrame, dict[str, tuple[Arm, set]], set]:
        """The rows of `env`'s runs (`source`), labelled with their arm and with `env` as their env; each run name's
        arm and finished seeds; the seeds every run has."""
        runs_env, optimizer = self.source(env)
        of_env = tidy[tidy["env"] == runs_env]
        if optimizer is not None:
            of_env = of_env[of_env["optimizer"] == optimizer]
        parts, seeds = [], {}
        for arm in self.arms:
            experiment, tag = self.experiment_of(arm), arm.tag_for(runs_env)
            for protocol in self.protocols:
                rows = of_env[
                    (of_env["experiment"] == experiment)
                    & (of_env["protocol"] == protocol)
                    & (of_env["method_tag"] == tag)
                ]
                name = run_name(tag, protocol)
                seeds[name if experiment == self.experiment else f"{experiment}/{name}"] = (arm, set(rows["seed"]))
                parts.append(rows.assign(arm=arm.label, env=env))
        return pd.concat(parts).sort_index(), seeds, set.intersection(*(s for _, s in seeds.values()))

    def shortfalls(self, data: FigureData) -> dict[str, str]:
        lines = {}
        for env in self.envs:
            _, seeds, common = self._env_runs(data.tidy, env)
            if len(common) < self.seeds:
                have = ", ".join(f"{run} {len(s)}" for run, (_, s) in seeds.items())
                short = tuple(dict.fromkeys(arm for arm, s in seeds.values() if len(s) < self.seeds))
                lines[env] = (
                    f"{self.experiment}/{env}: needs {self.seeds} seeds run by every arm, "
                    f"has {len(common)} in common (finished seeds per run name: {have}); "
                    f"`{self.command_for_arms(env, short or self.arms)}`"
                )
        return lines

    def progress(self, data: FigureData) -> dict[str, tuple[int, int]]:
        """Per environment: (finished runs that count towards the output, runs it needs)."""
        counts = {}
        for env in self.envs:
            _, seeds, _ = self._env_runs(data.tidy, env)
            counts[env] = (sum(min(len(s), self.seeds) for _, s in seeds.values()), self.seeds * len(seeds))
        return counts

    def select(self, data: FigureData) -> pd.DataFrame:
        """The rows of the needed runs on the seeds all arms share, with an `arm` label column."""
        parts = []
        for env in self.envs:
            rows, _, common = self._env_runs(data.tidy, env)
            parts.append(rows[rows["seed"].isin(sorted(common)[: None if self.all_seeds else self.seeds])])
        return pd.concat(parts, ignore_index=True)


@dataclass(frozen=True)
class Runs(ArmRuns, RestrictableByEnvs):
    """The runs `rlinfluence -m +experiment=<overlay>` makes: the `arms` in each env the overlay sweeps, under
    each of its protocols, with as many seeds as it (and the overlay of each arm shared from elsewhere)
    launches. An output that needs less, or other envs or protocols of the same experiment, says so; its
    command is still the overlays'."""

    overlay: str
    arms: tuple[Arm, ...]
    envs_needed: tuple[str, ...] | None = None
    protocols_needed: tuple[str, ...] | None = None
    seeds_needed: int | None = None  # e.g. the paper's count, where the overlay launches more
    all_seeds: bool = False
    ENVS = "envs_needed"

    @property
    def launched(self) -> Overlay:
        return overlay(self.overlay)

    @property
    def overlays(self) -> tuple[str, ...]:
        """The output's overlay, then those of arms shared from other overlays."""
        return tuple(dict.fromkeys([self.overlay, *(arm.overlay for arm in self.arms if arm.overlay)]))

    @property
    def experiment(self) -> str:
        return self.launched.experiment

    @property
    def envs(self) -> tuple[str, ...]:
        return self.envs_needed or self.launched.envs

    @property
    def protocols(self) -> tuple[str, ...]:
        return self.protocols_needed or self.launched.protocols

    @property
    def seeds(self) -> int:
        return self.seeds_needed or min(overlay(name).seeds for name in self.overlays)

    @property
    def command(self) -> str:
        return self._command("")

    def command_for(self, env: str) -> str:
        """The command for one env's runs, with the evaluation its committed runs used (a new seed made
        with the paper's episodes would sit beside them under the same run key)."""
        evaluation = f" {CPU_EVALUATION[env]}" if env in CPU_EVALUATION else ""
        return self._command(f" env={env}{evaluation}")

    def command_for_arms(self, env: str, arms: tuple[Arm, ...]) -> str:
        """The env's command with the overlay's method sweep narrowed to `arms`' values, when they are fewer than it
        sweeps: a sitting whose run dirs are gone remakes only the arms without committed rows. The whole command
        where an arm is another overlay's or its method is not a value the overlay sweeps."""
        values = method_values(self.overlay)
        tags = {arm.tag_for(self.launched.envs[0]) for arm in arms}
        if self.overlays != (self.overlay,) or not tags <= values.keys() or len(tags) == len(values):
            return self.command_for(env)
        return f"{self.command_for(env)} method='{','.join(v for tag, v in values.items() if tag in tags)}'"

    def _command(self, overrides: str) -> str:
        return " && ".join(f"rlinfluence -m +experiment={name}{overrides}" for name in self.overlays)
