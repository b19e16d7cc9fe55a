"""Run infrastructure: the loop over rounds, agents, run dirs, checkpoints, the logger, tasks, replay."""
