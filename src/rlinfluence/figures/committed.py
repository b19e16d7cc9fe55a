"""The committed data under paper_figures/data/: what each `config_hash` stands for, and how a refresh writes.

A config_hash is 6 hex digits of a run's non-default settings (run/identity.py), which cannot be read back from
it. `<data_dir>/settings.json` keeps them: {config_hash: {dotted key: value}}, `identity.json`'s
`non_default` of the runs (or analyses) committed with that hash, so that a refusal can name the setting
that differs. A refresh adds the hashes of what it commits; `paper_figures/backfill_config_hash.py` wrote
those of the rows committed before.

A refresh first checks everything it would write (tidy CSVs, the language-model CSV, analyses) and
collects it in a `Refresh` (figures/gather.py gathers the analyses); only then is any file written, each
through a temporary file and a rename.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rlinfluence.config.compose import default_config
from rlinfluence.run.checkpoint import write_bytes, write_json
from rlinfluence.run.identity import IDENTITY, UNSET, default_settings, flatten

SETTINGS = "settings.json"
REPLACE_KEY = "figures.replace"


def load_settings(data_dir: str | Path) -> dict[str, dict[str, Any]]:
    path = Path(data_dir) / SETTINGS
    return json.loads(path.read_text()) if path.exists() else {}


def run_settings(run_dir: Path) -> dict[str, Any] | None:
    """A run dir's identity.json; None for a run made before it existed or recorded `non_default`."""
    path = run_dir / IDENTITY
    identity = json.loads(path.read_text()) if path.exists() else {}
    return identity if "non_default" in identity else None


def first_difference(was: dict[str, Any], now: dict[str, Any], defaults: dict[str, Any]) -> str:
    """`key=old, this has key=new (N setting(s) differ)` for the first of the sorted keys whose values
    differ; a key one side lacks counts at its default."""

    def value(settings: dict[str, Any], key: str) -> Any:
        return settings.get(key, defaults.get(key, UNSET))

    differing = sorted(key for key in was.keys() | now.keys() if value(was, key) != value(now, key))
    if not differing:
        return "the same settings"
    key = differing[0]
    return (
        f"{key}={json.dumps(value(was, key))}, this has {key}={json.dumps(value(now, key))} "
        f"({len(differing)} setting(s) differ)"
    )


def env_defaults(env: str, optimizer: str) -> dict[str, Any]:
    """The default result and analysis settings of an env and optimizer."""
    names = OmegaConf.create({"env": {"name": env}, "optimizer": {"name": optimizer}})
    analyses = OmegaConf.to_container(default_config(names).analysis, resolve=True)
    return default_settings(names) | flatten({"analysis": analyses})


def describe_difference(data_dir: Path, committed_hash: str, fresh_hash: str, identity: dict | None) -> str:
    """The first setting in which a fresh run (its identity.json) differs from the committed hash's settings;
    the two hashes where either side's settings are unknown (a run from before identity.json)."""
    committed = load_settings(data_dir).get(committed_hash)
    if identity is None or committed is None:
        return f"config_hash {committed_hash}, this has config_hash {fresh_hash}"
    settings = identity["settings"]
    return first_difference(
        committed, identity["non_default"], env_defaults(settings["env.name"], settings["optimizer.name"])
    )


@dataclass
class Refresh:
    """What a refresh writes once every check has passed."""

    data_dir: Path
    files: dict[Path, bytes] = field(default_factory=dict)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)  # config_hash → non-default settings
    replaced: list[str] = field(default_factory=list)  # one line per committed group replaced (figures.replace)
    # Committed files whose rows now live in others (runs.tidy_csv_writes: a CSV's naming changed)
    removed: list[Path] = field(default_factory=list)

    def merge(self, other: Refresh) -> None:
        self.files |= other.files
        self.settings |= other.settings
        self.replaced += other.replaced
        self.removed += other.removed

    def write(self) -> list[Path]:
        """settings.json (with the new hashes) and every file, each atomically, then the files whose rows moved
        into them are removed (a refresh cut off in between leaves rows twice, which load_tidy refuses, never
        none); returns the files written."""
        known = load_settings(self.data_dir)
        for digest, of_digest in self.settings.items():
            if known.get(digest, of_digest) != of_digest:
                raise ValueError(
                    f"config_hash {digest} stands for {known[digest]} in {self.data_dir / SETTINGS}, "
                    f"and for {of_digest} in the runs"
                )
        for path, content in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_bytes(path, content)
        for path in self.removed:
            path.unlink()
        if known | self.settings != known:
            write_json(self.data_dir / SETTINGS, dict(sorted((known | self.settings).items())))
        for line in self.replaced:
            print(f"rlinfluence: {REPLACE_KEY}: {line}", file=sys.stderr)
        return list(self.files)
