#!/usr/bin/env bash
# Beyond the paper (issue 15), one process after another; `rlinfluence task=figures` then draws
# counterfactual_scatter, counterfactual_correlations and table3_adam_preconditioner.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS_ROOT=${RUNS_ROOT:-runs}
run() { .venv/bin/rlinfluence -m runs_root="$RUNS_ROOT" logger=disabled progress=false "$@"; }

# Does influence predict removal? Round 5 of a standard run (its first 10 rounds, evaluated at round 10
# only), 100 test episodes per retrained policy. The committed CSVs used groups=20 (see README.md).
CF=(experiment_name=section4 env.rounds=10 eval.every=10 eval.episodes=100 "analysis.counterfactual.rounds=[5]")
run task=counterfactual env=frozenlake,acrobot seed=0 "${CF[@]}" analysis.counterfactual.groups=20
# Not run on the 2-core machine: MiniGrid and LunarLander.
# run task=counterfactual env=minigrid,lunarlander seed=0 "${CF[@]}"

# Adam-aware influence beside Table 3: its IIF runs, and Table 3's own runs (standard PPO and plain-influence
# IIF, seeds 0-4) that it compares against. Not run on the 2-core machine (42 LunarLander/MiniGrid runs).
# run +experiment=adam_preconditioner
# run +experiment=adam
