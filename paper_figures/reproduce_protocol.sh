#!/usr/bin/env bash
# The runs behind "Why our numbers differ" in paper_figures/README.md: our protocol against the
# authors' (protocol=paper, conf/protocol/paper.yaml), each collection part alone, and IIF's collapse
# rate. Same settings and evaluation episodes as reproduce_cpu.sh (whose clean runs, seeds 0-4, are
# not repeated here). Finished runs are skipped on a rerun (DONE marker); an interrupted one resumes.
# Cheapest and most informative first. Then: rlinfluence task=figures figures.runs_root=runs
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
RLINFLUENCE=${RLINFLUENCE:-.venv/bin/rlinfluence}
# EXTRA: overrides added to every command (e.g. EXTRA=runs_root=/scratch/runs)
run() { $RLINFLUENCE -m hydra/launcher=joblib hydra.launcher.n_jobs="$JOBS" logger=disabled progress=false "$@" ${EXTRA:-}; }
ABANDON="collection.abandon_unfinished=true"
SAME_STARTS="collection.repeat_starts=true"
SAME_NOISE="collection.repeat_action_noise=true"

# 10 seeds x {IIF, PPO, random} under both protocols.
run experiment_name=main env=frozenlake method=iif,ppo,random protocol=paper seed=range\(0,10\)
run experiment_name=main env=frozenlake method=iif,ppo,random protocol=clean seed=range\(5,10\)
run experiment_name=main env=acrobot method=iif,ppo,random protocol=paper seed=range\(0,5\) eval.episodes=100
run experiment_name=main env=acrobot method=iif,ppo,random protocol=paper seed=range\(5,10\) eval.episodes=100
run experiment_name=main env=acrobot method=iif,ppo,random protocol=clean seed=range\(5,10\) eval.episodes=100
# Each part of the authors' collection alone, IIF first (against clean PPO), then PPO with the same
# part. FrozenLake's start state is fixed: repeat_starts alone changes nothing there.
for part in $ABANDON $SAME_STARTS $SAME_NOISE; do
  run experiment_name=main env=acrobot method=iif seed=range\(0,10\) eval.episodes=100 "$part"
done
# Collapse rate of IIF at p = 50 % on FrozenLake: 30 seeds under both protocols.
run experiment_name=main env=frozenlake method=iif protocol=clean,paper seed=range\(10,30\)
for part in $ABANDON $SAME_STARTS $SAME_NOISE; do
  run experiment_name=main env=acrobot method=ppo seed=range\(0,10\) eval.episodes=100 "$part"
done
run experiment_name=main env=frozenlake method=iif,ppo seed=range\(0,10\) $ABANDON
run experiment_name=main env=frozenlake method=iif,ppo seed=range\(0,10\) $SAME_NOISE
run experiment_name=main env=minigrid method=iif,ppo,random protocol=paper seed=range\(0,10\) eval.episodes=100
run experiment_name=main env=minigrid method=iif,ppo,random protocol=clean seed=range\(5,10\) eval.episodes=100
run experiment_name=main env=lunarlander method=iif,ppo,random protocol=paper seed=range\(0,5\) eval.episodes=50
