"""The experiment overlays (conf/experiment/): what `rlinfluence -m +experiment=<name>` launches.

An output's runs are an overlay's (control_runs.Runs): its experiment, envs, protocols and seeds are
read here from the overlay composed as the CLI composes it, not restated beside the figure.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import cast

from hydra import compose
from omegaconf import OmegaConf

from rlinfluence.config.compose import composed, composing, search_path
from rlinfluence.launch.manifest import expand_sweep
from rlinfluence.run.rundir import method_tag, protocol_tag


@dataclass(frozen=True)
class Overlay:
    name: str
    experiment: str  # its experiment_name: the runs' folder below runs_root
    # True: experiment_name interpolates swept keys (corruption.yaml's names the fraction), so its jobs' runs
    # lie under several experiments and `experiment` is only its defaults' one
    experiment_varies: bool
    jobs: tuple[tuple[str, ...], ...]  # each job's overrides (manifest.expand_sweep), `+experiment=<name>` first
    env: str  # the env and protocol of its composed config, for an overlay that does not sweep them
    protocol: str

    def swept(self, key: str) -> tuple[str, ...]:
        """The values the sweep gives `key`, in the sweep's order; none when it does not sweep it."""
        prefix = f"{key}="
        return tuple(dict.fromkeys(o.removeprefix(prefix) for job in self.jobs for o in job if o.startswith(prefix)))

    @property
    def envs(self) -> tuple[str, ...]:
        return self.swept("env") or (self.env,)

    @property
    def protocols(self) -> tuple[str, ...]:
        """The protocol tags of its runs (rundir.protocol_tag): conf/protocol/'s options are named by theirs."""
        return self.swept("protocol") or (self.protocol,)

    @property
    def seeds(self) -> int:
        return len(self.swept("seed")) or 1


@functools.cache  # conf/ does not change within a process
def overlay(name: str) -> Overlay:
    """conf/experiment/<name>.yaml, composed with its sweep."""
    with composing():
        cfg = compose("config", overrides=[f"+experiment={name}"], return_hydra_config=True)
    params = (
        cast(dict[str, object], OmegaConf.to_container(cfg.hydra.sweeper.params)) if cfg.hydra.sweeper.params else {}
    )
    jobs = expand_sweep(params, [f"+experiment={name}"])
    varies = OmegaConf.is_interpolation(cfg, "experiment_name")
    return Overlay(name, cfg.experiment_name, varies, tuple(map(tuple, jobs)), cfg.env.name, protocol_tag(cfg))


def overlay_names() -> list[str]:
    with composing() as hydra:
        return hydra.config_loader().get_group_options("experiment")


@functools.cache
def method_values(name: str) -> dict[str, str]:
    """The method values overlay `name` sweeps, by the method tag each gives its runs in the overlay's first env
    (an Arm's `tag_for` that env), in the sweep's order; none when it does not sweep the method."""
    launched = overlay(name)
    first_env = (f"env={launched.envs[0]}",)
    return {
        method_tag(composed(search_path(), (f"+experiment={name}", *first_env, f"method={value}")).method): value
        for value in launched.swept("method")
    }
