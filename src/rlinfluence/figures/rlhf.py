"""The RLHF outputs (paper §5.3): Fig. 7 (training reward and test toxicity against round), Fig. 16 (f_seq
against f_return against standard PPO) and Table 6 (per-round seconds of each stage), drawn from the
language-model runs' own tidy CSV, `<data_dir>/lm/runs.csv` (their metrics have columns the control
runs' tidy table has not: test toxicity, the forward stage's time).

`LMRuns` stands where an output drawn from control runs has its `Runs` (control_runs.py): which runs an output
needs (env, model, arms as method tag + target, seeds), whether the CSV has them, and the command that makes them.
`fresh_lm_runs` reads the finished language-model runs of a runs folder, `lm_csv_writes` adds them to the CSV.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from rlinfluence.figures import paper
from rlinfluence.figures.committed import Refresh
from rlinfluence.figures.curves import SEED_CURVES_NOTE, seed_curves
from rlinfluence.figures.formatting import MISSING_CELL, pm, pm_over_seeds
from rlinfluence.figures.render import figure_style
from rlinfluence.figures.requirements import FigureData, Output, RestrictableByEnvs
from rlinfluence.figures.runs import (
    RUN_DIR,
    check_one_setting,
    read_tidy_csv,
    run_agent,
    scan_runs,
    settings_hash,
    single_csv_writes,
)
from rlinfluence.run.identity import IDENTITY
from rlinfluence.run.provenance import HARDWARE_COLUMNS, PROVENANCE_COLUMNS, tidy_provenance

LM_CSV = Path("lm") / "runs.csv"
RUN_COLUMNS = ["experiment", "env", "model", "method", "method_tag", "target", "config_hash", "seed"]  # as runs.py
ROUND_COLUMNS = [
    "round",
    "train_return",
    "test_return",
    "test_toxicity",
    "n_records",
    "n_kept",
    "time_collect",
    "time_forward",
    "time_influence",
    "time_update",
    "time_eval",
]
LM_COLUMNS = RUN_COLUMNS + ROUND_COLUMNS + PROVENANCE_COLUMNS + HARDWARE_COLUMNS
RUN_KEY = ["experiment", "env", "model", "method_tag", "target", "seed"]
COMPARED = ["experiment", "env", "model"]  # the runs one figure compares with each other
STAGES = {
    "time_collect": "generation & scoring",
    "time_forward": "forward",
    "time_influence": "influence",
    "time_update": "optimisation",
}


@dataclass(frozen=True)
class LMArm:
    label: str
    method: str  # method.name; with p = 100 its tag is `<method>-p100`
    target: str = "seq"

    @property
    def tag(self) -> str:
        return self.method if self.method == "ppo" else f"{self.method}-p100"


STANDARD, IIF, RANDOM = LMArm("Standard PPO", "ppo"), LMArm("IIF", "iif"), LMArm("Random", "random")
IIF_RETURN = LMArm("IIF, f_return", "iif", "return")


@dataclass(frozen=True)
class LMRuns(RestrictableByEnvs):
    experiment: str
    envs: tuple[str, ...]  # one env; a tuple as regenerate.py restricts outputs by env
    model: str
    arms: tuple[LMArm, ...]
    seeds: int
    device: str = "cuda"
    overlay: str | None = None  # the +experiment overlay that makes the runs, where one does
    overrides: str = ""  # what the command sets beyond env, model, method, target, seed (e.g. the algorithm)
    experiments = ()  # reads no row of the control runs' tidy table

    @property
    def command(self) -> str:
        if self.overlay:
            return f"rlinfluence -m +experiment={self.overlay}"
        seeds = ",".join(map(str, range(self.seeds)))
        by_target: dict[str, list[str]] = {}
        for arm in self.arms:
            by_target.setdefault(arm.target, []).append(arm.method)
        return " && ".join(
            f"rlinfluence -m env={self.envs[0]} model={self.model} method={','.join(methods)} target={target} "
            f"seed={seeds} experiment_name={self.experiment} device={self.device}{self.overrides}"
            for target, methods in by_target.items()
        )

    def table(self, data_dir: Path) -> pd.DataFrame:
        path = data_dir / LM_CSV
        if not path.exists():
            return pd.DataFrame(columns=RUN_COLUMNS + ROUND_COLUMNS)
        rows = read_tidy_csv(path)
        check_one_setting(rows, RUN_KEY, COMPARED, str(path))
        return rows

    def _arm_rows(self, rows: pd.DataFrame, arm: LMArm) -> pd.DataFrame:
        return rows[
            (rows["experiment"] == self.experiment)
            & (rows["env"] == self.envs[0])
            & (rows["model"] == self.model)
            & (rows["method_tag"] == arm.tag)
            & (rows["target"] == arm.target)
        ]

    def _common_seeds(self, rows: pd.DataFrame) -> list[int]:
        return sorted(set.intersection(*(set(self._arm_rows(rows, arm)["seed"]) for arm in self.arms)))

    def shortfalls(self, data: FigureData) -> dict[str, str]:
        rows = self.table(data.data_dir)
        common = self._common_seeds(rows)
        if len(common) >= self.seeds:
            return {}
        have = ", ".join(f"{arm.label} {self._arm_rows(rows, arm)['seed'].nunique()}" for arm in self.arms)
        return {
            self.envs[0]: f"{self.experiment}/{self.envs[0]} (model={self.model}): needs {self.seeds} seeds run "
            f"by every arm, has {len(common)} in common (seeds per arm: {have})"
        }

    def progress(self, data: FigureData) -> dict[str, tuple[int, int]]:
        """(finished runs among the seeds needed, runs needed) for the one env."""
        rows = self.table(data.data_dir)
        done = sum(min(self._arm_rows(rows, arm)["seed"].nunique(), self.seeds) for arm in self.arms)
        return {self.envs[0]: (done, self.seeds * len(self.arms))}

    def select(self, data: FigureData) -> pd.DataFrame:
        rows = self.table(data.data_dir)
        seeds = self._common_seeds(rows)[: self.seeds]
        selected = pd.concat([self._arm_rows(rows, arm).assign(arm=arm.label) for arm in self.arms], ignore_index=True)
        return selected[selected["seed"].isin(seeds)]


# ---------------------------------------------------------------- the tidy CSV


def _read_lm_run(run_dir: Path) -> pd.DataFrame:
    settings = json.loads((run_dir / IDENTITY).read_text())["settings"]
    summary = json.loads((run_dir / "summary.json").read_text())
    run = {
        "experiment": summary["experiment"],
        "env": summary["env"],
        "model": settings["model.name"],
        "method": summary["method"],
        "method_tag": summary["method_tag"],
        "target": settings["target.name"],
        "config_hash": settings_hash(summary),
        "seed": summary["seed"],
    }
    rounds = pd.read_csv(run_dir / "metrics.csv", usecols=ROUND_COLUMNS)
    return rounds.assign(**run, run_dir=str(run_dir), **tidy_provenance(summary.get("provenance", [])))[
        LM_COLUMNS + [RUN_DIR]
    ]


def fresh_lm_runs(runs_root: str | Path) -> pd.DataFrame:
    """The tidy rows of the finished language-model runs under `runs_root`."""
    runs = [_read_lm_run(run_dir) for run_dir in scan_runs(runs_root).finished if run_agent(run_dir) == "lm"]
    return pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(columns=LM_COLUMNS + [RUN_DIR])


def lm_csv_writes(fresh: pd.DataFrame, runs_root: str | Path, data_dir: Path, replace: set[str]) -> Refresh:
    """`fresh` (`fresh_lm_runs`) merged into `<data_dir>/lm/runs.csv` (a run found on disk replaces its rows,
    when made with the same settings; the CSV's other runs are kept); nothing is written (`Refresh.write` does)."""
    return single_csv_writes(fresh, data_dir / LM_CSV, LM_COLUMNS, RUN_KEY, COMPARED, runs_root, data_dir, replace)


# ---------------------------------------------------------------- builders


def _curves(rows: pd.DataFrame, panels: dict[str, str], output: Output[LMRuns]) -> Figure:
    """One panel per metric against round, one colour per arm, each seed's curve under the mean over seeds and
    its band (`seed_curves`)."""
    arms = [arm.label for arm in output.runs.arms]
    palette = dict(zip(arms, sns.color_palette("colorblind", len(arms))))
    with figure_style():
        fig = Figure(figsize=(4.2 * len(panels), 3.2), layout="constrained")
        for ax, (column, label) in zip(fig.subplots(1, len(panels), squeeze=False).ravel(), panels.items()):
            seed_curves(ax, rows.dropna(subset=[column]), column, hue="arm", hue_order=arms, palette=palette)
            ax.set(xlabel="round", ylabel=label)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.suptitle(f"{output.title}: {output.caption}", wrap=True)
    return fig


def reward_and_toxicity(output: Output[LMRuns], rows: pd.DataFrame) -> Figure:
    return _curves(rows, {"train_return": "training reward", "test_toxicity": "test toxicity"}, output)


def reward_only(output: Output[LMRuns], rows: pd.DataFrame) -> Figure:
    return _curves(rows, {"train_return": "training reward"}, output)


def runtime_table(output: Output[LMRuns], rows: pd.DataFrame) -> pd.DataFrame:
    """Per-round seconds of each stage (rounds ≥ 1; round 0 only evaluates), mean ± std over seeds."""
    rounds = rows[rows["round"] >= 1].assign(total=lambda r: r[list(STAGES)].sum(axis=1))
    per_seed = rounds.groupby(["arm", "seed"])[[*STAGES, "total"]].mean()
    table = []
    for column, stage in {**STAGES, "total": "total"}.items():
        cells = {"Stage": stage}
        for arm, paper_index in ((IIF, 0), (STANDARD, 1)):
            seconds = per_seed.loc[arm.label, column]
            skipped = arm == STANDARD and column == "time_influence"
            cells[f"{arm.label} (s)"] = MISSING_CELL if skipped else pm_over_seeds(seconds, 2)
            reported = paper.TABLE6[stage][paper_index]
            cells[f"{arm.label}, paper (s)"] = pm(*reported, 2) if reported else MISSING_CELL
        table.append(cells)
    share = per_seed.loc[IIF.label, "total"].mean() / per_seed.loc[STANDARD.label, "total"].mean()
    table.append(
        {
            "Stage": "IIF total / std total",
            f"{IIF.label} (s)": f"{100 * share:.1f} %",
            f"{IIF.label}, paper (s)": f"{paper.TABLE6_TOTAL_SHARE:.2f} %",
            f"{STANDARD.label} (s)": MISSING_CELL,
            f"{STANDARD.label}, paper (s)": MISSING_CELL,
        }
    )
    return pd.DataFrame(table)


# ---------------------------------------------------------------- the catalogue

LM_CURVE_NOTE = (
    f"{SEED_CURVES_NOTE[0].upper()}{SEED_CURVES_NOTE[1:]}; training reward = the reward model's mean score of the "
    "round's rollouts."
)
_PAPER: dict[str, Any] = dict(experiment="rlhf", envs=("toxicity",), model="gpt_neo_2p7b", seeds=3)
# The same outputs from the offline tiny world (env=toxicity_tiny), which a CPU makes in minutes.
_TINY_WORLD: dict[str, Any] = dict(envs=("toxicity_tiny",), model="tiny", device="cpu")
_TINY: dict[str, Any] = dict(experiment="rlhf_tiny", seeds=3, **_TINY_WORLD)
# A tiny-world study beyond the paper (grpo.py, corruption.py): 5 seeds; its experiment and overlay its own.
TINY_STUDY: dict[str, Any] = dict(seeds=5, **_TINY_WORLD)

OUTPUTS: tuple[Output, ...] = tuple(
    output
    for suffix, runs in (("", _PAPER), ("_tiny", _TINY))
    for output in (
        Output(
            f"fig7_rlhf{suffix}",
            f"Fig. 7{' (tiny world)' if suffix else ''}",
            "RLHF detoxification: training reward and test toxicity against round, IIF (keeping the records of "
            "positive f_seq influence), standard PPO and random filtering (dropping as many). " + LM_CURVE_NOTE,
            LMRuns(arms=(STANDARD, IIF, RANDOM), **runs),
            reward_and_toxicity,
        ),
        Output(
            f"fig16_rlhf_targets{suffix}",
            f"Fig. 16{' (tiny world)' if suffix else ''}",
            "IIF with the sequence target f_seq against the token-level f_return, and standard PPO. " + LM_CURVE_NOTE,
            LMRuns(arms=(STANDARD, IIF, IIF_RETURN), **runs),
            reward_only,
        ),
        Output(
            f"table6_rlhf_runtime{suffix}",
            f"Table 6{' (tiny world)' if suffix else ''}",
            "Per-round seconds of each stage of an RLHF round (mean ± std over seeds of the per-round means): "
            "generation & scoring of the train responses, the forward passes (policy, reference, value), "
            "influence (val responses, target gradient, per-sequence scores) and optimisation.",
            LMRuns(arms=(STANDARD, IIF), **runs),
            runtime_table,
        ),
    )
)
