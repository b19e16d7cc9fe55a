#!/usr/bin/env bash
# The runs behind paper_figures/ on a 2-core CPU machine (see paper_figures/README.md).
# The paper's settings everywhere except the number of evaluation episodes per round:
# FrozenLake keeps the paper's 1,000; MiniGrid and Acrobot use 100, LunarLander 50 (its episodes
# last up to 1,000 steps: 1,000 episodes per round do not fit this machine).
# Finished runs are skipped on a rerun (DONE marker), an interrupted one resumes from its checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
run() { .venv/bin/rlinfluence -m hydra/launcher=joblib hydra.launcher.n_jobs="$JOBS" logger=disabled progress=false "$@"; }

# Cheapest first, so that an interrupted sitting leaves whole figures behind.
# Fig. 6 / Fig. 6b / Tables 4-5: main comparison, 5 seeds x {IIF, PPO, random}.
run experiment_name=main env=frozenlake method=ppo,iif,random seed=0,1,2,3,4
# Table 2 / Fig. 14: p ablation, 3 seeds (standard PPO is the shared reference).
run experiment_name=p_ablation env=frozenlake method=ppo seed=0,1,2
run experiment_name=p_ablation env=frozenlake method=iif method.p=6.25,12.5,25,50,100 seed=0,1,2
run experiment_name=main env=minigrid,acrobot method=ppo,iif,random seed=0,1,2,3,4 eval.episodes=100
run experiment_name=main env=lunarlander method=ppo,iif,random seed=0,1,2,3,4 eval.episodes=50
run experiment_name=p_ablation env=acrobot method=ppo seed=0,1,2 eval.episodes=100
run experiment_name=p_ablation env=acrobot method=iif method.p=6.25,12.5,25,50,100 seed=0,1,2 eval.episodes=100
run experiment_name=p_ablation env=lunarlander method=ppo seed=0,1,2 eval.episodes=50
run experiment_name=p_ablation env=lunarlander method=iif method.p=6.25,12.5,25,50,100 seed=0,1,2 eval.episodes=50
# Figs. 12-13: the heuristics, 3 seeds. Each overlay runs its own standard PPO and IIF arms with the
# main comparison's settings (the IIF arms of both FrozenLake overlays come out identical).
run +experiment=heuristics_advantage env=frozenlake
run +experiment=heuristics_td_error env=frozenlake
run +experiment=heuristics_advantage env=minigrid eval.episodes=100
# Table 2 / Fig. 14 on MiniGrid (seed-outer, so an interrupted sitting leaves whole seeds behind).
run experiment_name=p_ablation env=minigrid method=ppo seed=0,1,2 eval.episodes=100
run experiment_name=p_ablation env=minigrid seed=0,1,2 method=iif method.p=6.25,12.5,25,50,100 eval.episodes=100
run +experiment=heuristics_td_error env=lunarlander eval.episodes=50
# Table 3 / Fig. 15: Adam, 5 seeds.
run +experiment=adam env=minigrid eval.episodes=100
run +experiment=adam env=lunarlander eval.episodes=50
# Fig. 6 / Table 5 on Highway (5 Hz physics, the preset's), seed-outer: every round evaluated with 50
# episodes (evaluating 100 every k-th round instead biases SE_ave down: paper_figures/eval_cadence.md).
run experiment_name=main env=highway seed=0,1,2,3,4 method=ppo,iif,random eval.episodes=50
# Fig. 6 / Tables 4-5 on BipedalWalker (500 rounds, Adam 3e-4, p = 6.25 %), seed-outer: 50 episodes every 5th
# round, the same for every arm (paper_figures/README.md, "Evaluation cadence"); ~1.2 CPU-hours a run.
run experiment_name=main env=bipedalwalker seed=0,1,2,3,4 method=ppo,iif,random eval.every=5 eval.episodes=50
