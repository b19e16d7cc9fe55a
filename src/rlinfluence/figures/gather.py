"""Analyses are runs too: their outputs gathered from run dirs into `<data_dir>/analyses/`, with their identity.

An analysis task writes `<run dir>/analyses/<analysis><variant>-<hash>.csv` beside the standard run it
analysed, and its identity (analyses/standard_run.py: `analysis_identity`) in the .json of the same name. The
refresh (`task=figures figures.runs_root=...`) copies each to `<data_dir>/analyses/<analysis>/<env>-seed<k>
<variant>.csv`, its identity to the .json beside it, with the refusal rule of the tidy rows: a committed
analysis made with other settings is replaced only when `figures.replace` names its group,
`analyses/<analysis>/<env>`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlinfluence.analyses.standard_run import ANALYSES
from rlinfluence.figures.committed import REPLACE_KEY, Refresh, env_defaults, first_difference
from rlinfluence.run.checkpoint import RunDirError


def committed_path(data_dir: Path, identity: dict[str, Any], suffix: str = ".csv") -> Path:
    return (
        data_dir
        / ANALYSES
        / identity["analysis"]
        / f"{identity['env']}-seed{identity['seed']}{identity['variant']}{suffix}"
    )


def identity_path(path: Path) -> Path:
    """Where the identity of an analysis output (CSV, or NPZ for frames) is: the .json of the same name."""
    return path.with_suffix(".json")


def read_identity(csv_path: Path) -> dict[str, Any] | None:
    path = identity_path(csv_path)
    return json.loads(path.read_text()) if path.exists() else None


def group(identity: dict[str, Any]) -> str:
    """The group figures.replace names: `analyses/<analysis>/<env>`."""
    return f"{ANALYSES}/{identity['analysis']}/{identity['env']}"


def fresh_analyses(runs_root: str | Path) -> dict[Path, dict[str, Any]]:
    """Every finished analysis output under `runs_root` (a CSV or NPZ with its identity), by its path."""
    return {
        data_path: json.loads(json_path.read_text())
        for json_path in sorted(Path(runs_root).rglob(f"{ANALYSES}/*.json"))
        for data_path in json_path.parent.glob(f"{json_path.stem}.*")
        if data_path.suffix != ".json"
    }


def difference(committed: dict[str, Any] | None, fresh: dict[str, Any]) -> str:
    if committed is None:
        return "settings that were not recorded"
    return first_difference(
        committed["non_default"], fresh["non_default"], env_defaults(fresh["env"], fresh["optimizer"])
    )


def analysis_writes(fresh: dict[Path, dict[str, Any]], data_dir: Path, replace: set[str]) -> Refresh:
    """Each fresh analysis output copied to its committed place; nothing is written (`Refresh.write` does).
    Refuses (RunDirError) two outputs with other settings for one place (e.g. from two experiment_names), and
    one that would replace a committed output made with other settings (or with settings not recorded)
    unless figures.replace names its group."""
    refresh = Refresh(data_dir)
    claimed: dict[Path, tuple[Path, dict[str, Any]]] = {}  # committed place -> the first output for it
    for csv_path, identity in fresh.items():
        target = committed_path(data_dir, identity, csv_path.suffix)
        first = claimed.setdefault(target, (csv_path, identity))
        if first[1]["config_hash"] != identity["config_hash"]:
            raise RunDirError(
                f"{csv_path} and {first[0]} would both be {target}, made with other settings; "
                f"move the one the figure does not document out of the runs_root"
            )
        committed = read_identity(target) if target.exists() else identity
        if committed is None or committed["config_hash"] != identity["config_hash"]:
            if group(identity) not in replace:
                raise RunDirError(
                    f"{csv_path} would replace {target}, made with {difference(committed, identity)}; rerun it "
                    f"with the command its figure documents (paper_figures/MISSING.md), or replace it with "
                    f"{REPLACE_KEY}=[{group(identity)}]"
                )
            refresh.replaced.append(
                f"{target} (config_hash {committed and committed['config_hash']}) replaced by "
                f"{csv_path} (config_hash {identity['config_hash']})"
            )
        refresh.files[target] = csv_path.read_bytes()
        refresh.files[identity_path(target)] = (json.dumps(identity, indent=2, sort_keys=True)).encode()
    return refresh
