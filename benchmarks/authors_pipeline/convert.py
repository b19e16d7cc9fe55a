"""Parse the authors' result files into our tidy rows: paper_figures/data/authors.csv.

    python benchmarks/authors_pipeline/convert.py --work ~/authors-work
    python benchmarks/authors_pipeline/convert.py --work ~/authors-work-1000 --experiment authors_eval_noise

Reads <work>/<env>/seed<k>/results_<env>/ as driver.py leaves it. Each test in their files names the
checkpoint it loaded (`policy_grad_<N>.zip`, N gradient updates; 320 per round), so the round of a
row is read from the file, not assumed: round k = the policy after k completed updates, θ^k, for
both arms. (Their IIF round-i file tests θ^(i+1), their standard test at index k tests θ^k.) The
IIF arm's round 0 is θ^0, the standard run's first checkpoint that their IIF loop starts from, so it
is the standard test's row. Only finished runs are written: a standard test of every round their
script tests, or an IIF loop with every round's file and test. Rows of (env, arm, seed) found in
the work dir replace those in the CSV; others are kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.figures.runs import EXTERNAL_RUN_KEY, TIDY_COLUMNS, commit_external_runs
from rlinfluence.run.provenance import LIBRARIES

UPDATES_PER_ROUND = 320  # 2,048 records / 64 per minibatch x 10 epochs
N_STEPS = 2048
P = 12.5
DATA_DIR = REPO_ROOT / "paper_figures" / "data"
# The experiment a work dir's runs belong to, each with its own tidy CSV (<experiment>.csv): the three-way
# comparison's runs test as many episodes a round as our committed runs; the evaluation-noise lead's (issue 42,
# lead 2) test their scripts' own 1,000 on seeds the three-way comparison has.
EXPERIMENTS = ("authors", "authors_eval_noise")
EXTRA_COLUMNS = ["source", "test_episodes", "tested_checkpoint", "result_file"]

# What each env's runs are made of; hashed into config_hash with the test-episode count.
ENVS = {
    "lunarlander": {
        "env_id": "LunarLander-v2",
        "rounds": {"ppo": 100, "iif": 100},
        "standard": "result_lunarlander_lr-5e-3_step-310k_seed-{seed}_0-100.txt",
        "iif": "result_lunarlander_rollout_train_surrogate_PG-SI-CP-ghost_adaptive_rol-0-{i}-{j}"
        "_neg-bottom-12.5_gae-lambda-1_2k_lambda_seed-{seed}.txt",
        "scripts": [
            "run_lunarlander_std_training.sh",
            "run_lunarlander_std_test.sh <seed> 0 100",
            "run_iif_lunarlander_sgd.sh <seed> 12.5 <cpus>",
        ],
    },
    "minigrid": {
        "env_id": "MiniGrid-Empty-8x8-v0",
        "rounds": {"ppo": 20, "iif": 20},
        "standard": "result_minigrid_88_sgd_lr-5e-3_feat-64_step-80k_seed-{seed}.txt",
        "iif": "result_minigrid_act7_88_sgd_rollout_train_surrogate_PG-SI-CP-ghostori_adaptive_rol-0-{i}-{j}"
        "_neg-bottom-12.5_gae-lambda-1_2k_lambda_seed-{seed}.txt",
        "scripts": [
            "run_train_minigrid_sgd.sh <seed>",
            "run_eval_baseline.sh <seed> <cpus>",
            "run_iif_minigrid.sh <seed> 12.5 <cpus>",
        ],
    },
}
RELEASE = "github.com/LDAORL/LDA-ORL@c1d5764"

# The line each test script prints when it loads the policy it tests (MiniGrid's exploration step prints
# "loaded model with initial policy done <path>" for θ^i first; the test's own line comes last).
CHECKPOINT = re.compile(
    r"(?:Loaded policy from:|loaded model with initial policy)\s+(?:done\s+)?"
    r"(\S*policy_grad_(\d+)\.zip)"
)
RETURN = re.compile(r"(?:Average return over (\d+) episodes|Average return J over fixed states):\s+(\S+)")
EPISODES = re.compile(r"Generated (\d+) fixed initial states")
KEPT = re.compile(r"len remaining records (\d+)")
# Their followup round script's stage timers (whole processes, start-up included).
TIMERS = {
    "time_collect": "exploration",
    "time_influence": "TracIn computation",
    "time_update": "dataset selection and training",
    "time_eval": "final testing",
}


def parse_tests(path: Path) -> list[dict]:
    """Every test in one result file: the checkpoint it loaded, its episode count and mean return."""
    tests, checkpoint, episodes = [], None, None
    for line in path.read_text().splitlines():
        if match := CHECKPOINT.search(line):
            checkpoint, episodes = match, None
        elif match := EPISODES.search(line):
            episodes = int(match.group(1))
        elif (match := RETURN.search(line)) and checkpoint is not None:
            updates = int(checkpoint.group(2))
            if updates % UPDATES_PER_ROUND:
                sys.exit(f"convert: {path}: {checkpoint.group(1)} is not at a round boundary")
            tests.append(
                {
                    "round": updates // UPDATES_PER_ROUND,
                    "test_return": float(match.group(2)),
                    "test_episodes": int(match.group(1) or episodes),
                    "tested_checkpoint": checkpoint.group(1),
                    "result_file": path.name,
                }
            )
            checkpoint = None
    return tests


def round_extras(path: Path) -> dict:
    text = path.read_text()
    extras = {
        column: float(m.group(1))
        for column, stage in TIMERS.items()
        if (m := re.search(rf"Time elapsed after {stage}: (\d+) seconds", text))
    }
    if match := KEPT.search(text):
        extras["n_kept"] = int(match.group(1))
    return extras


def standard_run(results: Path, env: str, seed: int) -> list[dict] | None:
    path = results / ENVS[env]["standard"].format(seed=seed)
    tests = parse_tests(path) if path.exists() else []
    rounds = ENVS[env]["rounds"]["ppo"]
    return tests if [t["round"] for t in tests] == list(range(rounds + 1)) else None


def iif_run(results: Path, env: str, seed: int, round_zero: dict) -> list[dict] | None:
    rows = [round_zero]
    for i in range(ENVS[env]["rounds"]["iif"]):
        path = results / ENVS[env]["iif"].format(i=i, j=i + 1, seed=seed)
        tests = parse_tests(path) if path.exists() else []
        if len(tests) != 1 or tests[0]["round"] != i + 1:
            return None  # unfinished (or not as released): no partial run is written
        rows.append({**tests[0], **round_extras(path)})
    return rows


def settings(env: str, test_episodes: int) -> dict:
    return {
        "release": RELEASE,
        "env_id": ENVS[env]["env_id"],
        "scripts": ENVS[env]["scripts"],
        "p": P,
        "optimizer": "sgd",
        "test_episodes": test_episodes,
    }


def settings_hash(env: str, test_episodes: int) -> str:
    return hashlib.sha256(json.dumps(settings(env, test_episodes), sort_keys=True).encode()).hexdigest()[:6]


def venv_versions(venv: Path | None) -> str | None:
    """Their venv's versions of our provenance LIBRARIES and stable-baselines3, as our tidy rows list ours."""
    if venv is None:
        return None
    freeze = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    versions = dict(line.lower().replace("_", "-").split("==") for line in freeze if "==" in line)
    names = (*LIBRARIES, "box2d-py", "stable-baselines3")
    return ";".join(f"{name}=={versions[name]}" for name in names if name in versions)


def tidy(rows: list[dict], env: str, seed: int, method: str, versions: str | None, experiment: str) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    episodes = frame["test_episodes"].unique()
    if len(episodes) != 1:
        sys.exit(f"convert: {env} seed {seed} {method}: tests with several episode counts {sorted(episodes)}")
    frame = frame.assign(
        experiment=experiment,
        env=env,
        method=method,
        method_tag="ppo" if method == "ppo" else f"iif-p{P:g}",
        p=float("nan") if method == "ppo" else P,
        optimizer="sgd",
        protocol="authors",
        config_hash=settings_hash(env, int(episodes[0])),
        seed=seed,
        source="authors",
        code_commit=RELEASE,
        code_dirty=False,
        versions=versions,
        env_steps=frame["round"] * N_STEPS,
        n_records=(frame["round"] > 0) * N_STEPS,
    )
    if method == "ppo":  # a standard update keeps every record
        frame["n_kept"] = frame["n_records"]
    frame.loc[frame["round"] == 0, "n_kept"] = 0
    return frame.reindex(columns=TIDY_COLUMNS + EXTRA_COLUMNS)


def convert(work: Path, versions: str | None, experiment: str = EXPERIMENTS[0]) -> pd.DataFrame:
    runs = []
    for env in ENVS:
        for seed_dir in sorted((work / env).glob("seed*")):
            seed, results = int(seed_dir.name[4:]), seed_dir / f"results_{env}"
            standard = standard_run(results, env, seed)
            if standard is None:
                print(f"convert: {env} seed {seed}: standard test unfinished, skipped")
                continue
            runs.append(tidy(standard, env, seed, "ppo", versions, experiment))
            iif = iif_run(results, env, seed, round_zero=standard[0])
            if iif is None:
                print(f"convert: {env} seed {seed}: IIF loop unfinished, skipped")
                continue
            runs.append(tidy(iif, env, seed, "iif", versions, experiment))
    return pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(columns=TIDY_COLUMNS + EXTRA_COLUMNS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, type=Path, help="driver.py's --work dir")
    parser.add_argument("--experiment", choices=EXPERIMENTS, default=EXPERIMENTS[0], help="whose CSV the runs join")
    parser.add_argument("--out", type=Path, help="the tidy CSV (default: paper_figures/data/<experiment>.csv)")
    parser.add_argument("--venv", type=Path, help="driver.py's --venv: its library versions go into the rows")
    args = parser.parse_args()
    args.out = args.out or DATA_DIR / f"{args.experiment}.csv"
    fresh = convert(args.work.expanduser().resolve(), venv_versions(args.venv), args.experiment)
    made_with = {
        run.config_hash: settings(run.env, int(run.test_episodes))
        for run in fresh.drop_duplicates(["env", "test_episodes"]).itertuples()
    }
    rows = commit_external_runs(fresh, args.out, made_with, EXTRA_COLUMNS)
    runs = fresh.drop_duplicates(EXTERNAL_RUN_KEY)
    print(
        f"convert: {len(runs)} finished runs from {args.work} "
        f"({', '.join(f'{r.env} {r.method} seed {r.seed}' for r in runs.itertuples())}); "
        f"{args.out} holds {rows.drop_duplicates(EXTERNAL_RUN_KEY).shape[0]} runs"
    )


if __name__ == "__main__":
    main()
