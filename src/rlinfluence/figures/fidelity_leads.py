"""Fidelity, the last leads: each untested explanation of the gap to the paper, scored beside what it
would change, one section per lead.

- Lead 1 (`+experiment=fidelity_train_env`): standard PPO collected on the env the authors' generic training script
  builds (`gym.make(id)` defaults: FrozenLake slippery, Highway at highway-v0's default traffic) and tested on the
  preset's env. The committed IIF and random runs (the main comparison's, clean protocol, same seeds) are scored
  against it, and beside that against the main comparison's own standard PPO of the same seeds, over the rounds
  both standard runs have: what changing the baseline alone does.
- Lead 2 (`+experiment=eval_noise`): the main comparison's three arms at the presets' test episodes, beside the
  committed runs (the CPU evaluation, control_runs.CPU_EVALUATION) of the same seeds; and the authors' pipeline at
  their scripts' own test episodes (experiment `authors_eval_noise`) beside their committed runs of the same seeds.
- Lead 3 (`benchmarks/sb3_iif_study.py --no-grad-clipping`): stock SB3 + IIF against stock SB3 without gradient
  clipping, beside the clipped study.
- Also: the statistics a paper might have reported as SE_ave's "±" (fidelity.reported_spreads), a question about
  reporting, not a result.

Runs are still arriving: a lead without runs is a "not run yet" row naming the command that makes them, and one with
fewer seeds than declared says so in its Seeds cell. Only the committed references (the main comparison, the clipped
SB3 study, the authors' runs) must be complete for the output to be made.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rlinfluence.config.compose import preset
from rlinfluence.figures import paper
from rlinfluence.figures.arms import IIF, RANDOM, STANDARD
from rlinfluence.figures.control_runs import ArmRuns, Runs, cpu_eval_episodes
from rlinfluence.figures.fidelity import (
    AUTHORS,
    AUTHORS_RUNS,
    AUTHORS_SOURCE,
    FIDELITY_ENVS,
    AuthorsRuns,
    Sources,
    paper_row,
    reported_spreads,
    robust_cells,
    se_per_seed,
    source_row,
)
from rlinfluence.figures.formatting import MISSING_CELL, pm, pm_over_seeds
from rlinfluence.figures.quantities import curve, efficiency_per_seed
from rlinfluence.figures.render import Section
from rlinfluence.figures.requirements import FigureData, Output
from rlinfluence.figures.sb3_dropin import SB3, SB3_NO_CLIPPING, SB3_NO_CLIPPING_RUNS, SB3_RUNS
from rlinfluence.metrics import TRAINING_TIME_COLUMNS
from rlinfluence.run.identity import CLEAN

NOT_RUN = "not run yet"
TRAIN_ENV, EVAL_NOISE = "fidelity_train_env", "eval_noise"  # the leads' overlays (conf/experiment/)


@dataclass(frozen=True)
class LeadRuns(Runs):
    """A lead's runs, made at their overlay's own settings (not the committed runs' CPU evaluation): every seed
    that has arrived is used."""

    all_seeds: bool = True

    def command_for(self, env: str) -> str:
        return f"rlinfluence -m +experiment={self.overlay} env={env}"

    @property
    def command(self) -> str:
        return " && ".join(map(self.command_for, self.envs))


# Highway's runs have an overlay of their own (the FrozenLake kwargs would merge into highway's), same experiment.
TRAIN_ENV_RUNS = (
    LeadRuns(TRAIN_ENV, (STANDARD,), envs_needed=("frozenlake",)),
    LeadRuns(f"{TRAIN_ENV}_highway", (STANDARD,), envs_needed=("highway",)),
)
EVAL_NOISE_RUNS = LeadRuns(EVAL_NOISE, (STANDARD, IIF, RANDOM))
# The authors' pipeline at their scripts' 1,000 test episodes: one MiniGrid seed (about 2 h on one core here; a
# LunarLander seed would take about 3 h, benchmarks/authors_pipeline/README.md). Their standard training is seeded,
# so its checkpoints should be those their committed runs tested at 100 episodes; their IIF arm is a new draw.
AUTHORS_EVAL_NOISE_RUNS = AuthorsRuns(
    "authors_eval_noise",
    ("minigrid",),
    (STANDARD, IIF),
    seeds=1,
    protocols=(AUTHORS,),
    all_seeds=True,
    test_episodes=1000,
)
FILTERS = (IIF, RANDOM)

MAIN_SOURCE = "the main comparison's (committed)"
TRAIN_ENV_SOURCE = "trained on the authors' script's env"
EVAL_NOISE_SOURCE = "the presets' test episodes"
AUTHORS_EVAL_NOISE_SOURCE = "the authors' code at their scripts' test episodes"
SB3_SOURCE, SB3_NO_CLIPPING_SOURCE = "stock SB3 + IIF vs stock SB3, clipped", "the same, never clipped"
OURS_SOURCE = "ours, clean protocol (Fig. 6b)"
ARRIVING = (TRAIN_ENV_SOURCE, EVAL_NOISE_SOURCE, AUTHORS_EVAL_NOISE_SOURCE, SB3_NO_CLIPPING_SOURCE)


@dataclass(frozen=True)
class Leads(Sources):
    """Sources of which some are still arriving (`ARRIVING`): those never make the output missing, the table shows
    what has arrived. Its envs are every source's."""

    @property
    def envs(self) -> tuple[str, ...]:
        return tuple(env for env in paper.ENV_ORDER if any(env in runs.envs for _, runs in self.parts))

    @property
    def committed(self) -> Sources:
        return Sources(tuple((label, runs) for label, runs in self.parts if label not in ARRIVING))

    def shortfalls(self, data: FigureData) -> dict[str, str]:
        return self.committed.shortfalls(data)

    def runs_of(self, label: str, env: str) -> ArmRuns | None:
        """The runs of source `label` that cover `env` (every source here is an arm's runs)."""
        return next(
            (runs for source, runs in self.parts_of(env) if source == label and isinstance(runs, ArmRuns)), None
        )


LEAD_ENVS = ("frozenlake", "highway", "minigrid", "lunarlander")
LEADS = Leads(
    (
        (MAIN_SOURCE, Runs("main", (STANDARD, *FILTERS), envs_needed=LEAD_ENVS)),
        *((TRAIN_ENV_SOURCE, runs) for runs in TRAIN_ENV_RUNS),
        (EVAL_NOISE_SOURCE, EVAL_NOISE_RUNS),
        (SB3_SOURCE, SB3_RUNS),
        (SB3_NO_CLIPPING_SOURCE, SB3_NO_CLIPPING_RUNS),
        (AUTHORS_SOURCE, AUTHORS_RUNS),
        (AUTHORS_EVAL_NOISE_SOURCE, AUTHORS_EVAL_NOISE_RUNS),
    )
)


def _of(rows: pd.DataFrame, source: str, env: str) -> pd.DataFrame:
    return rows[(rows["source"] == source) & (rows["env"] == env)]


def _seeds_cell(seeds: int, needed: int) -> str:
    return str(seeds) if seeds >= needed else f"{seeds} of {needed} (partial: runs still arriving)"


def _not_run(env: str, runs: ArmRuns, **cells: str) -> dict[str, str]:
    """A row of a lead whose runs of `env` have not arrived: the command that makes them."""
    return {"Env": paper.ENV_TITLES[env], **cells, "Seeds": f"0: {NOT_RUN} (`{runs.command_for(env)}`)"}


def _mean_gap(std: pd.DataFrame, arm: pd.DataFrame) -> float:
    """Mean over seeds of the arm's test return minus standard PPO's, averaged over the training rounds."""
    gaps = [
        np.nanmean(curve(arm[arm["seed"] == seed])[1:] - curve(std[std["seed"] == seed])[1:])
        for seed in sorted(set(std["seed"]))
    ]
    return float(np.mean(gaps))


def train_env_section(output: Output[Leads], rows: pd.DataFrame) -> Section:
    table = []
    for env in (env for env in output.runs.envs if env in {e for r in TRAIN_ENV_RUNS for e in r.envs}):
        runs = output.runs.runs_of(TRAIN_ENV_SOURCE, env)
        lead, main = _of(rows, TRAIN_ENV_SOURCE, env), _of(rows, MAIN_SOURCE, env)
        seeds = sorted(set(lead["seed"]) & set(main["seed"]))  # the same seeds as the committed runs
        if runs is None or not seeds:
            table.append(_not_run(env, runs or TRAIN_ENV_RUNS[0], **{"Standard PPO": TRAIN_ENV_SOURCE}))
            continue
        horizon = int(min(lead["round"].max(), main["round"].max()))
        main = main[main["seed"].isin(seeds) & (main["round"] <= horizon)]
        baselines = (
            (TRAIN_ENV_SOURCE, lead[lead["seed"].isin(seeds) & (lead["round"] <= horizon)]),
            (MAIN_SOURCE, main),
        )
        for arm in FILTERS:
            arm_rows = main[main["arm"] == arm.label]
            for baseline, std in baselines:
                std = std[std["arm"] == STANDARD.label]
                per_seed = efficiency_per_seed(pd.concat([std, arm_rows]), (arm,))
                reported = paper.FIG6B[env]["SE_ave"] if arm == IIF else None
                table.append(
                    {
                        "Env": paper.ENV_TITLES[env],
                        "Arm": arm.label,
                        "Standard PPO": baseline,
                        "Rounds": f"0–{horizon}",
                        "Seeds": _seeds_cell(len(seeds), runs.seeds),
                        **robust_cells(per_seed["SE_ave"], "SE_ave"),
                        "SE_peak mean ± std": pm_over_seeds(per_seed["SE_peak"], 1),
                        "Unreached levels": f"{per_seed['unreached'].sum()} / {per_seed['levels'].sum()}",
                        "Arm − std, mean return": f"{_mean_gap(std, arm_rows):.2f}",
                        "Paper SE_ave": pm(*reported, 1) if reported else MISSING_CELL,
                    }
                )
    return Section(
        "Lead 1: standard PPO trained on another env than the test",
        "Standard PPO collected on the env the authors' generic training script builds (gym.make(id) defaults: "
        "FrozenLake slippery, Highway at highway-v0's default traffic), tested on the preset's env (+experiment="
        f"{TRAIN_ENV}); the committed IIF and random runs (main comparison, clean protocol) of the same seeds scored "
        "against it, and against the main comparison's own standard PPO, over the rounds both standard runs have. "
        "Prediction: if the lead is right, IIF's SE_ave lands near the paper's and random stays below standard PPO "
        "(negative SE_ave, negative return gap); if random also gains by a wide margin, the lead explains nothing "
        "about the paper. Arm − std: the arm's test return minus standard PPO's, mean over training rounds and seeds.",
        pd.DataFrame(table).fillna(MISSING_CELL),
    )


def episodes_of(env: str, source: str) -> int:
    """The test episodes a round of `source`'s runs of `env`: the committed runs' CPU evaluation, the presets'."""
    if source == MAIN_SOURCE:
        return cpu_eval_episodes(env)
    return int(preset(env).env.eval_episodes)


def _cost(env: str, main: pd.DataFrame, runs: ArmRuns) -> str:
    """What the lead's runs of `env` would take, from the committed runs' timings: training as it was, evaluation
    scaled to the presets' test episodes."""
    scale = episodes_of(env, EVAL_NOISE_SOURCE) / episodes_of(env, MAIN_SOURCE)
    seconds = main[list(TRAINING_TIME_COLUMNS)].sum(axis=1) + scale * main["time_eval"]
    per_run = seconds.groupby([main["arm"], main["seed"]]).sum()
    needed = runs.seeds * len(EVAL_NOISE_RUNS.arms)
    return (
        f"≈ {needed * per_run.mean() / 3600:.0f} CPU-hours ({needed} runs of ≈ {per_run.mean() / 3600:.1f} h: the "
        f"committed runs' training time, evaluation scaled × {scale:g})"
    )


def _noise_row(env: str, arm: str, code: str, rows: pd.DataFrame, protocol: str, episodes: int, seeds: str) -> dict:
    """One arm of one source at one evaluation: SE_ave against standard PPO of the same seeds, and the standard
    curve's best test return (SE_ave's top level, which a noisier test raises)."""
    per_seed = se_per_seed(rows, arm, protocol, None)
    reported = paper.FIG6B[env]["SE_ave"]
    ratio = f"{per_seed['SE_ave'].std() / reported[1]:.1f}" if arm == IIF.label and len(per_seed) > 1 else MISSING_CELL
    best = rows[rows["arm"] == STANDARD.label].groupby("seed")["test_return"].max()
    return {
        "Env": paper.ENV_TITLES[env],
        "Code": code,
        "Arm": arm,
        "Test episodes": str(episodes),
        "Rounds": f"0–{int(rows['round'].max())}",
        "Seeds": seeds,
        **robust_cells(per_seed["SE_ave"], "SE_ave"),
        "SE_peak mean ± std": pm_over_seeds(per_seed["SE_peak"], 1),
        "Standard PPO's best test return": pm_over_seeds(best, 2),
        "Paper SE_ave": pm(*reported, 1) if arm == IIF.label else MISSING_CELL,
        "SE_ave std / paper's ±": ratio,
    }


def _authors_noise_rows(env: str, rows: pd.DataFrame) -> list[dict]:
    """The authors' IIF at their scripts' test episodes beside their committed runs of the same seeds."""
    runs = AUTHORS_EVAL_NOISE_RUNS
    theirs, committed = _of(rows, AUTHORS_EVAL_NOISE_SOURCE, env), _of(rows, AUTHORS_SOURCE, env)
    seeds = sorted(set(theirs["seed"]) & set(committed["seed"]))
    if not seeds:
        return [_not_run(env, runs, Code=AUTHORS_SOURCE, **{"Test episodes": str(runs.test_episodes)})]
    return [
        _noise_row(
            env,
            IIF.label,
            AUTHORS_SOURCE,
            of_source[of_source["seed"].isin(seeds)],
            AUTHORS,
            source_runs.episodes(env),
            _seeds_cell(len(seeds), runs.seeds),
        )
        for of_source, source_runs in ((committed, AUTHORS_RUNS), (theirs, runs))
    ]


def eval_noise_section(output: Output[Leads], rows: pd.DataFrame) -> Section:
    table = []
    for env in (env for env in output.runs.envs if env in EVAL_NOISE_RUNS.envs):
        runs = output.runs.runs_of(EVAL_NOISE_SOURCE, env) or EVAL_NOISE_RUNS
        lead, main = _of(rows, EVAL_NOISE_SOURCE, env), _of(rows, MAIN_SOURCE, env)
        seeds = sorted(set(lead["seed"]) & set(main["seed"]))  # the same seeds as the committed runs
        if not seeds:
            table.append(
                _not_run(env, runs, Code="ours", **{"Test episodes": str(episodes_of(env, EVAL_NOISE_SOURCE))})
                | {"Cost": _cost(env, main, runs)}
            )
        else:
            table.extend(
                _noise_row(
                    env,
                    arm.label,
                    "ours",
                    of_source[of_source["seed"].isin(seeds)],
                    CLEAN,
                    episodes_of(env, source),
                    _seeds_cell(len(seeds), runs.seeds),
                )
                for arm in FILTERS
                for source, of_source in ((MAIN_SOURCE, main), (EVAL_NOISE_SOURCE, lead))
            )
        if env in AUTHORS_EVAL_NOISE_RUNS.envs:
            table.extend(_authors_noise_rows(env, rows))
    return Section(
        "Lead 2: evaluation noise",
        f"The main comparison's arms at the presets' test episodes a round (+experiment={EVAL_NOISE}), beside the "
        "committed runs' CPU evaluation, same seeds, each arm against standard PPO of the same seed and evaluation; "
        "the authors' released pipeline (benchmarks/authors_pipeline/, unmodified) at their scripts' own test "
        "episodes beside their committed runs of the same seeds. Standard PPO's best test return: the top of the "
        "running-maximum levels, mean over seeds. Prediction: if evaluation noise explains the gap, SE_ave moves "
        "toward the paper's and its seed spread shrinks toward the paper's ±. A lead not run says what its runs "
        "would cost.",
        pd.DataFrame(table).fillna(MISSING_CELL),
    )


def sb3_section(output: Output[Leads], rows: pd.DataFrame) -> Section:
    table = []
    variants = ((SB3_SOURCE, SB3, SB3_RUNS), (SB3_NO_CLIPPING_SOURCE, SB3_NO_CLIPPING, SB3_NO_CLIPPING_RUNS))
    for env in (env for env in output.runs.envs if env in SB3_RUNS.envs):
        table.append(paper_row(env))
        for source, protocol, runs in variants:
            source_rows = _of(rows, source, env)
            if source_rows.empty:
                table.append(_not_run(env, runs, Source=source))
                continue
            per_seed = se_per_seed(source_rows, IIF.label, protocol, None)
            row = source_row(env, source, f"0–{int(source_rows['round'].max())}", per_seed)
            table.append(row | {"Seeds": _seeds_cell(len(per_seed), runs.seeds)})
    return Section(
        "Lead 3: stock SB3 as the authors ran it",
        "Stock SB3 + IIF against stock SB3 of the same seed (benchmarks/sb3_iif_study.py), with SB3's default gradient "
        "clipping and without it (max_grad_norm = inf, as the authors' patched SB3): the "
        "unclipped study is reported beside the clipped one, not instead of it.",
        pd.DataFrame(table).fillna(MISSING_CELL),
    )


def spreads_section(output: Output[Leads], rows: pd.DataFrame) -> Section:
    table = []
    for env in (env for env in output.runs.envs if env in FIDELITY_ENVS):
        reported = paper.FIG6B[env]["SE_ave"]
        for source, protocol in ((AUTHORS_SOURCE, AUTHORS), (MAIN_SOURCE, CLEAN)):
            source_rows = _of(rows, source, env)
            spreads = reported_spreads(source_rows, IIF.label, protocol)
            ci = spreads.mean_curves
            candidates = {
                "std over seeds": spreads.per_seed_std,
                "standard error": spreads.standard_error,
                "seed-mean curves' CI half-width": (ci.high - ci.low) / 2,
            }
            nearest = min(candidates, key=lambda name: abs(candidates[name] - reported[1]))
            table.append(
                {
                    "Env": paper.ENV_TITLES[env],
                    "Source": source if source == AUTHORS_SOURCE else OURS_SOURCE,
                    "Seeds": str(source_rows["seed"].nunique()),
                    "Per-seed SE_ave mean": f"{spreads.per_seed_mean:.1f}",
                    "Std over seeds": f"{spreads.per_seed_std:.1f}",
                    "Standard error": f"{spreads.standard_error:.1f}",
                    "SE_ave of the seed-mean curves [95 % CI]": f"{ci.mean:.1f} [{ci.low:.1f}, {ci.high:.1f}]",
                    "Paper SE_ave": pm(*reported, 1),
                    "Nearest to the paper's ±": (
                        f"{nearest} ({candidates[nearest]:.1f}: {candidates[nearest] / reported[1]:.1f}× the paper's)"
                    ),
                }
            )
    return Section(
        "Also: what the paper's ± might be (a question about reporting, not a result)",
        "IIF against standard PPO of the same seed over the whole runs: the mean and std over seeds of per-seed "
        "SE_ave (our tables' headline), the standard error (std / √seeds), and SE_ave of the seed-mean curves with a "
        "95 % percentile bootstrap over seeds (each seed with both its arms' curves). Nearest: the statistic closest "
        "to the paper's ±; the paper does not say which it printed.",
        pd.DataFrame(table),
    )


def leads_sections(output: Output[Leads], rows: pd.DataFrame) -> tuple[Section, ...]:
    return tuple(build(output, rows) for build in (train_env_section, eval_noise_section, sb3_section, spreads_section))


OUTPUTS: tuple[Output, ...] = (
    Output(
        "fidelity_leads",
        "Fidelity: the last leads",
        "Issue 42's three leads, each scored beside the committed runs it would change, and the statistics the "
        "paper's ± might be. SE as in Fig. 6b (running-maximum levels of the standard curve; a level never reached "
        "counts 0 %); mean ± std over seeds (the paper's statistic), median, IQM with a 95 % percentile-bootstrap CI "
        "(scipy, 10,000 resamples), per-seed values in seed order. Leads still running show the seeds that have "
        "arrived; a lead without runs is a 'not run yet' row with its command.",
        LEADS,
        leads_sections,
    ),
)
