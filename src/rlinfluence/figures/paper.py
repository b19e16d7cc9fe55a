"""What the paper reports (Fig. 3d, 6b, Tables 2-6), so that every table shows "ours" beside "paper", and
how it names and orders its environments. Its settings (each env's p, budget, ...) are conf/env/'s.

Values are (mean, ±) pairs as printed; "±" is whatever the paper printed (it does not say whether
it is a standard deviation or a standard error). Percentages are in %, runtimes in seconds.
"""

from __future__ import annotations

ENV_ORDER = ("frozenlake", "acrobot", "minigrid", "highway", "lunarlander", "bipedalwalker", "pong")

ENV_TITLES = {
    "frozenlake": "FrozenLake",
    "acrobot": "Acrobot",
    "minigrid": "MiniGrid",
    "highway": "Highway",
    "lunarlander": "LunarLander",
    "bipedalwalker": "BipedalWalker",
    "pong": "Pong",
    "doorkey": "DoorKey-5x5",  # beyond the paper: the benchmark of rollout filters
    "minigrid-adam": "MiniGrid, Adam",  # beyond the paper: the twenty-seed study's MiniGrid under Table 3's Adam
    "gym-Pendulum-v1": "Pendulum",  # beyond the paper: the twenty-seed study's continuous control (env=gym)
}

# Fig. 6(b), SGD (BipedalWalker: Adam), 5 seeds.
FIG6B = {
    "frozenlake": {"SE_ave": (34.0, 2.0), "SE_peak": (19.2, 5.9), "RT_peak": (29.5, 2.9)},
    "acrobot": {"SE_ave": (36.7, 6.5), "SE_peak": (48.5, 0.8), "RT_peak": (55.2, 1.0)},
    "minigrid": {"SE_ave": (65.8, 3.3), "SE_peak": (61.7, 4.1), "RT_peak": (69.1, 1.7)},
    "highway": {"SE_ave": (37.7, 6.1), "SE_peak": (55.1, 2.9), "RT_peak": (59.9, 0.7)},
    "lunarlander": {"SE_ave": (26.0, 1.8), "SE_peak": (39.7, 3.7), "RT_peak": (44.9, 2.5)},
    "bipedalwalker": {"SE_ave": (31.0, 8.7), "SE_peak": (26.2, 8.0), "RT_peak": (29.2, 0.7)},
}

# Fig. 3d reports Spearman(rank, Ā·Â) on FrozenLake (≈ 800 records).
FIG3D_SPEARMAN = {"frozenlake": -0.67}

# Table 2, keyed by (env, p). The paper ran p = 6.25 too but printed no row for it.
TABLE2 = {
    ("frozenlake", 12.5): {"SE_ave": (23.5, 3.1), "SE_peak": (15.6, 5.1)},
    ("frozenlake", 25.0): {"SE_ave": (30.5, 3.3), "SE_peak": (22.1, 7.4)},
    ("frozenlake", 50.0): {"SE_ave": (33.7, 3.4), "SE_peak": (19.6, 8.4)},
    ("frozenlake", 100.0): {"SE_ave": (32.7, 1.7), "SE_peak": (15.9, 5.5)},
    ("acrobot", 12.5): {"SE_ave": (29.2, 0.8), "SE_peak": (31.5, 2.2)},
    ("acrobot", 25.0): {"SE_ave": (35.1, 0.6), "SE_peak": (48.5, 0.8)},
    ("acrobot", 50.0): {"SE_ave": (36.7, 6.5), "SE_peak": (48.5, 0.8)},
    ("acrobot", 100.0): {"SE_ave": (35.0, 0.5), "SE_peak": (43.1, 5.7)},
    ("minigrid", 12.5): {"SE_ave": (67.5, 5.1), "SE_peak": (67.4, 4.4)},
    ("minigrid", 25.0): {"SE_ave": (60.3, 10.6), "SE_peak": (58.8, 13.1)},
    ("minigrid", 50.0): {"SE_ave": (67.0, 5.3), "SE_peak": (50.6, 20.7)},
    ("minigrid", 100.0): {"SE_ave": (75.4, 3.6), "SE_peak": (54.9, 22.5)},
    ("lunarlander", 12.5): {"SE_ave": (28.2, 1.3), "SE_peak": (41.6, 5.7)},
    ("lunarlander", 25.0): {"SE_ave": (22.7, 5.6), "SE_peak": (32.9, 13.1)},
    ("lunarlander", 50.0): {"SE_ave": (10.2, 6.5), "SE_peak": (15.5, 17.1)},
    ("lunarlander", 100.0): {"SE_ave": (8.9, 2.0), "SE_peak": (15.8, 7.3)},
}

# Table 3, Adam (App. B.7).
TABLE3 = {
    "minigrid": {"SE_ave": (24.1, 1.4), "SE_peak": (13.3, 3.1), "RT_peak": (18.5, 1.0)},
    "lunarlander": {"SE_ave": (46.7, 4.5), "SE_peak": (62.2, 5.0), "RT_peak": (65.9, 3.2)},
}

# Table 4: 95 % CI (low, high) of the final-return gain IIF − standard PPO, 5 seeds.
TABLE4 = {
    "minigrid": (0.04, 0.33),
    "lunarlander": (22.54, 130.52),
    "bipedalwalker": (24.40, 75.99),
}

# Table 5, runtime (3 seeds): one row per env in the paper's column order. Influence and update
# are seconds per round; "total" is the whole run and "to_peak_iif" IIF's time to the standard peak.
_TABLE5_COLUMNS = ("influence_iif", "update_iif", "update_std", "total_iif", "total_std", "to_peak_iif", "RT_peak")
_TABLE5_ROWS = {
    "frozenlake": (
        (0.11, 0.01),
        (1.51, 0.04),
        (2.01, 0.05),
        (82.15, 2.93),
        (93.85, 2.68),
        (64.64, 3.98),
        (31.27, 3.28),
    ),
    "acrobot": ((0.25, 0.01), (1.42, 0.02), (2.02, 0.02), (70.01, 0.72), (79.87, 1.00), (35.80, 0.79), (55.16, 1.04)),
    "minigrid": (
        (0.25, 0.02),
        (4.52, 0.06),
        (5.02, 0.07),
        (365.23, 3.11),
        (378.41, 2.98),
        (107.43, 3.32),
        (71.59, 1.05),
    ),
    "highway": ((0.13, 0.02), (2.39, 0.48), (3.29, 0.59), (214.41, 0.22), (233.66, 0.24), (93.73, 1.69), (59.89, 0.72)),
    "lunarlander": (
        (0.13, 0.01),
        (1.85, 0.04),
        (2.05, 0.01),
        (318.68, 1.27),
        (328.79, 3.65),
        (183.64, 6.69),
        (44.11, 2.29),
    ),
    "bipedalwalker": (
        (0.12, 0.01),
        (3.09, 0.20),
        (3.30, 0.23),
        (676.78, 4.71),
        (691.28, 13.33),
        (489.55, 4.71),
        (29.16, 0.66),
    ),
}
TABLE5 = {env: dict(zip(_TABLE5_COLUMNS, row)) for env, row in _TABLE5_ROWS.items()}

# Table 6, RLHF per-round runtime in seconds (109 rounds x 3 seeds, A100): component -> (IIF, std),
# each (mean, ±); std has no influence stage.
TABLE6 = {
    "generation & scoring": ((1.71, 0.06), (1.59, 0.05)),
    "forward": ((1.03, 0.04), (0.99, 0.00)),
    "influence": ((2.15, 0.02), None),
    "optimisation": ((40.39, 0.35), (85.56, 0.17)),
    "total": ((45.28, 0.47), (88.15, 0.22)),
}
TABLE6_TOTAL_SHARE = 51.37  # IIF's total over standard PPO's, in %
