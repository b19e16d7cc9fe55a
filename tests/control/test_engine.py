"""engine=stacked from the command line: each seed its own run (dir, identity, metrics), the same bits alone
or among other seeds in any order, resumed each from its own round after kill -9, and one line for what it
cannot run."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import cli_refusal, cli_run, config_refusal, metrics_rows, start_as_from_a_terminal, tiny
from rlinfluence.cli import check_sweep, pack_seeds, run_task
from rlinfluence.control.engine import Stack
from rlinfluence.control.trainer import Trainer
from rlinfluence.launch.manifest import replaced
from rlinfluence.round import run_round
from rlinfluence.run import rundir
from rlinfluence.run.checkpoint import CORRUPTION
from rlinfluence.run.identity import IDENTITY

STACKED = ("engine=stacked", "env.rounds=3")


def seed_dir(runs_root: Path, seed: int) -> Path:
    [path] = runs_root.rglob(f"seed{seed}")
    return path


# Seed 1 alone, among 3 and among 17 seeds (in other orders); 7 test episodes on 3 slots each, so slots end at
# different steps and the batched evaluation steps some of them only.
BATCHES = ("seeds=[1]", "seeds=[2,1,0]", f"seeds=[{','.join(map(str, [*range(16, 1, -1), 0, 1]))}]")
SMALL_EVALUATION = ("eval.episodes=7", "eval.n_parallel=3")


@pytest.mark.parametrize(
    "env, method, batches",
    [
        ("frozenlake", "ppo", BATCHES),
        ("frozenlake", "iif", BATCHES),
        ("frozenlake", "random", BATCHES[:2]),
        ("acrobot", "ppo", BATCHES),
        ("acrobot", "iif", BATCHES),
        # the further targets of a selection (held-out halves, the entropy guard) are each seed's own
        ("frozenlake", "iif_auto", BATCHES[:2]),
        ("frozenlake", "iif_guard", BATCHES[:2]),
        ("acrobot", "iif_guard_auto", BATCHES[:2]),
        ("frozenlake", "random25", BATCHES[:2]),
        ("acrobot", "consensus", BATCHES[:2]),
        ("frozenlake", "consensus method.granularity=episode", BATCHES[:2]),
        ("frozenlake", "iif method.granularity=episode", BATCHES[:2]),
        ("frozenlake", "advantage method.variant=h1", BATCHES[:2]),
        ("acrobot", "td_error", BATCHES[:2]),
        ("minigrid", "iif", BATCHES[:2]),  # a CNN
        ("doorkey", "iif", BATCHES[:2]),  # a CNN and Adam
        ("gym env.id=Pendulum-v1", "iif", BATCHES[:2]),  # continuous actions: a Gaussian head, each seed's log std
        ("bipedalwalker +env.make_kwargs.max_episode_steps=100", "iif", BATCHES[:2]),  # 4 action dims, Adam
        ("acrobot", "iif target=action target.state=[1,0,1,0,0,0] target.action=[2]", BATCHES[:2]),  # f_action
        # influence settings the stack's pass does not compute: each seed scored by its own Trainer
        ("frozenlake", "iif protocol=paper", BATCHES[:2]),  # Â per chunk of the seed's own random partition
        ("doorkey", "iif influence.preconditioner=adam", BATCHES[:2]),  # the seed's own Adam moments
        ("acrobot", "iif influence.backend=reference", BATCHES[:2]),
        ("frozenlake", "iif influence.checkpoints=every_step", BATCHES[:2]),  # summed at each seed's θ_j in the stack
        # planted records: each seed's own, every arm scored to rank them (ppo too)
        ("acrobot", "iif corruption.fraction=0.1 corruption.kind=advantage_sign", BATCHES[:2]),
        ("frozenlake", "ppo corruption.fraction=0.1 corruption.kind=reward", BATCHES[:2]),
    ],
)
def test_a_seeds_metrics_are_the_same_alone_or_among_others_in_another_order(tmp_path, env, method, batches):
    settings = (*STACKED, *SMALL_EVALUATION, *f"env={env}".split(), *f"method={method}".split())
    for n, seeds in enumerate(batches):
        run_task(tiny(tmp_path / str(n), *settings, seeds))
    alone = metrics_rows(seed_dir(tmp_path / "0", 1), timings=False)
    assert len(alone) == 4
    for n in range(1, len(batches)):
        assert metrics_rows(seed_dir(tmp_path / str(n), 1), timings=False) == alone
    others = [metrics_rows(seed_dir(tmp_path / "1", seed), timings=False) for seed in (0, 2)]
    assert all(rows != alone for rows in others)  # the seeds are runs of their own, not copies


@pytest.mark.parametrize(
    "settings",
    [
        "method=iif protocol=paper",
        "method=iif corruption.fraction=0.1 corruption.kind=advantage_sign",
        "method=ppo corruption.fraction=0.1 corruption.kind=reward",
    ],
)
def test_a_seed_scored_by_its_own_trainer_gets_the_same_rows_alone_or_among_others(tmp_path, settings):
    """Under influence settings the stack's pass does not compute, and with planted records, each seed's scores are
    its Trainer's, and a seed among others gets the rows it gets alone (engine=default, a stack of one): the same
    records, selections, planted-record detection, losses and test returns, round by round."""
    common = ("env=frozenlake", "env.rounds=3", *SMALL_EVALUATION, *settings.split())
    run_task(tiny(tmp_path / "default", *common, "seed=1"))
    run_task(tiny(tmp_path / "stacked", *common, "engine=stacked", "seeds=[0,1]"))

    def trained(root: Path) -> list[dict[str, str]]:
        return metrics_rows(seed_dir(root, 1), timings=False)

    assert len(trained(tmp_path / "default")) == 4
    assert trained(tmp_path / "stacked") == trained(tmp_path / "default")
    if "corruption" in settings:  # the planted records and how well each round's scores and selection found them
        planted = [(seed_dir(tmp_path / root, 1) / CORRUPTION).read_text() for root in ("default", "stacked")]
        assert planted[0].count("\n") == 3 and planted[1] == planted[0]


@pytest.mark.parametrize("method", ["iif_guard_auto", "consensus"])
def test_a_selection_scores_on_its_seeds_own_round_start(tmp_path, method):
    """The stack's scores are on the method's target (consensus: the round's mean loss), and the further targets
    a selection asks for (held-out halves, the entropy guard) are scored at the seed's own θ_k: on that target
    the seed's attribution gives the stack's scores, to rounding, in every round."""
    trainers = [Trainer(tiny(tmp_path, "engine=stacked", f"method={method}", f"seed={seed}")) for seed in (0, 1)]
    asked = []

    def spying(trainer: Trainer):
        select = trainer.method.select

        def spy(buffer, scores, rng, attribute=None):
            asked.append((scores, attribute(trainer.method.scored_target(trainer.target))))
            return select(buffer, scores, rng, attribute)

        return spy

    try:
        for trainer in trainers:
            trainer.method.select = spying(trainer)  # type: ignore[method-assign]
        for k in (1, 2, 3):
            run_round(Stack(trainers), k)
    finally:
        for trainer in trainers:
            trainer.close()
    assert len(asked) == 6
    for scores, rescored in asked:
        np.testing.assert_allclose(rescored, scores, rtol=1e-3, atol=1e-4 * np.abs(scores).max())


def test_each_seed_is_a_run_of_its_own_whose_identity_names_the_engine(tmp_path):
    cfg = tiny(tmp_path, *STACKED, "seeds=[0,2]")
    run_task(cfg)
    for seed in (0, 2):
        path = seed_dir(tmp_path, seed)
        assert {"identity.json", "metrics.csv", "summary.json", "checkpoint.pt", "DONE"} <= {
            p.name for p in path.iterdir()
        }
        identity = json.loads((path / IDENTITY).read_text())
        assert identity["settings"]["engine"] == "stacked" and identity["non_default"]["engine"] == "stacked"
        assert "seeds" not in identity["settings"]  # which seeds share a process is not a seed's setting
        assert json.loads((path / "summary.json").read_text())["seed"] == seed
    # today's engine's run of the same settings has another run dir
    default = rundir.run_dir(tiny(tmp_path, "env.rounds=3", "seed=0"))
    assert default.parent != seed_dir(tmp_path, 0).parent and not default.exists()


def test_a_finished_batch_is_skipped_and_a_seed_added_later_trains_alone(tmp_path):
    run_task(tiny(tmp_path, *STACKED, "seeds=[0,1]"))
    before = (seed_dir(tmp_path, 0) / "metrics.csv").read_text()
    run_task(tiny(tmp_path, *STACKED, "seeds=[0,1,2]"))
    assert (seed_dir(tmp_path, 0) / "metrics.csv").read_text() == before  # finished: not trained again
    assert len(metrics_rows(seed_dir(tmp_path, 2))) == 4


def test_a_broken_seeds_refusal_names_that_seeds_own_restart(tmp_path):
    run_task(tiny(tmp_path, *STACKED, "seeds=[0,1,2]"))
    (seed_dir(tmp_path, 2) / "DONE").unlink()
    (seed_dir(tmp_path, 2) / "checkpoint.pt").write_bytes(b"")
    others = {seed: (seed_dir(tmp_path, seed) / "metrics.csv").read_text() for seed in (0, 1)}
    line = cli_refusal(cli_run(tmp_path, "debug=smoke", *STACKED, "seeds=[0,1,2]"))
    assert line == (
        f"rlinfluence: {seed_dir(tmp_path, 2)}/checkpoint.pt is unreadable (EOFError: Ran out of input); "
        "seeds=[2] force=true (the same command otherwise) restarts seed 2 alone from scratch, deleting its results, "
        "and the same command then trains the set (force=true on the set would restart every seed of it)"
    )
    # the way out it names: the broken seed alone, then the set; the other seeds' runs are not touched
    assert cli_run(tmp_path, "debug=smoke", *STACKED, "seeds=[2]", "force=true").returncode == 0
    assert cli_run(tmp_path, "debug=smoke", *STACKED, "seeds=[0,1,2]").returncode == 0
    assert {seed: (seed_dir(tmp_path, seed) / "metrics.csv").read_text() for seed in (0, 1)} == others
    assert len(metrics_rows(seed_dir(tmp_path, 2))) == 4


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["env=toxicity_tiny"], "engine=stacked runs env.agent=control only; this command has env.agent=lm"),
        (
            ["task=diagnose", "seeds=[0,1]"],
            "task=diagnose looks into one seed's run: give engine=stacked seed=K, not seeds=[0, 1] (a set of seeds is "
            "task=train's)",
        ),
        (["seeds=[1,1]"], "seeds=[1, 1] must list distinct seeds >= 0"),
    ],
)
def test_what_the_stacked_engine_cannot_run_is_refused_in_one_line(overrides, message):
    assert message in config_refusal("debug=smoke", "engine=stacked", *overrides)


def test_seeds_without_the_stacked_engine_are_refused():
    assert (
        config_refusal("debug=smoke", "seeds=[0,1]")
        == "seeds=[0, 1] lists the seeds of engine=stacked: add engine=stacked"
    )


def test_a_refused_stacked_command_writes_nothing(tmp_path):
    result = cli_run(tmp_path, "debug=smoke", "engine=stacked", "seeds=[0,1,0]")
    assert "seeds=[0, 1, 0] must list distinct seeds >= 0" in cli_refusal(result)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


ROUNDS = 6


def command(runs_root: Path, seeds: str, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rlinfluence",
        "engine=stacked",
        f"seeds={seeds}",
        "method=iif",
        "env.n_steps=256",
        f"env.rounds={ROUNDS}",
        "eval.episodes=8",
        "eval.n_parallel=4",
        "logger=disabled",
        "progress=false",
        f"runs_root={runs_root}",
        *overrides,
    ]


def rounds_logged(runs_root: Path, seed: int) -> int:
    paths = list(runs_root.rglob(f"seed{seed}/metrics.csv"))
    return max(len(paths[0].read_text().splitlines()) - 1, 0) if paths else 0


def run_until_stopped(runs_root: Path, seeds: str, seed: int, rounds: int, signal_number: int, *overrides: str) -> str:
    """The batch `seeds`, sent `signal_number` once `seed` has logged `rounds` rounds; its last line on stderr."""
    process = start_as_from_a_terminal(
        command(runs_root, seeds, *overrides), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while rounds_logged(runs_root, seed) < rounds and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(process.pid, signal_number)
    _, stderr = process.communicate()
    assert process.returncode == (130 if signal_number == signal.SIGINT else -signal.SIGKILL), stderr
    return stderr.strip().splitlines()[-1] if stderr.strip() else ""


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])  # Adam: each seed's moments and step count resume
def test_a_batch_interrupted_or_killed_minus_9_resumes_each_seed_from_its_own_round(tmp_path, optimizer):
    setting = f"optimizer={optimizer}"
    reference = tmp_path / "reference"
    subprocess.run(command(reference, "[0,1,2]", setting), check=True, capture_output=True, timeout=300)
    interrupted = tmp_path / "interrupted"
    stopped = run_until_stopped(interrupted, "[1]", 1, 3, signal.SIGINT, setting)  # seed 1 ahead of the others
    assert stopped.startswith("rlinfluence: interrupted in round ") and "rerun the same command" in stopped
    run_until_stopped(interrupted, "[0,1,2]", 0, 2, signal.SIGKILL, setting)
    assert rounds_logged(interrupted, 1) > rounds_logged(interrupted, 0)
    assert rounds_logged(interrupted, 1) < ROUNDS + 1, "the batch finished before it could be killed"
    subprocess.run(command(interrupted, "[0,1,2]", setting), check=True, capture_output=True, timeout=300)
    for seed in (0, 1, 2):
        expected = metrics_rows(seed_dir(reference, seed), timings=False)
        assert len(expected) == ROUNDS + 1
        assert metrics_rows(seed_dir(interrupted, seed), timings=False) == expected


def test_a_sweep_over_seeds_runs_each_configs_seeds_in_one_process(tmp_path):
    result = cli_run(tmp_path, "-m", "debug=smoke", "engine=stacked", "method=iif,ppo", "seed=range(3)")
    assert result.returncode == 0, result.stderr
    assert "Launching 2 jobs" in result.stdout and "seeds=[0,1,2]" in result.stdout
    assert "sweep of 6 runs: 6 trained, 0 resumed, 0 skipped, 0 failed or not run" in result.stderr
    assert len(list(tmp_path.rglob("DONE"))) == 6
    # a seed's run is the one a command of its own makes
    run_task(tiny(tmp_path / "alone", "engine=stacked", "method=iif", "seed=2"))
    [swept] = [path for path in tmp_path.rglob("seed2") if "iif" in str(path) and "alone" not in str(path)]
    assert metrics_rows(swept, timings=False) == metrics_rows(seed_dir(tmp_path / "alone", 2), timings=False)


@pytest.mark.parametrize("seeds", ["seeds=abc", "seeds=5", "seeds=[0,1.5]", "seeds=[true,2]"])
def test_seeds_that_are_not_a_list_of_integers_get_our_one_line(tmp_path, seeds):
    line = cli_refusal(cli_run(tmp_path, "debug=smoke", "engine=stacked", seeds))
    assert line == (
        f"rlinfluence: config error: {seeds} is not a list of integer seeds: give a list of integer seeds, "
        "seeds=[0,1,2], or a range, seeds='range(20)'"
    )
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_seeds_as_a_range_are_the_seeds_it_names_and_seed_beside_seeds_is_refused(tmp_path):
    result = cli_run(tmp_path, "debug=smoke", "engine=stacked", "seeds=range(1,3)")
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in tmp_path.rglob("seed*") if (path / "DONE").exists()) == ["seed1", "seed2"]
    line = cli_refusal(cli_run(tmp_path / "both", "debug=smoke", "engine=stacked", "seeds=[0,1]", "seed=5"))
    assert line == (
        "rlinfluence: config error: seeds=[0,1] and seed=5 both name the seeds: engine=stacked trains the seeds of "
        "seeds=, so give seeds= alone"
    )
    negative = cli_refusal(cli_run(tmp_path / "negative", "debug=smoke", "engine=stacked", "seeds=[-1,2]"))
    assert negative == "rlinfluence: config error: seeds=[-1, 2] must list distinct seeds >= 0"


def test_an_overlays_seed_sweep_beside_engine_stacked_is_packed(tmp_path):
    result = cli_run(
        tmp_path, "-m", "+experiment=main", "env=frozenlake", "method=ppo", "engine=stacked", "debug=smoke"
    )
    assert result.returncode == 0, result.stderr
    assert "Launching 1 jobs" in result.stdout and "seeds=[0,1,2,3,4]" in result.stdout
    assert "sweep of 5 runs: 5 trained" in result.stderr


def test_a_sweeps_config_asked_for_shows_its_jobs(tmp_path):
    sweep = ["-m", "+experiment=filters_doorkey", "env=frozenlake", "seed=range(20)", "engine=stacked"]
    command = [sys.executable, "-m", "rlinfluence", *sweep, f"runs_root={tmp_path}", "--cfg", "job"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    jobs = result.stdout.strip().splitlines()
    assert len(jobs) == 7 and all("'seeds=[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19]'" in job for job in jobs)
    assert result.stderr.strip() == (
        "rlinfluence: the sweep's 7 job(s) above, one per line; a sweep has no one config: "
        "`rlinfluence <a job's overrides> --cfg job` shows that job's"
    )
    # a job's line is a command that runs as it is: its config shows
    shown = subprocess.run(
        [sys.executable, "-m", "rlinfluence", *shlex.split(jobs[0]), "--cfg", "job"], capture_output=True, text=True
    )
    assert shown.returncode == 0 and "engine: stacked" in shown.stdout, shown.stderr


def test_a_seed_sweep_beside_a_seed_list_is_refused(tmp_path):
    result = cli_run(tmp_path, "-m", "debug=smoke", "engine=stacked", "seed=0,1", "seeds=[2,3]")
    assert "engine=stacked packs seed=0,1 into seeds=[...]" in cli_refusal(result)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_a_command_line_seed_sweep_replaces_an_overlays_once_packed(tmp_path):
    overrides = ["+experiment=main", "env=frozenlake", "method=iif", "engine=stacked", "seed=range(3)"]
    overrides += ["debug=smoke", f"runs_root={tmp_path}"]
    jobs = check_sweep(replaced(overrides, pack_seeds(overrides)))
    # the overlay's own seed sweep (range(0,5)) would run the packed job once per its seeds
    assert sorted(job.run_dir.name for job in jobs) == ["seed0", "seed1", "seed2"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
@pytest.mark.parametrize("env", ["frozenlake", "doorkey"])  # an MLP with SGD; a CNN with Adam
def test_a_stacked_set_trains_on_cuda(tmp_path, env):
    """The stack, its optimizer, records and scores on the GPU: each seed trains its rounds to finite returns, and its
    identity names the device."""
    run_task(tiny(tmp_path, *STACKED, *SMALL_EVALUATION, f"env={env}", "method=iif", "device=cuda", "seeds=[0,1,2]"))
    for seed in (0, 1, 2):
        rows = metrics_rows(seed_dir(tmp_path, seed), timings=False)
        assert [row["round"] for row in rows] == ["0", "1", "2", "3"]
        assert all(np.isfinite(float(row["test_return"])) for row in rows)
        assert json.loads((seed_dir(tmp_path, seed) / IDENTITY).read_text())["settings"]["device"] == "cuda"


@pytest.mark.parametrize("task", ["intervene", "counterfactual"])
def test_an_analysis_looks_into_a_seed_trained_by_the_stacked_engine(tmp_path, task):
    """The analysis trains its standard run on engine=stacked (its own run dir: engine=stacked is in its identity)
    and replays its rounds from the run's snapshots: with SGD under the pinned kernels, the replayed update of every
    record gives the run's own weights, bit for bit (matches_run)."""
    runs, data = tmp_path / "runs", tmp_path / "data"
    common = ("env=frozenlake", "env.rounds=3", "eval.episodes=4", f"task={task}", f"figures.data_dir={data}")
    table = run_task(tiny(runs, *common, "engine=stacked", "seed=1"))
    assert (table["matches_run"].dropna() == True).all() and table["matches_run"].notna().any()  # noqa: E712
    [identity] = runs.rglob(IDENTITY)
    assert json.loads(identity.read_text())["settings"]["engine"] == "stacked"


def test_every_step_influence_is_summed_for_each_stacked_seed(tmp_path):
    """influence.checkpoints=every_step on the stack: each seed's rows carry how well its round-start scores rank its
    every-step influence, a rank correlation in every trained round."""
    every_step = ("method=iif", "influence.checkpoints=every_step", "seeds=[0,1]")
    run_task(tiny(tmp_path, *STACKED, *SMALL_EVALUATION, *every_step))
    for seed in (0, 1):
        rows = metrics_rows(seed_dir(tmp_path, seed), timings=False)[1:]
        assert len(rows) == 3 and all(-1 <= float(row["influence_step_spearman"]) <= 1 for row in rows)
