#!/usr/bin/env bash
# The runs behind "Beyond the paper: robust IIF" in paper_figures/README.md: IIF with the entropy guard
# (method=iif_guard) at the env's paper p, and IIF and the guard at p=auto, our protocol, beside standard
# PPO and plain IIF of the main comparison (experiment_name=main: those runs are reused, not repeated;
# FrozenLake's 30 plain-IIF seeds are reproduce_protocol.sh's collapse lines). Same settings and
# evaluation episodes as reproduce_cpu.sh. Finished runs are skipped on a rerun (DONE marker); an
# interrupted one resumes. Cheapest first. Then: rlinfluence task=figures figures.runs_root=runs
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
RLINFLUENCE=${RLINFLUENCE:-.venv/bin/rlinfluence}
# EXTRA: overrides added to every command (e.g. EXTRA=runs_root=/scratch/runs)
run() { $RLINFLUENCE -m hydra/launcher=joblib hydra.launcher.n_jobs="$JOBS" logger=disabled progress=false "$@" ${EXTRA:-}; }
# The three new arms in one env: the guard at the paper's p, IIF and the guard at p=auto.
arms() { run experiment_name=main method=iif_guard,iif_auto,iif_guard_auto "$@"; }

# FrozenLake: 10 seeds (robust_efficiency, robust_curves), then to 30 (robust_collapse_frozenlake).
arms env=frozenlake seed=range\(0,10\)
arms env=frozenlake seed=range\(10,30\)
# The guard alone to 35 seeds (the collapse rate's "Measured so far" in paper_figures/README.md).
run +experiment=robust_guard_frozenlake
# Acrobot, then the slower envs.
arms env=acrobot seed=range\(0,10\) eval.episodes=100
arms env=minigrid seed=range\(0,5\) eval.episodes=100
arms env=lunarlander seed=range\(0,5\) eval.episodes=50
