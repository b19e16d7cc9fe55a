#!/usr/bin/env bash
# Beyond the paper (issue 15), one process after another; `rlinfluence task=figures` then draws
# counterfactual_scatter, counterfactual_correlations and table3_adam_preconditioner.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS_ROOT=${RUNS_ROOT:-runs}
run() { .venv/bin/rlinfluence -m runs_root="$RUNS_ROOT" logger=disabled progress=false "$@"; }

# Does influence predict removal? Round 5 of a standard run (its first 10 rounds, evaluated at round 10
# only), 50 random groups per size (the config default), 100 test episodes per retrained policy.
CF=(experiment_name=section4 env.rounds=10 eval.every=10 eval.episodes=100 "analysis.counterfactual.rounds=[5]")
run task=counterfactual env=lunarlander,minigrid,frozenlake,acrobot seed=0 "${CF[@]}"

# Adam-aware influence beside Table 3: its IIF runs, and Table 3's own runs (standard PPO and plain-influence
# IIF) that it compares against, 3 seeds (all four lines finished; rows in data/adam*.csv).
run +experiment=adam env=minigrid eval.episodes=100 seed='range(0,3)'
run +experiment=adam_preconditioner env=minigrid eval.episodes=100
run +experiment=adam env=lunarlander eval.episodes=50 seed='range(0,3)'
run +experiment=adam_preconditioner env=lunarlander eval.episodes=50
