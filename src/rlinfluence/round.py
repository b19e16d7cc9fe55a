"""The round loop every environment and every method shares.

    for k in 1..K:
        buffer = collect(policy, envs, n_steps)          # records with ids, GAE advantages
        scores = attribute(policy, buffer, target)       # one float per record (if the method needs them)
        keep   = select(method, buffer, scores, rng)     # keep-mask or sampling weights
        stats  = update(policy, optimizer, buffer, keep) # PPO epochs over the kept records
        row    = evaluate(policy, eval_envs)             # test return
        log(row); checkpoint(k)                          # metrics.csv first, W&B mirror; resumable

Round 0 is the evaluation of the initial policy. What differs between envs and methods lives in
config and in the strategy objects (selection, target, action head), never in this loop. It drives an
agent (run/agents.py's Agent): control/trainer.py's for the control envs, lm/trainer.py's for language
models; run/loop.py runs the rounds of a run. The loop owns what every agent shares: the order of the
stages, their timing, the selection, the row's common fields and the NaN of what a round did not
measure (a round eval.every skips). A round that planted records (corruption.py) adds how well its
selection and scores found them to its row, beyond the metrics.csv columns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
from omegaconf import DictConfig

from rlinfluence.corruption import plants, round_detection
from rlinfluence.records import Records
from rlinfluence.selection import Influence, Selection, SelectionMethod

NAN = float("nan")

# The metrics.csv columns every agent writes, in order (an agent may add its own after them: lm/trainer.py).
COLUMNS = [
    "round",
    "env_steps",
    "test_return",
    "test_return_sem",
    "eval_episodes",
    "train_return",
    "n_records",
    "n_kept",
    "n_negative",
    "kept_fraction",
    "gradient_steps",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "time_collect",
    "time_influence",
    "time_select",
    "time_update",
    "time_eval",
    "influence_step_spearman",  # influence.checkpoints=every_step only
]


def is_eval_round(k: int, every: int, rounds: int) -> bool:
    """Rounds that are evaluated: every `eval.every`-th, and always the last (the final test return)."""
    return k % every == 0 or k == rounds


R = TypeVar("R", bound=Records)
# What an agent's attribute stage gives its own update back: Influence, or an agent's richer kind (the control
# agent's ControlInfluence carries every-step influence), so that update may ask for that kind.
S = TypeVar("S", bound=Influence)


class Agent(Protocol[R, S]):
    """One run's trainer, on records of type R (control: `RolloutBuffer`; lm: `Sequences`) and with influence
    (its scores) of type S (control: `ControlInfluence`; lm: `Influence`)."""

    cfg: DictConfig
    columns: ClassVar[list[str]]  # its metrics.csv columns, in order
    method: SelectionMethod  # method.name's selection, which the loop applies to its records
    selection_rng: np.random.Generator

    def __init__(self, cfg: DictConfig) -> None:
        """Build the run's model, optimizer, envs and RNGs from its (validated) config."""

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        """Raise ConfigError (one line naming the key) on settings this agent cannot run with."""

    def state_fields(self) -> dict[str, float]:
        """The row's fields on the agent's state at the start of a round (the LM's KL coefficient)."""

    def collect(self, k: int) -> R:
        """Round k's records (rollouts; generated and scored responses)."""

    def forward(self, k: int, records: R) -> dict[str, float]:
        """What the update needs of the records at θ_k that collecting did not compute; the row's fields."""

    def attribute(self, k: int, records: R) -> S:
        """The records' influence at θ_k, when the method (or a measurement) needs it."""

    def update(self, k: int, records: R, selection: Selection, influence: S) -> dict[str, float]:
        """Round k's update on the selected records; the row's fields (losses, gradient steps, ...)."""

    def train_return(self, records: R) -> float:
        """The round's training return (NaN when nothing finished)."""

    def evaluate(self, k: int) -> dict[str, float]:
        """The test return of the policy after round k (the row's evaluation fields)."""

    def state_dict(self, k: int) -> dict[str, Any]:
        """Everything the run resumes from after round k (the checkpoint)."""

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Restore a checkpoint; returns its round."""

    def close(self) -> None:
        """Release what the agent holds open (env processes)."""


STAGE_TIMES = ("time_collect", "time_forward", "time_influence", "time_select", "time_update", "time_eval")


class Stopwatch:
    """Each stage's seconds, counted from the end of the stage before (a metrics.csv column each). Wall seconds;
    benchmarks/stacked_rounds.py sets `clock` to time.process_time to read each stage's CPU seconds instead."""

    clock: ClassVar[Callable[[], float]] = time.perf_counter

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.last = Stopwatch.clock()

    def lap(self, column: str) -> None:
        now = Stopwatch.clock()
        self.times[column] = now - self.last
        self.last = now

    def shares(self, n: int) -> dict[str, float]:
        """Each stage's seconds divided among the n runs it served together (the stacked engine's seeds)."""
        return {column: seconds / n for column, seconds in self.times.items()}


def metrics_row(agent: Agent, fields: dict[str, Any]) -> dict[str, Any]:
    """The agent's columns, NaN where the round did not measure them."""
    return {column: fields.get(column, NAN) for column in agent.columns}


def initial_row(agent: Agent, evaluated: dict[str, Any] | None = None) -> dict[str, Any]:
    """Round 0: the initial policy's evaluation; no other stage has run. `evaluated`: that evaluation's metrics
    and time_eval where the caller made it (the stacked engine evaluates its seeds together)."""
    if evaluated is None:
        watch = Stopwatch()
        evaluated = agent.evaluate(0)
        watch.lap("time_eval")
        evaluated |= watch.times
    nothing_yet = {"round": 0, "env_steps": 0, "n_records": 0, "n_kept": 0, "gradient_steps": 0}
    return metrics_row(agent, nothing_yet | dict.fromkeys(STAGE_TIMES, 0.0) | agent.state_fields() | evaluated)


def evaluation(agent: Agent, k: int) -> dict[str, Any]:
    """Round k's evaluation; none in the rounds eval.every skips (the row's test return stays NaN)."""
    if not is_eval_round(k, agent.cfg.eval.every, agent.cfg.env.rounds):
        return {"eval_episodes": 0}
    return agent.evaluate(k)


class RoundFailed(RuntimeError):
    """A round that cannot be trained on; the run stops before the round's row or checkpoint is written, so its
    run dir resumes from the round before. The message is one line naming the round."""


def check_finite_scores(k: int, scores: np.ndarray | None) -> None:
    """A NaN or inf score ranks nowhere: IIF would drop nothing (or arbitrary records) and train on silently."""
    if scores is None:
        return
    bad = int((~np.isfinite(scores)).sum())
    if bad:
        raise RoundFailed(
            f"round {k}: {bad} of {len(scores)} influence scores are not finite (NaN or inf), so no record can be "
            f"ranked; stopped before writing round {k}, the run dir keeps round {k - 1} (check the target, the "
            "observations and the policy's outputs)"
        )


def run_round(agent: Agent, k: int) -> dict[str, Any]:
    """Round k's stages in order, each timed; its metrics row."""
    watch = Stopwatch()
    fields = agent.state_fields()
    records = agent.collect(k)
    watch.lap("time_collect")
    fields |= agent.forward(k, records)
    watch.lap("time_forward")
    influence = agent.attribute(k, records)
    check_finite_scores(k, influence.scores)
    watch.lap("time_influence")
    selection = agent.method.select(records, influence.scores, agent.selection_rng, influence.attribute)
    watch.lap("time_select")
    fields |= agent.update(k, records, selection, influence)  # its time includes every-step influence
    watch.lap("time_update")
    fields |= evaluation(agent, k)
    watch.lap("time_eval")
    return round_row(agent, k, records, selection, influence.scores, fields | watch.times)


# records: Any, as an unparameterised Agent's are: a corrupted run's are PlantedRecords (round_detection's)
def round_row(
    agent: Agent, k: int, records: Any, selection: Selection, scores: np.ndarray | None, fields: dict[str, Any]
) -> dict[str, Any]:
    """Round k's metrics row: the stages' `fields` and times, and what the records and selection say."""
    n = len(records)
    row = metrics_row(
        agent,
        fields
        | {
            "round": k,
            "env_steps": k * n,
            "train_return": agent.train_return(records),
            "n_records": n,
            "n_kept": selection.n_kept,
            "kept_fraction": selection.n_kept / n,
            "n_negative": int((scores < 0).sum()) if scores is not None else NAN,
        },
    )
    if not plants(agent.cfg.corruption.fraction):  # a clean run; a corrupted one's records are PlantedRecords
        return row
    return row | round_detection(records, selection, scores, agent.cfg.ppo.gamma)  # beyond the columns: logger.py
