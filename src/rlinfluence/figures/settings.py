"""What each `config_hash` of the committed data stands for, so that a refusal can name the setting that differs.

A config_hash is 6 hex digits of a run's non-default settings (rundir.py), which cannot be read back from
it. `<data_dir>/settings.json` keeps them: {config_hash: {dotted key: value}}, `identity.json`'s
`non_default` of the runs (or analyses) committed with that hash. The refresh adds the hashes of what it
commits; `paper_figures/backfill_config_hash.py` wrote those of the rows committed before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlinfluence.checkpoint import write_json
from rlinfluence.rundir import UNSET

SETTINGS = "settings.json"


def load_settings(data_dir: str | Path) -> dict[str, dict[str, Any]]:
    path = Path(data_dir) / SETTINGS
    return json.loads(path.read_text()) if path.exists() else {}


def register_settings(data_dir: str | Path, settings: dict[str, dict[str, Any]]) -> None:
    """Add hashes to settings.json (atomically); a hash already there must stand for the same settings."""
    known = load_settings(data_dir)
    for digest, of_digest in settings.items():
        if known.get(digest, of_digest) != of_digest:
            raise ValueError(f"config_hash {digest} stands for {known[digest]} in {data_dir}/{SETTINGS}, "
                             f"and for {of_digest} now")
    merged = known | settings
    if merged != known:
        write_json(Path(data_dir) / SETTINGS, dict(sorted(merged.items())))


def first_difference(was: dict[str, Any], now: dict[str, Any], defaults: dict[str, Any]) -> str:
    """`key=old, this has key=new (N setting(s) differ)` for the first of the sorted keys whose values
    differ; a key one side lacks counts at its default."""
    def value(settings: dict[str, Any], key: str) -> Any:
        return settings.get(key, defaults.get(key, UNSET))

    differing = sorted(key for key in was.keys() | now.keys() if value(was, key) != value(now, key))
    if not differing:
        return "the same settings"
    key = differing[0]
    return (f"{key}={json.dumps(value(was, key))}, this has {key}={json.dumps(value(now, key))} "
            f"({len(differing)} setting(s) differ)")
