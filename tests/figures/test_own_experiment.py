"""`task=figures figures.experiment=<name>` (issue 32): the curves and table of a user's own experiment, drawn
from its run dirs, written beside them; the paper's committed data is never touched."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import cli_refusal, compose_config, refusal
from rlinfluence import metrics
from rlinfluence.choices import ConfigError
from rlinfluence.cli import run_task
from rlinfluence.run.checkpoint import RunDirError
from test_committed import COMMITTED, fingerprint, rlinfluence
from test_figures import files, table, write_run

ARMS = ("iif", "ppo")
OUTPUTS = [
    "frozenlake_curves.pdf",
    "frozenlake_curves.png",
    "frozenlake_per_seed.csv",
    "frozenlake_table.md",
    "frozenlake_table.tex",
]


def figures(runs_root, experiment: str = "mine", *overrides: str):
    """task=figures in this process; `runs_root` None leaves figures.runs_root unset."""
    root = [] if runs_root is None else [f"figures.runs_root={runs_root}"]
    return run_task(compose_config(["task=figures", *root, f"figures.experiment={experiment}", *overrides]))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A tiny real sweep of experiment_name=mine: IIF and standard PPO, seed 0, 2 rounds of FrozenLake."""
    root = tmp_path_factory.mktemp("runs")
    for method in ARMS:
        run_task(compose_config(["debug=smoke", f"runs_root={root}", "experiment_name=mine", f"method={method}"]))
    return root


def final_return(run_dir) -> float:
    """The test return of a run's last evaluated round, read back from its metrics.csv."""
    return pd.read_csv(run_dir / "metrics.csv")["test_return"].dropna().iloc[-1]


def test_a_sweeps_curves_and_table_are_written_beside_its_runs(sweep):
    before = fingerprint(COMMITTED)
    result = rlinfluence("task=figures", f"figures.runs_root={sweep}", "figures.experiment=mine", cwd=sweep)
    assert result.returncode == 0, result.stderr
    out = sweep / "mine" / "figures"
    assert result.stdout.strip().splitlines()[-1] == (
        f"rlinfluence: mine: curves and table of frozenlake (2 arm(s), 1 seed(s)), written to {out}"
    )
    assert sorted(files(out)) == OUTPUTS
    runs = {run_dir.parent.name.split("-")[0]: run_dir for run_dir in sorted(sweep.rglob("seed0"))}
    std_curve = pd.read_csv(runs["ppo"] / "metrics.csv")["test_return"]
    iif_curve = pd.read_csv(runs["iif"] / "metrics.csv")["test_return"]
    rows = table(out, "frozenlake_table").set_index("Arm")
    assert rows.loc["iif-p50", "Final test return"] == f"{final_return(runs['iif']):.2f}"
    assert rows.loc["ppo", "Final test return"] == f"{final_return(runs['ppo']):.2f}"
    assert rows.loc["ppo", "SE_ave (%)"] == "reference" and rows["Seeds"].tolist() == ["1", "1"]
    per_seed = pd.read_csv(out / "frozenlake_per_seed.csv").set_index("arm")
    assert per_seed.loc["iif-p50", "SE_ave"] == pytest.approx(metrics.se_ave(std_curve, iif_curve), nan_ok=True)
    assert per_seed.loc["iif-p50", "SE_peak"] == pytest.approx(metrics.se_peak(std_curve, iif_curve), nan_ok=True)
    written = files(out)
    figures(sweep)  # a rerun, in this process
    assert files(out) == written
    assert fingerprint(COMMITTED) == before


def test_the_table_pairs_each_arm_with_standard_ppo_of_its_seed_and_protocol(tmp_path):
    # test_figures' curves: against PPO, IIF has SE_ave 33.3 %, SE_peak 50 %, RT_peak 58.3 % on every seed.
    for seed in (0, 1):
        write_run(tmp_path, "mine", "acrobot", "ppo", seed)
        write_run(tmp_path, "mine", "acrobot", "iif-p50", seed)
    write_run(tmp_path, "mine", "acrobot", "iif-p50", 0, protocol="paper")  # no PPO under the paper's protocol
    write_run(tmp_path, "other", "acrobot", "random-p50", 0)
    figures(tmp_path, "mine", f"figures.out_dir={tmp_path / 'out'}")
    rows = table(tmp_path / "out", "acrobot_table")
    assert rows.to_dict("records") == [
        {
            "Arm": "iif-p50",
            "Seeds": "2",
            "Final test return": "10.00 ± 7.07",
            "SE_ave (%)": "33.3 ± 0.0",
            "SE_peak (%)": "50.0 ± 0.0",
            "RT_peak (%)": "58.3 ± 0.0",
            "Unreached levels": "0 / 8",
        },
        {
            "Arm": "iif-p50-paper",
            "Seeds": "1",
            "Final test return": "5.00",
            "SE_ave (%)": "none (1 of 1 seeds)",
            "SE_peak (%)": "none (1 of 1 seeds)",
            "RT_peak (%)": "none (1 of 1 seeds)",
            "Unreached levels": "0 / 0",
        },
        {
            "Arm": "ppo",
            "Seeds": "2",
            "Final test return": "9.00 ± 7.07",
            **dict.fromkeys(["SE_ave (%)", "SE_peak (%)", "RT_peak (%)", "Unreached levels"], "reference"),
        },
    ]
    assert not (tmp_path / "mine" / "figures").exists()  # figures.out_dir, when set, is where they go


def refused(
    tmp_path,
    error: type[Exception],
    message: str,
    *overrides: str,
    experiment: str = "mine",
    runs_root: str | None = "runs",
) -> None:
    refused_with = refusal(lambda: figures(runs_root and tmp_path / runs_root, experiment, *overrides), error)
    assert refused_with.startswith(message)
    assert not list(tmp_path.rglob("figures"))


def test_an_experiment_without_finished_runs_is_refused_naming_those_there(tmp_path):
    write_run(tmp_path / "runs", "mine", "acrobot", "ppo", 0)
    write_run(tmp_path / "runs", "main", "acrobot", "ppo", 0)
    write_run(tmp_path / "runs", "unfinished", "acrobot", "ppo", 0, done=False)
    refused(
        tmp_path,
        ConfigError,
        f"figures.experiment=unfinished has no finished run under {tmp_path / 'runs'} "
        f"(experiments with finished runs there: main, mine)",
        experiment="unfinished",
    )


def test_one_envs_runs_made_with_different_settings_are_refused(tmp_path):
    write_run(tmp_path / "runs", "mine", "acrobot", "ppo", 0, config_hash="aaaaaa")
    write_run(tmp_path / "runs", "mine", "acrobot", "iif-p50", 0, config_hash="bbbbbb")
    refused(tmp_path, RunDirError, f"{tmp_path / 'runs'}: the runs of mine/acrobot were made with different settings")
    write_run(tmp_path / "runs", "mine", "acrobot", "ppo", 0, config_hash="bbbbbb")  # the same arm and seed, twice
    refused(
        tmp_path,
        RunDirError,
        f"{tmp_path / 'runs'}: several runs share experiment/env/optimizer/method_tag/protocol/seed "
        "mine/acrobot/sgd/ppo/clean/0",
    )


def test_a_run_dir_with_rounds_written_twice_is_named_with_its_rows(tmp_path):
    """A run dir two processes wrote at once (before a run dir had one writer): the refusal names its repeated
    rounds by line, not "several runs"."""
    run_dir = write_run(tmp_path / "runs", "mine", "acrobot", "ppo", 0)
    metrics_csv = run_dir / "metrics.csv"
    header, *rows = metrics_csv.read_text().splitlines()
    metrics_csv.write_text("\n".join([header, *rows[:3], *rows[1:]]) + "\n")  # rounds 1 and 2 again
    refused(
        tmp_path,
        RunDirError,
        f"{tmp_path / 'runs'}: {metrics_csv} has 2 round(s) more than once (round 1 on lines 3, 5; round 2 on lines "
        "4, 6): two processes trained this run dir at once; retrain it with force=true",
    )


def test_settings_the_experiments_figures_cannot_use_are_refused(tmp_path):
    write_run(tmp_path / "runs", "mine", "acrobot", "ppo", 0)
    refused(tmp_path, ConfigError, f"figures.runs_root={tmp_path / 'none'} is not a directory", runs_root="none")
    refused(
        tmp_path,
        ConfigError,
        "figures.experiment=mine draws the runs under figures.runs_root, which is not set",
        runs_root=None,
    )
    refused(
        tmp_path,
        ConfigError,
        "figures.replace=mine/acrobot replaces committed results",
        "figures.replace=[mine/acrobot]",
    )
    refused(
        tmp_path,
        ConfigError,
        f"figures.out_dir={COMMITTED / 'data' / 'x'} is in the paper's data",
        f"figures.out_dir={COMMITTED / 'data' / 'x'}",
    )


def test_a_refusal_is_one_line_exit_2(tmp_path):
    write_run(tmp_path / "runs", "mine", "acrobot", "ppo", 0)
    result = rlinfluence(
        "task=figures", f"figures.runs_root={tmp_path / 'runs'}", "figures.experiment=nope", cwd=tmp_path
    )
    assert cli_refusal(result) == (
        f"rlinfluence: config error: figures.experiment=nope has no finished run under "
        f"{tmp_path / 'runs'} (experiments with finished runs there: mine)"
    )
    assert not list(tmp_path.rglob("figures"))
