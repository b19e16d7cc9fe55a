"""engine=stacked with real W&B (offline): each seed its own W&B run, as engine=default gives a run (name,
config, group, tags, metrics, summary, exit code), continued under the same run id after an interrupt.

W&B 0.31 has no Python reader for an offline run's file (run-<id>.wandb), so `records` reads it: a 7-byte header
(":W&B", magic, version), then 32 KiB blocks of records, each a 7-byte header (crc32c, length, fragment kind)
before its bytes; a record that crosses a block's end is split into fragments. Each record is a protobuf
`Record` of wandb_internal.proto.
"""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from wandb.proto import wandb_internal_pb2

from conftest import metrics_rows, start_as_from_a_terminal, tiny
from rlinfluence.cli import run_task
from rlinfluence.run.logger import SECTIONS
from test_engine import seed_dir

# wandb.proto picks the module generated for the installed protobuf at import: mypy cannot see its names
Record: Any = wandb_internal_pb2.Record  # type: ignore[attr-defined]
FILE_HEADER, BLOCK, RECORD_HEADER = 7, 32768, 7
FULL, FIRST, LAST = 1, 2, 4


def records(path: Path) -> Iterator[Any]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:FILE_HEADER]
    position, fragments = FILE_HEADER, b""
    while position + RECORD_HEADER <= len(data):
        if BLOCK - position % BLOCK < RECORD_HEADER:  # a block's tail too short for a record header is padding
            position += BLOCK - position % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + RECORD_HEADER])
        payload = data[position + RECORD_HEADER : position + RECORD_HEADER + length]
        position += RECORD_HEADER + length
        fragments = payload if kind in (FULL, FIRST) else fragments + payload
        if kind in (FULL, LAST):
            record = Record()
            record.ParseFromString(fragments)
            yield record


def offline_runs(run_dir: Path) -> list[dict]:
    """The offline W&B runs written in a run dir, oldest first: id, name, group, tags, config, the metrics logged
    at each step (by column name), last summary values, exit code."""
    found = []
    for path in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb")):
        run: dict = {"history": {}, "summary": {}, "exit_code": None}
        for record in records(path):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run |= {
                    "id": record.run.run_id,
                    "name": record.run.display_name,
                    "group": record.run.run_group,
                    "tags": list(record.run.tags),
                    "config": {item.key: json.loads(item.value_json) for item in record.run.config.update},
                }
            elif kind == "history":
                names = {"/".join(item.nested_key) or item.key: item.value_json for item in record.history.item}
                run["history"][record.history.step.num] = {  # "charts/test_return" as test_return, W&B's own left out
                    name.split("/")[1]: json.loads(value) for name, value in names.items() if "/" in name
                }
            elif kind == "summary":
                run["summary"] |= {item.key: json.loads(item.value_json) for item in record.summary.update}
            elif kind == "exit":
                run["exit_code"] = record.exit.exit_code
        found.append(run)
    return found


def logged(rows: list[dict[str, str]]) -> dict[int, dict[str, float]]:
    """What W&B is to have of metrics.csv's `rows`: each round's mirrored columns, NaN left out."""
    mirrored = {key for keys in SECTIONS.values() for key in keys}
    return {
        int(row["round"]): {key: float(value) for key, value in row.items() if key in mirrored and value != "nan"}
        for row in rows
    }


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))  # W&B's own files there, never the user's
    (tmp_path / "wandb-dir").mkdir()
    return ["logger=wandb", "logger.mode=offline", "logger.tags=[stacked]"]


def test_each_stacked_seed_is_a_wandb_run_of_its_own(tmp_path, offline_wandb, capfd):
    run_task(tiny(tmp_path / "wandb", "engine=stacked", "env.rounds=1", "seeds=[0,1]", *offline_wandb))
    # one line of ours per seed on the console, none of W&B's own (~36 a run), whose console capture is off
    said = [line for line in capfd.readouterr().err.splitlines() if "W&B" in line or line.startswith("wandb")]
    assert len(said) == 2 and all(line.startswith("rlinfluence: W&B run ") for line in said), said
    assert not list((tmp_path / "wandb").rglob("output.log"))
    run_task(tiny(tmp_path / "no-wandb", "engine=stacked", "env.rounds=1", "seeds=[0,1]", "logger=disabled"))
    seen = []
    for seed in (0, 1):
        path = seed_dir(tmp_path / "wandb", seed)
        [run] = offline_runs(path)
        rows = metrics_rows(path)
        assert run["config"]["seed"] == seed and run["config"]["engine"] == "stacked"
        assert "seeds" not in run["config"]  # the block it trained in is not the seed's setting
        assert run["name"].endswith(f"-seed{seed}") and run["tags"] == ["stacked"]
        assert run["group"] == "default/frozenlake"
        # its own rounds' metrics, as its metrics.csv has them
        assert logged(rows) == run["history"]
        assert run["summary"]["seed"] == seed and run["summary"]["done"] is True
        assert run["exit_code"] == 0
        # the mirror changes no number the seed trains to
        assert metrics_rows(path, timings=False) == metrics_rows(seed_dir(tmp_path / "no-wandb", seed), timings=False)
        seen.append(run)
    assert seen[0]["id"] != seen[1]["id"] and seen[0]["history"] != seen[1]["history"]


def test_an_interrupted_stacked_run_resumes_each_seeds_wandb_run(tmp_path, offline_wandb):
    overrides = ["debug=smoke", "engine=stacked", "env.rounds=40", "seeds=[0,1]", f"runs_root={tmp_path}"]
    command = [sys.executable, "-m", "rlinfluence", *overrides, *offline_wandb, "progress=false"]
    process = start_as_from_a_terminal(command, stderr=subprocess.PIPE, text=True)
    while process.poll() is None:
        found = list(tmp_path.rglob("seed1/metrics.csv"))
        if found and len(found[0].read_text().splitlines()) > 3:  # rounds 0-2 written
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    for seed in (0, 1):
        path = seed_dir(tmp_path, seed)
        first, resumed = offline_runs(path)
        assert first["id"] == resumed["id"] and first["exit_code"] == 1 and resumed["exit_code"] == 0
        stopped_at = min(resumed["history"])  # the round the resumed process trained first
        assert 0 < stopped_at and sorted(resumed["history"]) == list(range(stopped_at, 41))
        assert resumed["history"] == logged(metrics_rows(path)[stopped_at:])
