"""Planted bad data (corruption.py, +experiment=corruption): does influence find the records we made harmful,
and does IIF recover the clean learning curve?

Each kind and fraction of planted records is an experiment of its own (`corruption_<kind>_<fraction>`), whose
test returns are ordinary tidy rows (runs.py). How well each round's drop set and scores found the planted
records (the run dir's corruption.jsonl, metrics.planted_detection) has its own tidy CSV,
`<data_dir>/corruption/detection.csv`: `fresh_detection_runs` reads the finished runs' and
`detection_csv_writes` adds them to it. The clean arm is the main comparison's runs (experiment main).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from rlinfluence.corruption import ADVANTAGE_SIGN, REWARD
from rlinfluence.figures import paper
from rlinfluence.figures.arms import IIF, RANDOM, STANDARD, Arm
from rlinfluence.figures.committed import Refresh
from rlinfluence.figures.control_runs import CPU_EVALUATION, ArmRuns, Runs
from rlinfluence.figures.curves import CURVES_NOTE, curves_figure
from rlinfluence.figures.fidelity import Sources
from rlinfluence.figures.formatting import MISSING_CELL, pm_over_seeds
from rlinfluence.figures.requirements import FigureData, Output, RestrictableByEnvs
from rlinfluence.figures.rlhf import IIF as LM_IIF, RANDOM as LM_RANDOM, STANDARD as LM_STANDARD, TINY_STUDY, LMRuns
from rlinfluence.figures.runs import (
    COMPARED,
    RUN_COLUMNS,
    RUN_DIR,
    RUN_KEY,
    read_tidy_csv,
    scan_runs,
    settings_hash,
    single_csv_writes,
)
from rlinfluence.run.checkpoint import CORRUPTION
from rlinfluence.run.identity import CLEAN
from rlinfluence.run.logger import DETECTION

DETECTION_CSV = Path("corruption") / "detection.csv"
DETECTION_COLUMNS = RUN_COLUMNS + ["round", *DETECTION]
FRACTIONS = (0.05, 0.1, 0.2)  # of advantage-sign flips, the study's kind (conf/experiment/corruption.yaml)
REWARD_FRACTION = 0.1  # negated rewards, the harder kind: GAE spreads each over the steps before it
HEADLINE_FRACTION = 0.1  # the curves figure's
CORRUPTION_ENVS = ("frozenlake", "acrobot", "lunarlander")


def experiment_name(kind: str, fraction: float) -> str:
    """As conf/experiment/corruption.yaml names the experiment of a kind and fraction."""
    return f"corruption_{kind}_{fraction}"


# ---------------------------------------------------------------- the detection CSV


def _read_detection(run_dir: Path) -> pd.DataFrame:
    summary = json.loads((run_dir / "summary.json").read_text())
    run = {key: summary[key] for key in RUN_COLUMNS if key != "config_hash"}
    lines = [json.loads(line) for line in (run_dir / CORRUPTION).read_text().splitlines()]
    rounds = pd.DataFrame(lines, columns=["round", *DETECTION]).astype(dict.fromkeys(DETECTION, float))
    return rounds.assign(**run, config_hash=settings_hash(summary), run_dir=str(run_dir))[DETECTION_COLUMNS + [RUN_DIR]]


def fresh_detection_runs(runs_root: str | Path) -> pd.DataFrame:
    """Per round, how the finished corrupted runs under `runs_root` (either agent's) found their planted records."""
    runs = [_read_detection(run_dir) for run_dir in scan_runs(runs_root).finished if (run_dir / CORRUPTION).exists()]
    return pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(columns=DETECTION_COLUMNS + [RUN_DIR])


def detection_csv_writes(fresh: pd.DataFrame, runs_root: str | Path, data_dir: Path, replace: set[str]) -> Refresh:
    """`fresh` merged into `<data_dir>/corruption/detection.csv` as the tidy rows are into theirs (runs.py);
    nothing is written (`Refresh.write` does)."""
    return single_csv_writes(
        fresh, data_dir / DETECTION_CSV, DETECTION_COLUMNS, RUN_KEY, COMPARED, runs_root, data_dir, replace
    )


# ---------------------------------------------------------------- the runs an output needs


@dataclass(frozen=True)
class CorruptedRuns(ArmRuns, RestrictableByEnvs):
    """The `arms` trained on data with `fraction` of each round's records planted (`kind`), 5 seeds per env;
    their rows carry the detection columns (NaN where a run has none)."""

    fraction: float
    envs: tuple[str, ...] = CORRUPTION_ENVS
    arms: tuple[Arm, ...] = (STANDARD, IIF, RANDOM)
    kind: str = ADVANTAGE_SIGN
    seeds: int = 5
    protocols: tuple[str, ...] = (CLEAN,)
    all_seeds: bool = False

    @property
    def experiment(self) -> str:
        return experiment_name(self.kind, self.fraction)

    def command_for(self, env: str) -> str:
        evaluation = f" {CPU_EVALUATION[env]}" if env in CPU_EVALUATION else ""
        # The overlay's kind and methods are its sweep's; another kind names its own arms' methods.
        methods = ",".join(arm.tag.partition("-")[0] for arm in self.arms)
        kind = "" if self.kind == ADVANTAGE_SIGN else f" corruption.kind={self.kind} method={methods}"
        return f"rlinfluence -m +experiment=corruption env={env}{kind} corruption.fraction={self.fraction}{evaluation}"

    def select(self, data: FigureData) -> pd.DataFrame:
        return with_detection(super().select(data), data.data_dir)


def with_detection(rows: pd.DataFrame, data_dir: Path) -> pd.DataFrame:
    """`rows` (tidy rows of either agent's runs) with each round's detection columns, NaN where none."""
    path = data_dir / DETECTION_CSV
    detection = read_tidy_csv(path) if path.exists() else pd.DataFrame(columns=DETECTION_COLUMNS)
    on = ["experiment", "env", "method_tag", "config_hash", "seed", "round"]  # the hash tells LM targets apart
    return rows.merge(detection[on + list(DETECTION)], on=on, how="left")


@dataclass(frozen=True)
class PlantedLMRuns(LMRuns):
    """Language-model runs (rlhf.LMRuns) whose rows carry the detection columns."""

    def select(self, data: FigureData) -> pd.DataFrame:
        return with_detection(super().select(data), data.data_dir)


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g} %"


CLEAN_SOURCE = "clean"
LM_FRACTION = 0.1


def lm_runs(fraction: float) -> PlantedLMRuns:
    return PlantedLMRuns(
        **TINY_STUDY,
        experiment=f"corruption_lm_tiny_{fraction}",
        arms=(LM_STANDARD, LM_IIF, LM_RANDOM),
        overlay="corruption_lm_tiny",
    )


LM_STUDY_RUNS = Sources(((f"{_percent(LM_FRACTION)} planted", lm_runs(LM_FRACTION)), (CLEAN_SOURCE, lm_runs(0.0))))
CORRUPTED_SOURCES = (
    *((f"{_percent(f)} planted", CorruptedRuns(f)) for f in FRACTIONS),
    (
        f"{_percent(REWARD_FRACTION)} planted (rewards)",
        # Not FrozenLake: only its goal steps carry a reward, so negating a random step's would change nothing.
        CorruptedRuns(REWARD_FRACTION, kind=REWARD, arms=(STANDARD, IIF), envs=("acrobot", "lunarlander")),
    ),
)
STUDY_RUNS = Sources(
    (*CORRUPTED_SOURCES, (CLEAN_SOURCE, Runs("main", (STANDARD, IIF, RANDOM), envs_needed=CORRUPTION_ENVS)))
)


# ---------------------------------------------------------------- builders


def _per_run(rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """Each run's mean over its rounds 1.. of `columns`, and its final test return."""
    trained = rows[rows["round"] > 0]
    means = trained.groupby(["env", "source", "arm", "seed"])[columns].mean()
    final = trained.sort_values("round").groupby(["env", "source", "arm", "seed"])["test_return"].last()
    return means.assign(final=final).reset_index()


def lm_table(output: Output[Sources], rows: pd.DataFrame) -> pd.DataFrame:
    """Per data (planted or clean) and arm: final test toxicity and return, and per round the precision and
    recall of the drop set and the AUROC of −influence for the planted responses (scored by the filtering
    arms; standard PPO drops none and scores none)."""
    last = rows[rows["round"] == rows["round"].max()]
    trained = rows[rows["round"] > 0]
    table = []
    for source, _ in output.runs.parts:
        for arm in (LM_IIF, LM_RANDOM, LM_STANDARD):
            of_arm = trained[(trained["source"] == source) & (trained["arm"] == arm.label)]
            final = last[(last["source"] == source) & (last["arm"] == arm.label)].set_index("seed")
            per_seed = of_arm.groupby("seed")[["precision", "recall", "auroc_influence"]].mean()
            planted = source != CLEAN_SOURCE
            scored = planted and arm != LM_STANDARD
            table.append(
                {
                    "Data": source,
                    "Arm": arm.label,
                    "Seeds": str(len(final)),
                    "Final test toxicity": pm_over_seeds(final["test_toxicity"], 3),
                    "Final test return": pm_over_seeds(final["test_return"], 3),
                    "Precision of drops": pm_over_seeds(per_seed["precision"], 3) if scored else MISSING_CELL,
                    "Recall of drops": pm_over_seeds(per_seed["recall"], 3) if planted else MISSING_CELL,
                    "AUROC −influence": pm_over_seeds(per_seed["auroc_influence"], 3) if scored else MISSING_CELL,
                }
            )
    return pd.DataFrame(table)


def _ordered(table: list[dict[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(table).fillna(MISSING_CELL)


def detection_table(output: Output[Sources], rows: pd.DataFrame) -> pd.DataFrame:
    """Per env, planted share and arm: the per-round precision and recall of the arm's drop set against the
    planted records, and the AUROC of −influence and of the advantage heuristic's score for them."""
    measured = ["precision", "recall", "auroc_influence", "auroc_advantage"]
    runs = _per_run(rows[rows["source"] != CLEAN_SOURCE], measured)
    table = []
    for env in output.runs.envs:
        for source, runs_of_source in output.runs.parts_of(env):
            if not isinstance(runs_of_source, CorruptedRuns):  # the clean source plants nothing
                continue
            for arm in (IIF.label, RANDOM.label, STANDARD.label):
                of_arm = runs[(runs["env"] == env) & (runs["source"] == source) & (runs["arm"] == arm)]
                if of_arm.empty:
                    continue
                cells = {name: pm_over_seeds(of_arm[name], 3) for name in measured}
                if arm == STANDARD.label:  # it drops nothing: no precision; recall 0
                    cells["precision"] = MISSING_CELL
                table.append(
                    {
                        "Env": paper.ENV_TITLES.get(env, env),
                        "Planted": _percent(runs_of_source.fraction),
                        "Kind": runs_of_source.kind,
                        "Arm": arm,
                        "Seeds": str(len(of_arm)),
                        "Precision of drops": cells["precision"],
                        "Recall of drops": cells["recall"],
                        "AUROC −influence": cells["auroc_influence"],
                        "AUROC advantage heuristic": cells["auroc_advantage"],
                    }
                )
    return _ordered(table)


def recovery_table(output: Output[Sources], rows: pd.DataFrame) -> pd.DataFrame:
    """Per env and planted share: the mean test return over rounds (SE_ave's quantity) and the final test
    return of standard PPO, IIF and random on the corrupted data, beside them on clean data (the main
    comparison)."""
    runs = _per_run(rows, ["test_return"])
    table = []
    for env in output.runs.envs:
        of_env = runs[runs["env"] == env]
        for source, _ in output.runs.parts_of(env):
            row = {"Env": paper.ENV_TITLES.get(env, env), "Data": source}
            for arm in (STANDARD.label, IIF.label, RANDOM.label):
                of_arm = of_env[(of_env["source"] == source) & (of_env["arm"] == arm)]
                row[f"{arm}: mean over rounds"] = (
                    pm_over_seeds(of_arm["test_return"], 3) if len(of_arm) else MISSING_CELL
                )
                row[f"{arm}: final"] = pm_over_seeds(of_arm["final"], 3) if len(of_arm) else MISSING_CELL
            table.append(row)
    return _ordered(table)


def recovery_curves(output: Output[Sources], rows: pd.DataFrame) -> Figure:
    """Test return against round on clean data and with the headline share planted, both arms."""
    sources = (CLEAN_SOURCE, f"{_percent(HEADLINE_FRACTION)} planted")
    shown = rows[rows["source"].isin(sources)]
    labelled = shown.assign(arm=shown["arm"] + ", " + shown["source"])
    arms = [f"{arm}, {source}" for source in sources for arm in (STANDARD.label, IIF.label)]
    return curves_figure(labelled, output.runs.envs, arms, f"{output.title}: {output.caption}")


def _seeds_note() -> str:
    return "Mean ± std over 5 seeds (0–4) of each run's mean over rounds 1.. (final: its last round)."


OUTPUTS: tuple[Output, ...] = (
    Output(
        "corruption_detection",
        "Planted bad data: detection",
        f"Each round, a seeded {', '.join(_percent(f) for f in FRACTIONS)} of the records have their advantage "
        "sign flipped after GAE (corruption.kind=advantage_sign), and, a harder kind, "
        f"{_percent(REWARD_FRACTION)} their env reward negated before GAE (corruption.kind=reward; standard PPO "
        "and IIF). Precision and recall of each arm's drop set "
        "against the planted records (chance precision = the planted share, which random filtering at the "
        "same p measures), and the AUROC with which −influence "
        "(f_return at θ_k, scored in every arm) and the advantage heuristic's −Ā·Â (where Monte-Carlo "
        f"advantages exist) rank planted records below the others. {_seeds_note()}",
        STUDY_RUNS,
        detection_table,
    ),
    Output(
        "corruption_recovery",
        "Planted bad data: recovery",
        "Standard PPO, IIF and random filtering trained on data with planted advantage-sign flips (or negated "
        "rewards), beside them "
        f"on clean data (the main comparison's runs): does IIF recover the clean curve? {_seeds_note()}",
        STUDY_RUNS,
        recovery_table,
    ),
    Output(
        "corruption_curves",
        "Planted bad data: curves",
        f"Standard PPO and IIF on clean data and with {_percent(HEADLINE_FRACTION)} of each round's records "
        f"planted (advantage sign flipped). {CURVES_NOTE}",
        STUDY_RUNS,
        recovery_curves,
    ),
    Output(
        "corruption_lm_tiny",
        "Planted bad data: the tiny RLHF world",
        f"LM-PPO, IIF (p = 100 %, f_seq) and random (as many dropped as IIF would) with the reward-model score of a "
        f"seeded {_percent(LM_FRACTION)} of each round's responses negated (corruption.kind=reward, a noisy reward "
        "model), beside each on clean data; 8 rounds of 64 responses. Final: round 8. Precision and recall of the "
        "drops and the AUROC of −influence for the planted responses, per round (standard PPO drops none and "
        "scores no influence). Mean ± std over 5 seeds.",
        LM_STUDY_RUNS,
        lm_table,
    ),
)
