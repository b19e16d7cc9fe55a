"""benchmarks/sb3_iif_study.py's declared no-clipping variant (issue 42, lead 3): SB3 with max_grad_norm = inf
trains as SB3 with clipping removed (the authors' patch), its runs are recorded apart from the clipped
study's, and the clipped study's rows keep their identity."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest
import torch

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402

from rlinfluence.config.paths import REPO_ROOT  # noqa: E402
from rlinfluence.figures.runs import EXTERNAL_RUN_KEY, read_tidy_csv  # noqa: E402
from rlinfluence.figures.sb3_dropin import SB3, SB3_NO_CLIPPING  # noqa: E402
from rlinfluence.run.provenance import provenance  # noqa: E402


@pytest.fixture(scope="module")
def study():
    spec = importlib.util.spec_from_file_location("sb3_iif_study", REPO_ROOT / "benchmarks" / "sb3_iif_study.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def settings_of(study, env: str, clipped: bool) -> dict:
    lunar = study.STUDIES[env]
    return study.settings(env, lunar, lunar.rounds, lunar.eval_episodes, clipped)


def test_the_clipped_study_keeps_its_committed_hash_and_the_unclipped_one_names_its_setting(study):
    committed = json.loads((REPO_ROOT / "paper_figures" / "data" / "settings.json").read_text())
    clipped, unclipped = (settings_of(study, "lunarlander", clipped) for clipped in (True, False))
    assert committed[study.settings_hash(clipped)] == clipped  # paper_figures/data/sb3.csv's LunarLander rows
    assert unclipped == clipped | {"max_grad_norm": None}
    assert study.settings_hash(unclipped) != study.settings_hash(clipped)


def test_both_variants_of_a_run_are_kept_side_by_side(study, tmp_path):
    out = tmp_path / "sb3.csv"
    rows = [
        {"round": k, "env_steps": k * 2048, "n_records": 2048 * (k > 0), "n_kept": 0, "test_return": 0.0}
        for k in (0, 1)
    ]
    for clipped in (True, False, True):  # the clipped run again: it replaces its first version only
        made_with = settings_of(study, "frozenlake", clipped)
        config_hash = study.settings_hash(made_with)
        frame = study.tidy(rows, "frozenlake", 50.0, 0, True, config_hash, 100, provenance("cpu"), clipped)
        runs = study.commit_run(frame, out, {config_hash: made_with})
    assert runs == 2
    tidy = read_tidy_csv(out).drop_duplicates(EXTERNAL_RUN_KEY)
    assert sorted(tidy["protocol"]) == sorted([SB3, SB3_NO_CLIPPING])
    assert tidy.set_index("protocol")["config_hash"].nunique() == 2


def test_an_infinite_max_grad_norm_trains_as_sb3_without_clipping(study, monkeypatch):
    def trained(max_grad_norm: float) -> list[torch.Tensor]:
        model = PPO(
            "MlpPolicy",
            study.STUDIES["frozenlake"].make(),
            n_steps=256,
            batch_size=64,
            n_epochs=4,
            learning_rate=5e-3,
            policy_kwargs={"optimizer_class": torch.optim.SGD},
            max_grad_norm=max_grad_norm,
            seed=0,
        )
        model.learn(512)
        return [p.detach().clone() for p in model.policy.parameters()]

    unclipped, clipped = trained(float("inf")), trained(study.SB3_MAX_GRAD_NORM)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda *args, **kwargs: None)  # the authors' patch
    patched = trained(study.SB3_MAX_GRAD_NORM)
    assert all(torch.equal(a, b) for a, b in zip(unclipped, patched))
    assert not all(torch.equal(a, b) for a, b in zip(clipped, patched))  # clipping does act at these settings
