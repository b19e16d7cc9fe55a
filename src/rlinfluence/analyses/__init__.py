"""Section 4 of the paper: influence as a microscope. Each analysis is a task (run/tasks.py) that replays
rounds of a standard-PPO run from its snapshots (standard_run.py) through the round loop's own stages
and writes a tidy CSV (bottom_frames: an NPZ) into that run's dir, `<run dir>/analyses/`; `task=figures
figures.runs_root=...` gathers them into `figures.data_dir/analyses/<task>/`, which figures/section4.py draws."""
