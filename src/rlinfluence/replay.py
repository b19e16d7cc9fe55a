"""`task=replay`: re-train the first rounds of committed runs and compare them with their committed rows.

    rlinfluence task=replay replay.run=main/frozenlake/sgd/iif-p50/seed0 replay.rounds=3
    rlinfluence task=replay 'replay.run=main/*/*/*/seed0'     # every committed run the pattern matches

A committed run (its rows in figures.data_dir's tidy CSVs) is named by the path its run dir had below
runs_root: <experiment>/<env>/<optimizer>/<method_tag>[-<protocol>][-<config_hash>]/seed<k>. Its
settings are those of the experiment overlay's sweep job (conf/experiment/) whose run dir that is (or, for a run
made by a command line of its own, the presets its path names), with those its config hash stands for. The
replay trains that job's config into a temporary runs_root up to round replay.rounds (logger off) and
compares env_steps, n_records, n_kept and test_return round by round: bit for bit, or for rows committed
before the tidy CSVs kept full precision (no code_commit), at the 10 significant digits they were
written with. Timings are not compared. What a replay can promise: docs/reproduction.md
("Determinism").

A control run that engine=default trained before the control engine (control/engine.py) became the only one
(commit ONE_RUN_ROUND_LAST and earlier: a round, network, update and optimizer of its own for one run) is
another numerics class: its Adam runs part from round 1 or 2, its SGD runs' weights in their last bits. Such a
difference is said, with the commit that made the run and how to replay it exactly (a worktree of that commit),
and is no failure.

A run made on another hardware class than this machine's (kernels.hardware_class: the pinned kernels, for
an Adam run those of a CPU vendor, or a CPU model's own, or a GPU), or before runs recorded theirs, may differ
from some round on without any change of code: such a difference is said, with both classes, and is no failure;
one on the same class is.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

import pandas as pd
from hydra import compose
from omegaconf import DictConfig

from rlinfluence.choices import ConfigError
from rlinfluence.config.compose import ANY_ENV, composing
from rlinfluence.config.engines import DEFAULT
from rlinfluence.figures.committed import load_settings
from rlinfluence.figures.overlays import overlay, overlay_names
from rlinfluence.figures.regenerate import in_repo
from rlinfluence.figures.runs import RUN_KEY, load_tidy
from rlinfluence.kernels import cpu_model, hardware_class, kernels_in_force
from rlinfluence.run import rundir
from rlinfluence.run.identity import CLEAN, UNSET, write_identity
from rlinfluence.run.loop import Resume, train
from rlinfluence.run.provenance import device_name, is_ancestor
from rlinfluence.run.tasks import register

COMPARED_COLUMNS = ["env_steps", "n_records", "n_kept", "test_return"]
EARLIER_PRECISION = ".10g"  # the tidy CSVs' float format before they kept full precision
# The protocols (and experiments) of runs other code made: the authors' (benchmarks/authors_pipeline) and SB3's
# (benchmarks/sb3_iif_study.py). Not ours to replay.
NOT_OURS = ("authors", "sb3")
# The last commit at which engine=default trained a control run on a round of its own (`retired_engine`).
ONE_RUN_ROUND_LAST = "cfbcb6b43f6171593daf02f4db8ab6192d23c971"


# A replay's own settings, none of them result-affecting (identity.NOT_RESULT_AFFECTING): no W&B mirror, and
# the progress bar as the command asks for it (a replayed round of a paper-budget run takes seconds to minutes).
def own_settings(progress: bool) -> list[str]:
    return ["logger=disabled", f"progress={progress}"]


@dataclass(frozen=True)
class Difference:
    round: int
    text: str  # `round 1 test_return: committed 0.5, replayed 0.25`


@dataclass(frozen=True)
class ReplayResult:
    run: str  # the committed run's path
    rounds: int  # rounds 0..rounds compared
    difference: str | None  # the first difference, None when every compared value is equal
    from_round: int | None  # its round
    made_on: str  # the hardware class of the committed run (kernels.hardware_class)
    this_machine: str  # the replay's
    made_by: str | None = None  # the retired engine that made it (`retired_engine`), None for the one engine's

    @property
    def failed(self) -> bool:
        """A difference on the hardware class and engine that made the run: a change of code or library versions."""
        return self.difference is not None and self.made_on == self.this_machine and self.made_by is None

    def line(self) -> str:
        if self.difference is None:
            return f"replay {self.run}: rounds 0-{self.rounds} equal the committed rows"
        if self.failed:
            return f"replay {self.run}: {self.difference}"
        if self.made_by is not None:
            last = ONE_RUN_ROUND_LAST[:7]
            return (
                f"replay {self.run}: {self.difference}; made by {self.made_by}, which this code no longer has (another "
                f"numerics class): a difference is expected and is not a code change; to replay it exactly, run this "
                f"command in a worktree of commit {last}, the last that has it (git worktree add ../rlinfluence-{last} "
                f"{last}, then pip install -e there)"
            )
        return (
            f"replay {self.run}: {self.difference}; made on {self.made_on}, this machine is {self.this_machine}: "
            f"a difference here is expected from round {self.from_round} on and is not a code change"
        )


# ----------------------------------------------------------------------------- which runs, made how


def run_path(run: pd.Series) -> str:
    """A committed run's run-dir path below runs_root, from its tidy row (rundir.run_leaf's parts)."""
    leaf = (
        [run.method_tag]
        + ([run.protocol] if run.protocol != CLEAN else [])
        + ([run.config_hash] if run.config_hash != "default" else [])
    )
    return f"{run.experiment}/{run.env}/{run.optimizer}/{'-'.join(leaf)}/seed{run.seed}"


def is_ours(tidy: pd.DataFrame) -> pd.Series:
    """The rows of runs this code made: of neither another's protocol nor its experiment (SB3's runs without
    gradient clipping have a protocol of their own, `sb3-noclip`)."""
    return ~(tidy["protocol"].isin(NOT_OURS) | tidy["experiment"].isin(NOT_OURS))


def committed_runs(tidy: pd.DataFrame) -> pd.DataFrame:
    """Our committed runs, one row each (their first), with their `path`."""
    runs = tidy[is_ours(tidy)].drop_duplicates(RUN_KEY)
    return runs.assign(path=[run_path(run) for _, run in runs.iterrows()])  # (apply gives no column when empty)


def overlay_jobs(experiment: str) -> list[list[str]]:
    """Every sweep job (its overrides) of the overlays that may name their runs' experiment `experiment`: theirs
    is `experiment`, or depends on the job (`overrides_of` then checks each job's run dir, experiment included)."""
    overlays = [overlay(name) for name in overlay_names()]
    return [list(job) for of in overlays if of.experiment == experiment or of.experiment_varies for job in of.jobs]


def setting_overrides(settings: dict[str, Any]) -> list[str]:
    """Hydra overrides that set each recorded setting ({dotted key: value}, settings.json's), or delete it."""
    return [f"~{key}" if value == UNSET else f"++{key}={json.dumps(value)}" for key, value in settings.items()]


def folder_presets(run: pd.Series) -> list[str]:
    """The presets a run's dir names and its command line may have chosen (an overlay names neither; settings.json
    records only what differs from them): its optimizer (the twenty-seed study's MiniGrid under Adam), and for an
    env=gym run env=gym with the id its env folder encodes (rundir.env_folder), from its tidy row."""
    env_id = rundir.any_env_id(run.env)
    any_env = [f"env={ANY_ENV}", f"env.id={json.dumps(env_id)}"] if env_id is not None else []
    return [*any_env, f"optimizer={run.optimizer}"]


def candidate_jobs(run: pd.Series) -> list[list[str]]:
    """The jobs that may have made `run`, each once: the overlay jobs of its env and seed (others are not composed,
    ~0.1 s a job), with its folder's presets in place of the overlay's own choice of them (an env=gym run's in place
    of the overlay's env sweep); then, for a run made by a command line of its own (no overlay: the engine
    equivalence study's `experiment_name=` runs), the presets its folder and tidy row name."""
    presets = folder_presets(run)
    chosen = tuple(f"{preset.partition('=')[0]}=" for preset in presets)
    jobs = [
        [job[0], *presets, *(o for o in job[1:] if not o.startswith(chosen))] for job in overlay_jobs(run.experiment)
    ]
    own = {f"env={run.env}", f"seed={run.seed}", *presets}
    kept = [job for job in jobs if all(o in own for o in job if o.startswith(("env=", "seed=")))]
    env = [] if rundir.any_env_id(run.env) is not None else [f"env={run.env}"]
    own_command = [*env, *presets, f"method={run.method}", f"seed={run.seed}", f"experiment_name={run.experiment}"]
    return [list(job) for job in dict.fromkeys(map(tuple, [*kept, own_command]))]


def overrides_of(run: pd.Series, settings: dict[str, dict[str, Any]]) -> list[str]:
    """The overrides that made a committed run: the overlay job whose run dir it is, with the settings its
    config_hash stands for (settings.json) on top. ConfigError when none makes it."""
    recorded = setting_overrides(settings.get(run.config_hash, {}))
    for job in candidate_jobs(run):
        cfg = compose("config", overrides=[*job, *recorded])
        if f"{cfg.experiment_name}/{rundir.relative_run_dir(cfg).as_posix()}" == run.path:
            return [*job, *recorded]
    raise ConfigError(
        f"replay.run: neither an experiment overlay (conf/experiment/) nor its own presets, with the settings of "
        f"config_hash {run.config_hash}, make the committed run {run.path}; its settings cannot be recovered"
    )


# ----------------------------------------------------------------------------- replaying one


def same(committed: float, replayed: float, full_precision: bool) -> bool:
    if pd.isna(committed) or pd.isna(replayed):
        return pd.isna(committed) and pd.isna(replayed)
    return replayed == committed or (not full_precision and float(format(replayed, EARLIER_PRECISION)) == committed)


def first_difference(committed: pd.DataFrame, replayed: pd.DataFrame, full_precision: bool) -> Difference | None:
    for k, (old, new) in enumerate(
        zip(committed[COMPARED_COLUMNS].itertuples(index=False), replayed[COMPARED_COLUMNS].itertuples(index=False))
    ):
        for column, was, now in zip(COMPARED_COLUMNS, old, new):
            if not same(was, now, full_precision):
                return Difference(k, f"round {k} {column}: committed {was!r}, replayed {now!r}")
    return None


def committed_class(rows: pd.DataFrame) -> str:
    """The hardware class of a committed run's rows; `unknown` for rows made before runs recorded it."""
    first = rows.iloc[0]
    cpu, kernels, device = (None if pd.isna(first[c]) else str(first[c]) for c in ("cpu", "kernels", "device"))
    return hardware_class(cpu, kernels, device, str(first["optimizer"]))


def retired_engine(settings: dict[str, Any], rows: pd.DataFrame) -> str | None:
    """`engine=default's one-run round (commit <sha>)` when a committed control run's rows (`settings`: its
    config_hash's) were made by engine=default at ONE_RUN_ROUND_LAST or before it (or before runs recorded their
    commit, or at a commit git cannot place here: a shallow clone); None for a run of the one control engine:
    engine=stacked's, or engine=default's made since."""
    if settings.get("engine", DEFAULT) != DEFAULT:
        return None
    commits = sorted({commit for made in rows["code_commit"].dropna() for commit in str(made).split("+")})
    if not commits:
        return "engine=default's one-run round (before runs recorded their commit)"
    if any(is_ancestor(commit, ONE_RUN_ROUND_LAST) is False for commit in commits):  # None: git cannot place it
        return None
    return f"engine=default's one-run round (commit {', '.join(commit[:7] for commit in commits)})"


def replay_run(
    run: pd.Series, committed: pd.DataFrame, overrides: list[str], rounds: int, progress: bool, settings: dict
) -> ReplayResult:
    """Train the run (`overrides`) up to round `rounds` in a temporary runs_root; compare with its committed rows."""
    with tempfile.TemporaryDirectory(prefix="rlinfluence-replay-") as runs_root:
        cfg = compose("config", overrides=[*overrides, f"runs_root={runs_root}", *own_settings(progress)])
        last = min(rounds, cfg.env.rounds)
        run_dir = rundir.run_dir(cfg)
        rundir.create_run_dir(run_dir, runs_root)
        write_identity(run_dir, cfg)
        train(cfg, run_dir, Resume(), last_round=last)
        replayed = pd.read_csv(run_dir / "metrics.csv")
    rows = committed.sort_values("round").iloc[: last + 1]
    full_precision = bool(rows["code_commit"].notna().all())
    difference = first_difference(rows, replayed, full_precision)
    this_machine = hardware_class(cpu_model(), kernels_in_force(), device_name(cfg.device), cfg.optimizer.name)
    return ReplayResult(
        run.path,
        last,
        None if difference is None else difference.text,
        None if difference is None else difference.round,
        committed_class(rows),
        this_machine,
        retired_engine(settings, rows),
    )


# ----------------------------------------------------------------------------- the task


def matching_runs(cfg: DictConfig, tidy: pd.DataFrame) -> pd.DataFrame:
    runs = committed_runs(tidy)
    if runs.empty:
        raise ConfigError(
            f"figures.data_dir={cfg.figures.data_dir} holds no committed run to replay (no tidy CSV of ours in "
            f"{in_repo(cfg.figures.data_dir)}); task=replay needs a checkout's paper_figures/data, which a pip "
            "install lacks: run it in a checkout, or point figures.data_dir there"
        )
    matched = runs[[fnmatch.fnmatchcase(path, cfg.replay.run) for path in runs["path"]]]
    if matched.empty:
        nearest = ", ".join(difflib.get_close_matches(cfg.replay.run, runs["path"].tolist(), n=3, cutoff=0))
        raise ConfigError(
            f"replay.run={cfg.replay.run} matches no committed run of figures.data_dir="
            f"{cfg.figures.data_dir} (the nearest: {nearest})"
        )
    return matched


def check_replay(cfg: DictConfig) -> None:
    if cfg.replay.run is None:
        raise ConfigError(
            "task=replay needs replay.run=<experiment>/<env>/<optimizer>/<leaf>/seed<k> "
            "(wildcards allowed), e.g. replay.run=main/frozenlake/sgd/iif-p50/seed0"
        )
    if cfg.replay.rounds < 0:
        raise ConfigError(f"replay.rounds={cfg.replay.rounds} must be >= 0 (rounds re-trained after round 0)")
    matching_runs(cfg, load_tidy(in_repo(cfg.figures.data_dir)))


def replay_runs(cfg: DictConfig) -> list[ReplayResult]:
    """Every committed run replay.run matches, replayed; a line for each as it ends."""
    data_dir = in_repo(cfg.figures.data_dir)
    tidy, settings = load_tidy(data_dir), load_settings(data_dir)
    rows_of = tidy.groupby(RUN_KEY)
    results = []
    with composing():
        for _, run in matching_runs(cfg, tidy).iterrows():
            overrides = overrides_of(run, settings)
            committed = rows_of.get_group(tuple(run[RUN_KEY]))
            run_settings = settings.get(run.config_hash, {})
            results.append(replay_run(run, committed, overrides, cfg.replay.rounds, cfg.progress, run_settings))
            print(f"rlinfluence: {results[-1].line()}", file=sys.stderr)
    return results


@register("replay", check=check_replay)
def replay(cfg: DictConfig) -> list[ReplayResult]:
    results = replay_runs(cfg)
    differ = sum(result.difference is not None for result in results)
    failed = sum(result.failed for result in results)
    retired = sum(result.difference is not None and result.made_by is not None for result in results)
    reasons = [f"{retired} made by a retired engine"] if retired else []
    if differ - failed - retired:
        reasons.append(f"{differ - failed - retired} made on other hardware")
    elsewhere = f" ({', '.join(reasons)})" if reasons else ""
    print(
        f"rlinfluence: replayed {len(results)} committed run(s): {len(results) - differ} equal, {differ} differ"
        + elsewhere,
        file=sys.stderr,
    )
    if failed:
        raise SystemExit(1)
    return results
