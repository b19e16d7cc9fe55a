"""Run the authors' released IIF pipeline (LDAORL/LDA-ORL, commit c1d5764) unmodified.

    python benchmarks/authors_pipeline/driver.py setup --release ~/LDA-ORL --venv ~/authors-venv
    python benchmarks/authors_pipeline/driver.py run --release ~/LDA-ORL --venv ~/authors-venv \
        --work ~/authors-work --env lunarlander --seed 0 --test-episodes 100 --cpus 0,1

`setup` builds the venv their traditional-rl/README.md describes (the versions that install on
Python 3.11 today, see README.md here) and copies their patched `stable_baselines3/` over the
installed one, in that venv only. `run` copies their env folder into a scratch work dir of its own
per (env, seed) (their model folder names carry no seed, so two seeds may not share one), then runs
their scripts as their README says: standard training, its test, and the IIF loop, the last two on
the cores given. Their files are never edited: the only deviations are the CPU list and the number
of test episodes, which a `python` shim first on PATH rewrites for `test_*_return.py` only, so
both arms get the same count. The release path may also come from $LDA_ORL_DIR.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

RELEASE_COMMIT = "c1d5764"

# pip steps, in order: torch first so that the CPU wheel is the one resolved; gymnasium 0.29.1
# because their requirements.txt's 0.28.1 conflicts with stable-baselines3 2.5.0; box2d-py and
# pygame last (box2d-py builds with Debian's swig; pygame 2.1.3 is their pin).
VENV_STEPS = [
    ["torch==2.13.0"],
    [
        "stable-baselines3==2.5.0",
        "gymnasium==0.29.1",
        "numpy<2",
        "wandb",
        "tensorboard",
        "tqdm",
        "matplotlib",
        "minigrid==3.0.0",
    ],
    ["box2d-py==2.3.5"],
    ["pygame==2.1.3"],
]

# Per env: their folder, the scripts that make each arm, and the standard run's test range.
PIPELINES = {
    "lunarlander": {
        "train": ["bash", "run_lunarlander_std_training.sh", "{seed}"],
        "test": ["bash", "run_lunarlander_std_test.sh", "{seed}", "0", "100"],
        "iif": ["bash", "run_iif_lunarlander_sgd.sh", "{seed}", "{p}", "{cpus}"],
    },
    "minigrid": {
        "train": ["bash", "run_train_minigrid_sgd.sh", "{seed}"],
        "test": ["bash", "run_eval_baseline.sh", "{seed}", "{cpus}"],
        "iif": ["bash", "run_iif_minigrid.sh", "{seed}", "{p}", "{cpus}"],
    },
}

SHIM = """#!/bin/sh
# Rewrites `--num_episodes N` for the authors' test_*_return.py only; every other call is untouched.
case "$1" in
  test_*_return.py)
    script="$1"; shift
    set -- "$script" $(printf '%s\\n' "$@" | awk -v n="$AUTHORS_TEST_EPISODES" \\
      'prev == "--num_episodes" {print n; prev = ""; next} {print; prev = $0}')
    ;;
esac
exec "{python}" "$@"
"""


def release_dir(arg: str | None) -> Path:
    path = arg or os.environ.get("LDA_ORL_DIR")
    if not path:
        sys.exit("driver: give --release PATH or set LDA_ORL_DIR (a checkout of github.com/LDAORL/LDA-ORL)")
    release = Path(path).expanduser().resolve()
    if not (release / "traditional-rl" / "stable_baselines3").is_dir():
        sys.exit(f"driver: {release} is not a checkout of LDAORL/LDA-ORL (no traditional-rl/stable_baselines3)")
    return release


def setup(args: argparse.Namespace) -> None:
    release = release_dir(args.release)
    venv = Path(args.venv).expanduser().resolve()
    if shutil.which("swig") is None:
        sys.exit("driver: box2d-py needs swig: apt-get install -y swig")
    subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    for step in VENV_STEPS:
        subprocess.run(pip + step, check=True)
    site = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import stable_baselines3, os; print(os.path.dirname(stable_baselines3.__file__))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Their README: copy their patched package over the installed one (this venv only). Their
    # folder ships __pycache__ from their machine, so compile once here instead of in every process.
    shutil.copytree(release / "traditional-rl" / "stable_baselines3", site, dirs_exist_ok=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "compileall", "-q", site], check=True)
    print(f"driver: venv ready at {venv} (stable_baselines3 at {site} is the authors' copy)")


def prepare_workdir(release: Path, work: Path, env: str, seed: int) -> Path:
    workdir = work / env / f"seed{seed}"
    if not workdir.exists():
        shutil.copytree(release / "traditional-rl" / env, workdir)
    for folder in (f"results_{env}", f"models_{env}"):
        (workdir / folder).mkdir(exist_ok=True)
    return workdir


def shim_env(venv: Path, workdir: Path, test_episodes: int) -> dict[str, str]:
    shim_dir = workdir / ".shim"
    shim_dir.mkdir(exist_ok=True)
    shim = shim_dir / "python"
    shim.write_text(SHIM.replace("{python}", str(venv / "bin" / "python")))
    shim.chmod(0o755)
    env = dict(os.environ)
    env.update(
        PATH=f"{shim_dir}:{venv / 'bin'}:{env['PATH']}",
        AUTHORS_TEST_EPISODES=str(test_episodes),
        WANDB_MODE="disabled",
        PYTHONDONTWRITEBYTECODE="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    return env


def run(args: argparse.Namespace) -> None:
    release = release_dir(args.release)
    venv = Path(args.venv).expanduser().resolve()
    if not (venv / "bin" / "python").exists():
        sys.exit(f"driver: no venv at {venv}; run `driver.py setup` first")
    workdir = prepare_workdir(release, Path(args.work).expanduser().resolve(), args.env, args.seed)
    env = shim_env(venv, workdir, args.test_episodes)
    fill = {"seed": str(args.seed), "p": args.p, "cpus": args.cpus}
    for stage in args.stages.split(","):
        command = [part.format(**fill) for part in PIPELINES[args.env][stage]]
        if stage == "train":  # their training scripts carry no taskset of their own
            command = ["taskset", "-c", args.cpus] + command
        print(f"driver: {args.env} seed {args.seed}: {' '.join(command)} (in {workdir})", flush=True)
        with open(workdir / f"driver_{stage}.log", "w") as log:
            subprocess.run(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    print(f"driver: results in {workdir / f'results_{args.env}'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("setup", "run"):
        p = sub.add_parser(name)
        p.add_argument("--release", help="checkout of LDAORL/LDA-ORL (default: $LDA_ORL_DIR)")
        p.add_argument("--venv", required=True, help="the authors' own venv (built by setup)")
    sub.choices["setup"].add_argument("--python", default="python3.11")
    r = sub.choices["run"]
    r.add_argument("--work", required=True, help="scratch dir; one copy of their env folder per (env, seed)")
    r.add_argument("--env", required=True, choices=sorted(PIPELINES))
    r.add_argument("--seed", type=int, required=True)
    r.add_argument("--p", default="12.5", help="drop percentile of the negative records (their README: 12.5)")
    r.add_argument("--test-episodes", type=int, default=1000, help="their scripts' count is 1000")
    r.add_argument("--cpus", default="0", help="taskset CPU list (their README: 0-7)")
    r.add_argument(
        "--stages",
        default="train,test,iif",
        help="comma list of train,test,iif (test and iif need train's checkpoints)",
    )
    args = parser.parse_args()
    setup(args) if args.command == "setup" else run(args)


if __name__ == "__main__":
    main()
