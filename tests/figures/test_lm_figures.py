"""Fig. 7, Fig. 16 and Table 6 from the language-model runs' tidy CSV: drawn when every arm has its
seeds, listed in MISSING.md with the command that makes them otherwise."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import lm_rows
from rlinfluence.figures import regenerate
from rlinfluence.figures.regenerate import refresh_from_runs
from rlinfluence.figures.rlhf import LM_CSV, RUN_COLUMNS, RUN_KEY
from rlinfluence.run.checkpoint import DONE, RunDirError
from rlinfluence.run.identity import IDENTITY


def test_rlhf_outputs_are_drawn_when_their_runs_exist_and_listed_with_a_gpu_command_otherwise(tmp_path):
    (tmp_path / "data" / LM_CSV).parent.mkdir(parents=True)
    lm_rows("rlhf_tiny", "toxicity_tiny", "tiny").to_csv(tmp_path / "data" / LM_CSV, index=False)
    results = {name: status for name, status, _ in regenerate(tmp_path / "data", tmp_path / "out")}
    for name in ("fig7_rlhf_tiny", "fig16_rlhf_targets_tiny", "table6_rlhf_runtime_tiny"):
        assert results[name] == "made"
    for name in ("fig7_rlhf", "fig16_rlhf_targets", "table6_rlhf_runtime"):
        assert results[name] == "missing"
    table = (tmp_path / "out" / "table6_rlhf_runtime_tiny.md").read_text()
    assert "| optimisation | 1.00 ± 0.00 | 40.39 ± 0.35 | 3.00 ± 0.00 | 85.56 ± 0.17 |" in table
    assert "| IIF total / std total | 73.0 %" in table  # (0.5 + 0.2 + 1 + 1) / (0.5 + 0.2 + 3)
    missing = (tmp_path / "out" / "MISSING.md").read_text()
    assert (
        "rlinfluence -m env=toxicity model=gpt_neo_2p7b method=ppo,iif,random target=seq seed=0,1,2 "
        "experiment_name=rlhf device=cuda"
    ) in missing
    assert "method=iif target=return seed=0,1,2 experiment_name=rlhf device=cuda" in missing


def write_lm_run_dirs(runs_root, rows: pd.DataFrame, config_hash: str | None = None) -> None:
    """One finished run directory per run of `rows` (lm_rows' shape), as the language-model agent writes it."""
    for key, run in rows.groupby(RUN_KEY):
        run_dir = runs_root / "-".join(map(str, key))
        run_dir.mkdir(parents=True)
        run.drop(columns=RUN_COLUMNS).to_csv(run_dir / "metrics.csv", index=False)
        first = run.iloc[0]
        (run_dir / "summary.json").write_text(
            json.dumps(
                {
                    "experiment": first["experiment"],
                    "env": first["env"],
                    "method": first["method"],
                    "method_tag": first["method_tag"],
                    "config_hash": config_hash,
                    "seed": int(first["seed"]),
                }
            )
        )
        (run_dir / IDENTITY).write_text(
            json.dumps({"settings": {"env.agent": "lm", "model.name": first["model"], "target.name": first["target"]}})
        )
        (run_dir / DONE).touch()


def test_finished_lm_runs_enter_their_own_csv_and_not_the_control_tables(tmp_path):
    rows = lm_rows("rlhf", "toxicity", "gpt_neo_2p7b", rounds=2)
    write_lm_run_dirs(tmp_path / "runs", rows)
    [path] = refresh_from_runs(tmp_path / "runs", tmp_path / "data", set()).write()
    stored = pd.read_csv(path)
    assert len(stored) == len(rows) and set(stored["target"]) == {"seq", "return"}
    results = {name: status for name, status, _ in regenerate(tmp_path / "data", tmp_path / "out", tmp_path / "runs")}
    assert results["fig7_rlhf"] == "made" and results["table6_rlhf_runtime"] == "made"
    assert not (tmp_path / "data" / "main.csv").exists()  # the control tables never see an LM run


def test_an_lm_run_made_with_other_settings_never_replaces_the_committed_one(tmp_path):
    rows = lm_rows("rlhf_tiny", "toxicity_tiny", "tiny", rounds=1)
    write_lm_run_dirs(tmp_path / "old", rows, config_hash="aaaaaa")
    [path] = refresh_from_runs(tmp_path / "old", tmp_path / "data", set()).write()
    committed = path.read_bytes()
    write_lm_run_dirs(tmp_path / "new", rows[rows["seed"] == 0], config_hash="bbbbbb")
    with pytest.raises(RunDirError, match="would replace .* made with config_hash aaaaaa, this has config_hash bbbbbb"):
        refresh_from_runs(tmp_path / "new", tmp_path / "data", set())
    assert path.read_bytes() == committed
