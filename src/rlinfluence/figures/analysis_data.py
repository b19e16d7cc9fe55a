"""The analyses' CSVs an output of Section 4 (or the counterfactual check) is drawn from, not runs.

`AnalysisData` stands where an output drawn from runs has its `Runs`: it says which CSVs the output
reads (`<data_dir>/analyses/<analysis>/*.csv`, one per env and seed), which envs, seeds and rounds make
it complete, and the command that writes them. Only CSVs whose identity (the .json beside each) is that
command's are drawn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from rlinfluence.analyses.standard_run import ANALYSES, analysis_identity
from rlinfluence.config.compose import compose_config
from rlinfluence.figures.gather import difference, read_identity
from rlinfluence.figures.requirements import FigureData, Output, RestrictableByEnvs


@cache
def command_config(analysis: str, env: str, overrides: str) -> DictConfig:
    """The config of the command an output documents, `task=<analysis> env=<env> <overrides>`."""
    return compose_config([f"task={analysis}", f"env={env}", *overrides.split()])


@cache
def documented_identity(analysis: str, env: str, overrides: str, variant: str) -> dict:
    """The identity of the analysis output an output documents: that of its command; seed 0 stands for
    every seed, whose identities share one hash."""
    return analysis_identity(command_config(analysis, env, overrides), analysis, variant)


@dataclass(frozen=True)
class AnalysisData(RestrictableByEnvs):
    """The rows of one analysis an output needs: `seeds` seeds of each env, with every round in `rounds`."""

    analysis: str  # diagnose | intervene | timeline | counterfactual | bottom_frames (the task that writes the CSVs)
    envs: tuple[str, ...]
    seeds: int
    rounds: tuple[int, ...] = ()
    overrides: str = ""  # what the command needs beyond task, env and seed
    env_overrides: tuple[tuple[str, str], ...] = ()  # (env, overrides) for envs whose command differs
    # (env, suffix of its files after `<env>-seed<k>`, as write_rows names a variant's, e.g. `-p12.5`); others: none
    variants: tuple[tuple[str, str], ...] = ()
    experiments = ()  # reads no run's tidy rows (regenerate.py refreshes those of the outputs' experiments)
    suffix = ".csv"  # the analysis' files, and how to read one
    read = staticmethod(pd.read_csv)

    @property
    def command(self) -> str:
        """One `-m` command per distinct overrides, over the envs that share them."""
        own, envs_by_overrides = dict(self.env_overrides), dict[str, list[str]]()
        for env in self.envs:
            envs_by_overrides.setdefault(own.get(env, self.overrides), []).append(env)
        return " && ".join(
            f"rlinfluence -m task={self.analysis} env={','.join(envs)} "
            f"seed={','.join(map(str, range(self.seeds)))}{' ' + overrides if overrides else ''}"
            for overrides, envs in envs_by_overrides.items()
        )

    def overrides_for(self, env: str) -> str:
        return dict(self.env_overrides).get(env, self.overrides)

    def variant_for(self, env: str) -> str:
        return dict(self.variants).get(env, "")

    def settings(self, env: str) -> DictConfig:
        """`analysis.<analysis>` of the env's command: the settings its CSVs were made with."""
        return command_config(self.analysis, env, self.overrides_for(env)).analysis[self.analysis]

    def _files(self, data_dir: Path) -> tuple[list[Path], dict[str, list[str]]]:
        """The CSVs of this output's envs made with the settings of its command (their identity's), and per
        env the others with the first setting in which each differs: those are never drawn."""
        files, others = [], dict[str, list[str]]()
        for path in sorted((data_dir / ANALYSES / self.analysis).glob(f"*{self.suffix}")):
            env = path.stem.split("-seed")[0]
            variant = self.variant_for(env)
            if env not in self.envs or not re.fullmatch(rf".+-seed\d+{re.escape(variant)}", path.stem):
                continue
            documented = documented_identity(self.analysis, env, self.overrides_for(env), variant)
            identity = read_identity(path)
            if identity is not None and identity["config_hash"] == documented["config_hash"]:
                files.append(path)
            else:
                others.setdefault(env, []).append(f"{path.name}: {difference(identity, documented)}")
        return files, others

    def table(self, data_dir: Path) -> pd.DataFrame:
        files, _ = self._files(data_dir)
        return (
            pd.concat([self.read(path) for path in files], ignore_index=True)
            if files
            else pd.DataFrame(columns=["env", "seed", "round"])
        )

    def _seeds(self, rows: pd.DataFrame, env: str) -> list[int]:
        rows = rows[rows["env"] == env]
        return sorted(seed for seed, run in rows.groupby("seed") if set(self.rounds) <= set(run["round"]))

    def shortfalls(self, data: FigureData) -> dict[str, str]:
        rows, (_, others) = self.table(data.data_dir), self._files(data.data_dir)
        rounds = f" with rounds {', '.join(map(str, self.rounds))}" if self.rounds else ""
        return {
            env: f"analyses/{self.analysis}/{env}: needs {self.seeds} seeds{rounds}, has {len(seeds)}"
            + (
                f"; not drawn, made with other settings than its command: {'; '.join(others[env])}"
                if env in others
                else ""
            )
            for env in self.envs
            if len(seeds := self._seeds(rows, env)) < self.seeds
        }

    def progress(self, data: FigureData) -> dict[str, tuple[int, int]]:
        """Per environment: (seeds analysed with every round, seeds the output needs)."""
        rows = self.table(data.data_dir)
        return {env: (min(len(self._seeds(rows, env)), self.seeds), self.seeds) for env in self.envs}

    def select(self, data: FigureData) -> pd.DataFrame:
        rows = self.table(data.data_dir)
        parts = [
            rows[(rows["env"] == env) & rows["seed"].isin(self._seeds(rows, env)[: self.seeds])] for env in self.envs
        ]
        return pd.concat(parts, ignore_index=True)


def documented_identities(data_dir: Path, outputs: tuple[Output, ...]) -> dict[Path, dict]:
    """Each analysis CSV under `data_dir` whose (analysis, env, variant) an output of `outputs` reads, with the
    identity of that output's command for its seed: the identity of CSVs made before analyses carried one
    (paper_figures/backfill_config_hash.py). Outputs reading the same CSVs must document the same command."""
    documented: dict[tuple[str, str, str], dict[str, Any]] = {}
    for data in (output.runs for output in outputs if isinstance(output.runs, AnalysisData)):
        for env in data.envs:
            variant = data.variant_for(env)
            identity = documented_identity(data.analysis, env, data.overrides_for(env), variant)
            if documented.setdefault((data.analysis, env, variant), identity) != identity:
                raise ValueError(
                    f"outputs reading analyses/{data.analysis}/{env}-seed<k>{variant}.csv document different commands"
                )
    found = {}
    for path in sorted(p for p in (Path(data_dir) / ANALYSES).glob("*/*") if p.suffix in (".csv", ".npz")):
        named = re.fullmatch(r"(.+)-seed(\d+)(.*)", path.stem)
        if named is None:
            raise ValueError(f"{path}: an analysis file is named <env>-seed<k>[<variant>]")
        env, seed, variant = named.groups()
        if (path.parent.name, env, variant) in documented:
            found[path] = documented[path.parent.name, env, variant] | {"seed": int(seed)}
    return found
