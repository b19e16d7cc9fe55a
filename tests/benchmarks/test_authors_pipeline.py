"""benchmarks/authors_pipeline: the converter reads the round from the checkpoint each test loaded, and the
driver's shim changes only the test scripts' episode count. Result files here hold the lines the
authors' scripts print (copied from real runs, abridged)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rlinfluence.config.paths import REPO_ROOT

PIPELINE = REPO_ROOT / "benchmarks" / "authors_pipeline"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, PIPELINE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


convert, driver = load("convert"), load("driver")
MODELS = "models_minigrid/minigrid_88_sgd_lr-5e-3_feat-64_step-80k_seed-0"
TRACIN = "./models_minigrid/minigrid_act-7_88_sgd_lr-5e-3_feat-64_step-80k_TracIn_0-{i}-{j}_neg-bottom-12.5_valid-x"


def standard_file(returns: list[float]) -> str:
    return "".join(
        f"env is : MiniGrid-Empty-8x8-v0\n"
        f"loaded model with initial policy {MODELS}/policy_grad_{320 * k}.zip\n"
        f"number of actions: 7\nGenerated 100 fixed initial states.\n"
        f"Average return J over fixed states: {r}\n"
        for k, r in enumerate(returns)
    )


def iif_file(i: int, value: float) -> str:
    # The exploration step loads θ^i ("... done <path>") before the test loads θ^(i+1).
    return (
        f"loaded model with initial policy done {TRACIN.format(i=i - 1, j=i)}/policy_grad_{320 * i}.zip\n"
        f"Time elapsed after exploration: 13 seconds\nTime elapsed after TracIn computation: 8 seconds\n"
        f"len remaining records 1918\nTime elapsed after dataset selection and training: 15 seconds\n"
        f"loaded model with initial policy {TRACIN.format(i=i, j=i + 1)}/policy_grad_{320 * (i + 1)}.zip\n"
        f"Generated 100 fixed initial states.\nAverage return J over fixed states: {value}\n"
        f"Time elapsed after final testing: 39 seconds\n"
    )


def write_seed(work: Path, rounds: int, iif_rounds: int) -> None:
    results = work / "minigrid" / "seed0" / "results_minigrid"
    results.mkdir(parents=True)
    (results / convert.ENVS["minigrid"]["standard"].format(seed=0)).write_text(
        standard_file([0.1 * k for k in range(rounds + 1)])
    )
    for i in range(iif_rounds):
        (results / convert.ENVS["minigrid"]["iif"].format(i=i, j=i + 1, seed=0)).write_text(iif_file(i, 0.5 + i))


def test_each_row_is_the_policy_its_test_loaded(tmp_path):
    write_seed(tmp_path, rounds=20, iif_rounds=20)
    rows = convert.convert(tmp_path, None)
    iif = rows[rows["method"] == "iif"].set_index("round")
    # Round k = θ^k in both arms: their IIF file i tests θ^(i+1); round 0 is the standard run's θ^0.
    assert iif.index.tolist() == list(range(21))
    assert iif.loc[1, "test_return"] == 0.5 and iif.loc[20, "test_return"] == 19.5
    assert iif.loc[0, "tested_checkpoint"].endswith(f"{MODELS}/policy_grad_0.zip")
    assert iif.loc[3, "tested_checkpoint"].endswith("TracIn_0-2-3_neg-bottom-12.5_valid-x/policy_grad_960.zip")
    assert iif.loc[3, ["n_kept", "time_collect", "time_influence", "time_update", "time_eval"]].tolist() == [
        1918,
        13,
        8,
        15,
        39,
    ]
    standard = rows[rows["method"] == "ppo"].set_index("round")
    assert standard.loc[20, "test_return"] == pytest.approx(2.0) and (standard["n_kept"] == standard["n_records"]).all()
    assert rows["test_episodes"].eq(100).all() and rows["config_hash"].nunique() == 1
    assert set(rows["method_tag"]) == {"ppo", "iif-p12.5"} and rows["experiment"].eq("authors").all()


def test_an_unfinished_iif_loop_writes_no_partial_run(tmp_path, capsys):
    write_seed(tmp_path, rounds=20, iif_rounds=7)
    rows = convert.convert(tmp_path, None)
    assert set(rows["method"]) == {"ppo"}
    assert "IIF loop unfinished" in capsys.readouterr().out


def test_converting_again_replaces_its_runs_and_keeps_the_others(tmp_path):
    write_seed(tmp_path / "work", rounds=20, iif_rounds=20)
    out = tmp_path / "authors.csv"
    other = convert.convert(tmp_path / "work", None).assign(seed=4)  # a seed converted earlier, from another work dir
    other.to_csv(out, index=False)
    subprocess.run([sys.executable, PIPELINE / "convert.py", "--work", tmp_path / "work", "--out", out], check=True)
    subprocess.run([sys.executable, PIPELINE / "convert.py", "--work", tmp_path / "work", "--out", out], check=True)
    rows = pd.read_csv(out)
    assert rows.groupby(["method", "seed"]).size().to_dict() == {
        ("iif", 0): 21,
        ("iif", 4): 21,
        ("ppo", 0): 21,
        ("ppo", 4): 21,
    }


def test_the_shim_changes_only_the_test_scripts_episode_count(tmp_path):
    env = driver.shim_env(Path("/"), tmp_path, test_episodes=50)
    shim = tmp_path / ".shim" / "python"
    shim.write_text(shim.read_text().replace('exec "/bin/python"', "exec echo"))  # print what python would get
    test = subprocess.run(
        [shim, "test_lunarlander_return.py", "--policy_path", "p.zip", "--num_episodes", "1000"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    train = subprocess.run(
        [shim, "train_lunarlander_with_given_batches.py", "--num_episodes", "1000"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert test == ["test_lunarlander_return.py", "--policy_path", "p.zip", "--num_episodes", "50"]
    assert train == ["train_lunarlander_with_given_batches.py", "--num_episodes", "1000"]


def test_the_evaluation_noise_runs_join_their_own_experiment(tmp_path):
    write_seed(tmp_path / "work", rounds=20, iif_rounds=20)
    out = tmp_path / "authors_eval_noise.csv"
    command = [sys.executable, PIPELINE / "convert.py", "--work", tmp_path / "work", "--out", out]
    subprocess.run([*command, "--experiment", "authors_eval_noise"], check=True)
    assert pd.read_csv(out)["experiment"].unique().tolist() == ["authors_eval_noise"]
    refused = subprocess.run([*command, "--experiment", "authors_1000"], capture_output=True, text=True)
    assert refused.returncode == 2 and "invalid choice: 'authors_1000'" in refused.stderr
