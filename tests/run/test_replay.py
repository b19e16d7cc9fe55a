"""task=replay re-trains committed runs and finds them bit-identical; every run and tidy row records the code
and library versions that made it (run/provenance.py)."""

from __future__ import annotations

import fnmatch
import json
import math
import shutil

import pandas as pd
import pytest
from hydra import compose

from conftest import compose_config
from rlinfluence.cli import run_task
from rlinfluence.config.compose import composing
from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.figures.committed import load_settings
from rlinfluence.figures.runs import (
    ONE_CSV_PER_ARM,
    TIDY_COLUMNS,
    load_tidy,
    read_tidy_csv,
    sort_tidy,
    tidy_csv_bytes,
    tidy_from_runs,
)
from rlinfluence.kernels import cpu_model, hardware_class, kernels_in_force
from rlinfluence.replay import (
    NOT_OURS,
    ONE_RUN_ROUND_LAST,
    ReplayResult,
    committed_runs,
    overrides_of,
    replay_runs,
    retired_engine,
)
from rlinfluence.run.identity import write_identity
from rlinfluence.run.loop import Resume, train
from rlinfluence.run.provenance import HARDWARE_COLUMNS, code_version
from rlinfluence.run.rundir import create_run_dir, relative_run_dir, run_dir

DATA = REPO_ROOT / "paper_figures" / "data"
# Committed runs of the control engine (each a seed trained among others, engine=stacked), one per env family,
# replayed alone for two rounds by the default suite; `pytest -m long` replays the first rounds of every committed
# run.
PENDULUM = "twenty_seeds/gym-Pendulum-v1/adam/iif-p50-bb5a63/seed0"
# Made on an AMD EPYC (family 25, model 1). On an Intel Xeon (family 6, model 207) under the same pinned kernels its
# round 1 differs in the 7th digit (test_return -1569.14057 committed, -1569.14032 replayed): an Adam run's class is
# its CPU vendor's (kernels.hardware_class; docs/reproduction.md, "Adam is not yet one class").


def on_the_other_vendor(result: ReplayResult) -> bool:
    """An Adam run made under the pinned kernels on the other CPU vendor: a difference is expected, and said."""
    return result.made_on.endswith("(Adam)") and result.made_on != result.this_machine


FAMILIES = {
    "toy-text": "twenty_seeds/frozenlake/sgd/iif-p50-4739bc/seed0",
    "classic-control": "twenty_seeds/acrobot/sgd/consensus-p50-12fcbe/seed7",
    "minigrid": "twenty_seeds/minigrid/sgd/iif-p12.5-12fcbe/seed3",
    "minigrid, Adam (optimizer=adam on the command line)": "twenty_seeds/minigrid/adam/iif-p12.5-12fcbe/seed3",
    "box2d": "twenty_seeds/lunarlander/sgd/iif-p12.5-32fc62/seed0",
    "continuous (env=gym)": PENDULUM,
    # made by a command line of its own (experiment_name=engine_equivalence, no overlay): its path's presets
    "no overlay": "engine_equivalence/frozenlake/sgd/iif-p50-4739bc/seed9",
}
# A run engine=default made with its one-run round (replay.ONE_RUN_ROUND_LAST), whose round 2 differs from the one
# engine's on the pinned kernels.
RETIRED = "main/acrobot/sgd/iif-p50-paper-92a12d/seed1"


@pytest.mark.parametrize("run", FAMILIES.values(), ids=FAMILIES.keys())
def test_a_committed_run_replays_bit_for_bit(run):
    [result] = replay_runs(compose_config(["task=replay", f"replay.run={run}", "replay.rounds=2"]))
    assert (result.run, result.rounds) == (run, 2)
    if on_the_other_vendor(result) and result.difference is not None:  # Pendulum's on an Intel CPU, from round 1
        assert not result.failed and result.line().endswith("is not a code change")
    else:
        assert result.difference is None


def test_runs_another_code_made_are_not_replayed():
    """The authors' runs and SB3's, under each of SB3's protocols (with and without gradient clipping)."""
    tidy = load_tidy(DATA)
    assert {"sb3", "sb3-noclip"} <= set(tidy.loc[tidy["experiment"] == "sb3", "protocol"])
    runs = committed_runs(tidy)
    assert set(runs["experiment"]).isdisjoint({"authors", "authors_eval_noise", "sb3"})
    assert {"main", "twenty_seeds", "engine_equivalence"} <= set(runs["experiment"])


def test_a_run_of_the_retired_engine_names_the_commit_to_replay_it_at_and_passes(capsys):
    [result] = run_task(compose_config(["task=replay", f"replay.run={RETIRED}", "replay.rounds=2"]))  # no exit 1
    assert result.made_by == "engine=default's one-run round (before runs recorded their commit)"
    assert result.difference == "round 2 n_kept: committed 1522, replayed 1525" and not result.failed
    last = ONE_RUN_ROUND_LAST[:7]
    assert result.line() == (
        f"replay {RETIRED}: {result.difference}; made by {result.made_by}, which this code no longer has (another "
        f"numerics class): a difference is expected and is not a code change; to replay it exactly, run this command "
        f"in a worktree of commit {last}, the last that has it (git worktree add ../rlinfluence-{last} {last}, then "
        "pip install -e there)"
    )
    assert capsys.readouterr().err.splitlines()[-1] == (
        "rlinfluence: replayed 1 committed run(s): 0 equal, 1 differ (1 made by a retired engine)"
    )


@pytest.mark.parametrize(
    ("engine", "commits", "retired"),
    [
        ("default", [None], True),  # before runs recorded their commit
        ("default", [ONE_RUN_ROUND_LAST[:12], None], True),
        ("default", ["0" * 40], True),  # a commit git cannot place (a shallow clone): not taken as the one engine's
        ("default", ["HEAD"], False),  # made since: the one engine, whose difference on the same hardware fails
        ("stacked", [None], False),  # the stacked engine's arithmetic is the one engine's
    ],
)
def test_which_runs_the_retired_engine_made(engine, commits, retired):
    rows = pd.DataFrame({"code_commit": [code_version()[0] if c == "HEAD" else c for c in commits]})
    assert (retired_engine({"engine": engine}, rows) is not None) == retired


def replay_of_a_moved_round(tmp_path, made_on: dict[str, str]):
    """The config of a replay of FrozenLake's standard PPO seed 0 (the twenty-seed study's, made by the one engine)
    whose committed round 1 was moved, as by a change of code, and whose rows were made on `made_on` (their hardware
    columns; {} for none recorded)."""
    tidy = read_tidy_csv(DATA / "twenty_seeds.frozenlake.ppo.csv")
    run = tidy[(tidy["method_tag"] == "ppo") & (tidy["seed"] == 0)].copy()
    run.loc[run["round"] == 1, "test_return"] += 0.001  # as if a change to the code had moved round 1
    hardware = made_on or dict.fromkeys(HARDWARE_COLUMNS)  # none recorded: the columns empty
    (tmp_path / "twenty_seeds.frozenlake.ppo.csv").write_bytes(tidy_csv_bytes(sort_tidy(run.assign(**hardware))))
    shutil.copy(DATA / "settings.json", tmp_path)
    replayed = "replay.run=twenty_seeds/frozenlake/sgd/ppo-4739bc/seed0"
    return compose_config(["task=replay", replayed, "replay.rounds=2", f"figures.data_dir={tmp_path}"])


def test_a_replay_that_differs_on_the_same_hardware_names_the_round_and_the_value_and_fails(tmp_path):
    this_machine = {"cpu": cpu_model(), "kernels": kernels_in_force(), "threads": "1", "device": "cpu"}
    cfg = replay_of_a_moved_round(tmp_path, this_machine)
    [result] = replay_runs(cfg)
    assert result.difference is not None and result.difference.startswith("round 1 test_return: committed ")
    assert result.line() == f"replay {result.run}: {result.difference}"
    with pytest.raises(SystemExit) as stop:
        run_task(cfg)
    assert stop.value.code == 1


OTHER_CPU = {
    "cpu": "Intel(R) Xeon(R) Platinum 8480+ (family 6, model 143)",
    "kernels": "native: ATen AVX512, MKL_CBWR unset, ONEDNN_MAX_CPU_ISA unset",
    "threads": "1",
    "device": "cpu",
}


@pytest.mark.parametrize(
    ("made_on", "named"),
    [
        ({}, "unknown hardware (the run was made before runs recorded it)"),
        (OTHER_CPU, f"{OTHER_CPU['cpu']} with native kernels (ATen AVX512, MKL_CBWR unset, ONEDNN_MAX_CPU_ISA unset)"),
    ],
    ids=["unrecorded", "another-cpu"],
)
def test_a_replay_that_differs_on_other_hardware_says_so_and_passes(tmp_path, capsys, made_on, named):
    [result] = run_task(replay_of_a_moved_round(tmp_path, made_on))  # no exit 1
    this_machine = hardware_class(cpu_model(), kernels_in_force(), "cpu")
    assert result.line() == (
        f"replay {result.run}: {result.difference}; made on {named}, this machine is {this_machine}: a difference "
        "here is expected from round 1 on and is not a code change"
    )
    assert capsys.readouterr().err.splitlines()[-1] == (
        "rlinfluence: replayed 1 committed run(s): 0 equal, 1 differ (1 made on other hardware)"
    )


def composed_path(overrides: list[str]) -> str:
    """<experiment>/<env>/<optimizer>/<leaf>/seed<k>: the run dir `overrides` make, as committed_runs names a run's."""
    cfg = compose("config", overrides=overrides)
    return f"{cfg.experiment_name}/{relative_run_dir(cfg).as_posix()}"


@pytest.mark.long
def test_every_committed_run_is_still_the_run_its_overlay_makes():
    """Each committed run's overlay job, with the settings its config_hash stands for, composes today to
    the same run dir (experiment, env, optimizer, method tag, protocol, config hash, seed): moving code or
    env ids (envs/ids.py) has changed no run's identity."""
    tidy, settings = load_tidy(DATA), load_settings(DATA)
    runs = committed_runs(tidy)
    with composing():
        # overrides_of: ConfigError for a run none makes. Its overrides are composed again here, so that the
        # run dir each one makes is checked against the committed run's, not taken on its word.
        made = [composed_path(overrides_of(run, settings)) for _, run in runs.iterrows()]
    assert made == list(runs["path"])


def replayed_pattern(csv_name: str) -> str:
    """The runs a committed tidy CSV holds, as replay.run names them: `<experiment>/*`, or for an experiment
    committed one CSV per env and arm (runs.ONE_CSV_PER_ARM), `<experiment>/<env>/*/<method_tag>-*` (the run's
    name goes on with its config hash)."""
    stem = csv_name.removesuffix(".csv")
    experiment, _, env_and_arm = stem.partition(".")
    env, _, arm = env_and_arm.partition(".")
    return f"{experiment}/{env}/*/{arm}-*" if experiment in ONE_CSV_PER_ARM else f"{stem}/*"


# The committed CSVs of our runs (another code's are named after it: authors*.csv, sb3.csv).
OUR_CSVS = sorted(path.name for path in DATA.glob("*.csv") if not path.stem.startswith(NOT_OURS))


def test_each_of_our_committed_csvs_names_the_runs_it_holds():
    """The long test below replays each CSV's runs by its pattern: every run of the CSV, none of another."""
    paths = committed_runs(load_tidy(DATA))["path"].tolist()
    for name in OUR_CSVS:
        pattern = replayed_pattern(name)
        held = sorted(committed_runs(read_tidy_csv(DATA / name))["path"])
        assert held and sorted(path for path in paths if fnmatch.fnmatchcase(path, pattern)) == held, name


@pytest.mark.long
@pytest.mark.parametrize("data", OUR_CSVS)
def test_every_committed_run_replays(data):
    results = replay_runs(compose_config(["task=replay", f"replay.run={replayed_pattern(data)}", "replay.rounds=2"]))
    # the retired engine's runs may differ from some round on (replay.retired_engine), and an Adam run made on the
    # other CPU vendor: each says so and passes
    differ = [r.run for r in results if r.difference is not None and r.made_by is None and not on_the_other_vendor(r)]
    assert differ == []


def test_every_committed_csv_is_rewritten_byte_identically_at_full_precision():
    for path in sorted(DATA.glob("*.csv")):  # every one has the provenance columns (blank where unknown)
        assert tidy_csv_bytes(read_tidy_csv(path)) == path.read_bytes(), path


def test_floats_are_written_to_round_trip():
    values = [0.1 + 0.2, -498.86, 1 / 3, 50.0, 1e-7, math.pi * 1e12, float("nan")]
    frame = pd.DataFrame({"value": values})
    back = pd.read_csv(pd.io.common.BytesIO(tidy_csv_bytes(frame)))["value"].tolist()
    assert back[:-1] == values[:-1] and math.isnan(back[-1])
    assert tidy_csv_bytes(frame).decode().splitlines()[4] == "50"


def test_a_run_records_its_code_and_library_versions_and_its_tidy_rows_carry_them(tmp_path):
    cfg = compose_config(["debug=smoke", f"runs_root={tmp_path}"])
    run_task(cfg)
    [process] = json.loads((run_dir(cfg) / "summary.json").read_text())["provenance"]
    commit, dirty = code_version()
    assert (process["code_commit"], process["code_dirty"]) == (commit, dirty) and commit is not None
    versions = dict(item.split("==") for item in process["versions"].split(";"))
    assert {"torch", "numpy", "gymnasium"} <= versions.keys()
    rows = tidy_from_runs(tmp_path)
    assert list(rows.columns[: len(TIDY_COLUMNS)]) == TIDY_COLUMNS
    assert set(rows["code_commit"]) == {commit} and set(rows["versions"]) == {process["versions"]}


def test_a_run_resumed_under_other_versions_lists_both(tmp_path):
    cfg = compose_config(["debug=smoke", f"runs_root={tmp_path}", "env.rounds=3"])
    path = run_dir(cfg)
    create_run_dir(path, str(tmp_path))
    write_identity(path, cfg)
    train(cfg, path, Resume(), last_round=1)  # stopped after round 1, as by an interrupt
    summary = json.loads((path / "summary.json").read_text())
    assert not (path / "DONE").exists() and summary["rounds_completed"] == 1
    earlier = {"code_commit": "0" * 40, "code_dirty": False, "versions": "torch==0.0"}
    (path / "summary.json").write_text(json.dumps(summary | {"provenance": [earlier]}))
    run_task(cfg)  # resumes under this checkout's code and versions
    processes = json.loads((path / "summary.json").read_text())["provenance"]
    assert processes[0] == earlier and len(processes) == 2
    rows = tidy_from_runs(tmp_path)
    assert set(rows["code_commit"]) == {f"{'0' * 40}+{processes[1]['code_commit']}"}
