"""Shared test helpers: compose the real Hydra config (as the CLI does) with tiny budgets."""

from __future__ import annotations

import os

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

import rlinfluence.config  # noqa: E402,F401  (registers the schema conf/config.yaml starts from)
from rlinfluence.paths import CONFIG_DIR  # noqa: E402

# Small enough for a 2-round run in about a second, large enough for several minibatches.
TINY = ["env.n_steps=64", "ppo.batch_size=32", "env.rounds=2", "eval.episodes=2", "eval.n_parallel=2",
        "logger=disabled", "progress=false"]


def compose_config(overrides: list[str], return_hydra_config: bool = False):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=return_hydra_config)


@pytest.fixture
def tiny_config():
    return lambda *overrides: compose_config(TINY + list(overrides))
