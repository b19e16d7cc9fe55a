#!/usr/bin/env bash
# The runs behind "Beyond the paper: robust IIF" in paper_figures/README.md: IIF with the entropy guard
# (method=iif_guard), IIF with p=auto (method=iif_auto), and both (method=iif_guard_auto), our protocol,
# beside standard PPO and plain IIF of the main comparison (experiment_name=main: those runs are reused;
# FrozenLake's 30 plain-IIF seeds are reproduce_protocol.sh's collapse lines). Same settings and
# evaluation episodes as reproduce_cpu.sh. Finished runs are skipped on a rerun (DONE marker); an
# interrupted one resumes. Cheapest first. Then: rlinfluence task=figures figures.runs_root=runs
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
RLINFLUENCE=${RLINFLUENCE:-.venv/bin/rlinfluence}
# EXTRA: overrides added to every command (e.g. EXTRA=runs_root=/scratch/runs)
run() { $RLINFLUENCE -m hydra/launcher=joblib hydra.launcher.n_jobs="$JOBS" logger=disabled progress=false "$@" ${EXTRA:-}; }
ROBUST=iif_guard,iif_auto,iif_guard_auto

# Collapse rate on FrozenLake (robust_collapse_frozenlake; the first 10 seeds also feed robust_efficiency).
run experiment_name=main env=frozenlake method=$ROBUST seed=range\(0,10\)
run experiment_name=main env=frozenlake method=$ROBUST seed=range\(10,30\)
# Round savings against standard PPO (robust_efficiency, robust_curves): Acrobot, then the slower envs.
run experiment_name=main env=acrobot method=$ROBUST seed=range\(0,10\) eval.episodes=100
run experiment_name=main env=minigrid method=$ROBUST seed=range\(0,5\) eval.episodes=100
run experiment_name=main env=lunarlander method=$ROBUST seed=range\(0,5\) eval.episodes=50
