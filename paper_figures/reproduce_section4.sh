#!/usr/bin/env bash
# The analyses behind paper_figures/data/analyses/ (paper Section 4), one process after another.
# Each trains the standard-PPO run it looks into (with per-round snapshots) when it is missing; a rerun
# reuses finished runs and rewrites the analysis' CSVs, which live with their run (<run dir>/analyses/).
# Then `rlinfluence task=figures figures.runs_root=runs` gathers them into data/analyses/.
# Evaluation episodes as in reproduce_cpu.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS_ROOT=${RUNS_ROOT:-runs}
run() { .venv/bin/rlinfluence -m experiment_name=section4 runs_root="$RUNS_ROOT" logger=disabled progress=false "$@"; }

run task=intervene env=frozenlake seed=0,1,2                        # Fig. 5, 11
run task=diagnose env=frozenlake seed=0,1,2                         # Fig. 3a/c/d, 8 (rounds 2, 5, 10)
run task=intervene env=acrobot seed=0,1,2 eval.episodes=100         # Fig. 5, 11
run task=timeline env=acrobot seed=0 eval.episodes=100               # Fig. 10 (the run above's seed 0)
run task=intervene env=minigrid seed=0,1,2 eval.episodes=100           # Fig. 11
run task=diagnose env=minigrid seed=0,1,2 eval.episodes=100 'analysis.diagnose.rounds=[5]' analysis.diagnose.rollouts=100  # Fig. 3b-d, 9
run task=intervene env=lunarlander seed=0,1,2 eval.episodes=50       # Fig. 11
run task=timeline env=highway seed=0 analysis.timeline.action=4 eval.every=100  # Fig. 4 (a* = SLOWER; Fig. 4 reads no test return)
