"""The round loop every environment and every method shares.

    for k in 1..K:
        buffer = collect(policy, envs, n_steps)          # records with ids, GAE advantages
        scores = attribute(policy, buffer, target)       # one float per record (if the method needs them)
        keep   = select(method, buffer, scores, rng)     # keep-mask or sampling weights
        stats  = update(policy, optimizer, buffer, keep) # PPO epochs over the kept records
        row    = evaluate(policy, eval_envs)             # test return
        log(row); checkpoint(k)                          # metrics.csv first, W&B mirror; resumable

Round 0 is the evaluation of the initial policy. What differs between envs and methods lives in
config and in the strategy objects (selection, target, action head), never in this loop. Each stage runs
once for all the runs a process trains together (`Seeds`: one run, or the seeds of a set, which differ in
their seed alone): the control agent's stack (control/engine.py) takes the seeds' collection, influence, update
and evaluation at once; the language models' agent (lm/trainer.py) takes them run by run (`OneByOne`).
run/loop.py runs the rounds. The loop owns what every agent shares: the order of the stages, their timing,
the selection, the row's common fields and the NaN of what a round did not measure (a round eval.every
skips). A round that planted records (corruption.py) adds how well its selection and scores found them to
its row, beyond the metrics.csv columns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

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
R_in = TypeVar("R_in", bound=Records, contravariant=True)  # an Agent's records, which it only reads
# What an attribute stage gives its own update back: Influence, or an agent's richer kind (the control agent's
# ControlInfluence carries every-step influence), so that update may ask for that kind.
S = TypeVar("S", bound=Influence)


class Agent(Protocol[R_in]):
    """One run's trainer (control: control/trainer.py's, on `RolloutBuffer`s; lm: lm/trainer.py's, on
    `Sequences`): its model, optimizer, envs and RNGs, and what the round and run loops ask of each run. The stages
    of a round are its `Seeds`' (below), which take every run a process trains at once."""

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

    def train_return(self, records: R_in) -> float:
        """The round's training return (NaN when nothing finished)."""

    def state_dict(self, k: int) -> dict[str, Any]:
        """Everything the run resumes from after round k (the checkpoint)."""

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Restore a checkpoint; returns its round."""

    def close(self) -> None:
        """Release what the agent holds open (env processes)."""


class Seeds(Protocol[R, S]):
    """The runs a process trains together, which differ in their seed alone (one run, or a set's seeds), and each
    stage of a round on all of them at once, a list with an entry per run in `agents`' order: the control engine's
    stack (control/engine.py), or agents that take their stages one by one (`OneByOne`: the language models)."""

    @property
    def agents(self) -> Sequence[Agent[R]]:
        """The runs, in the order of every stage's list."""

    def collect(self, k: int) -> list[R]:
        """Round k's records (rollouts; generated and scored responses)."""

    def forward(self, k: int, records: list[R]) -> list[dict[str, float]]:
        """What the update needs of the records at θ_k that collecting did not compute; the rows' fields."""

    def attribute(self, k: int, records: list[R]) -> list[S]:
        """The records' influence at θ_k, when the method (or a measurement) needs it."""

    def update(
        self, k: int, records: list[R], selections: list[Selection], influences: list[S]
    ) -> list[dict[str, float]]:
        """Round k's update on the selected records; the rows' fields (losses, gradient steps, ...)."""

    def evaluate(self, k: int) -> list[dict[str, float]]:
        """The test return of each policy after round k (the rows' evaluation fields)."""


class SteppedAgent(Agent[R], Protocol[R, S]):
    """An agent that takes each stage of a round on its own (the language models': lm/trainer.py)."""

    def collect(self, k: int) -> R: ...

    def forward(self, k: int, records: R) -> dict[str, float]: ...

    def attribute(self, k: int, records: R) -> S: ...

    def update(self, k: int, records: R, selection: Selection, influence: S) -> dict[str, float]: ...

    def evaluate(self, k: int) -> dict[str, float]: ...


class OneByOne(Generic[R, S]):
    """`Seeds` of agents that train one after the other, each stage of each agent on its own."""

    def __init__(self, agents: Sequence[SteppedAgent[R, S]]):
        self.agents = agents

    def collect(self, k: int) -> list[R]:
        return [agent.collect(k) for agent in self.agents]

    def forward(self, k: int, records: list[R]) -> list[dict[str, float]]:
        return [agent.forward(k, run_records) for agent, run_records in zip(self.agents, records)]

    def attribute(self, k: int, records: list[R]) -> list[S]:
        return [agent.attribute(k, run_records) for agent, run_records in zip(self.agents, records)]

    def update(
        self, k: int, records: list[R], selections: list[Selection], influences: list[S]
    ) -> list[dict[str, float]]:
        return [
            agent.update(k, run_records, selection, influence)
            for agent, run_records, selection, influence in zip(self.agents, records, selections, influences)
        ]

    def evaluate(self, k: int) -> list[dict[str, float]]:
        return [agent.evaluate(k) for agent in self.agents]


STAGE_TIMES = ("time_collect", "time_forward", "time_influence", "time_select", "time_update", "time_eval")


class Stopwatch:
    """Each stage's seconds, counted from the end of the stage before (a metrics.csv column each), divided among the
    runs it served together (`shares`). Wall seconds; benchmarks/stacked_rounds.py sets `clock` to
    time.process_time to read each stage's CPU seconds instead."""

    clock: ClassVar[Callable[[], float]] = time.perf_counter

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.last = Stopwatch.clock()

    def lap(self, column: str) -> None:
        now = Stopwatch.clock()
        self.times[column] = now - self.last
        self.last = now

    def shares(self, n: int) -> dict[str, float]:
        """Each stage's seconds divided among the n runs it served together (a set's seeds)."""
        return {column: seconds / n for column, seconds in self.times.items()}


def metrics_row(agent: Agent, fields: dict[str, Any]) -> dict[str, Any]:
    """The agent's columns, NaN where the round did not measure them."""
    return {column: fields.get(column, NAN) for column in agent.columns}


def initial_rows(seeds: Seeds) -> list[dict[str, Any]]:
    """Round 0's rows: the initial policies' evaluation; no other stage has run."""
    watch = Stopwatch()
    evaluations = seeds.evaluate(0)
    watch.lap("time_eval")
    nothing_yet = {"round": 0, "env_steps": 0, "n_records": 0, "n_kept": 0, "gradient_steps": 0}
    times = dict.fromkeys(STAGE_TIMES, 0.0) | watch.shares(len(seeds.agents))
    return [
        metrics_row(agent, nothing_yet | times | agent.state_fields() | evaluated)
        for agent, evaluated in zip(seeds.agents, evaluations)
    ]


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


def run_round(seeds: Seeds, k: int) -> list[dict[str, Any]]:
    """Round k's stages in order, each once for every run of `seeds` and timed; their metrics rows (a stage's
    seconds shared equally among the runs)."""
    watch = Stopwatch()
    agents = seeds.agents
    fields = [agent.state_fields() for agent in agents]
    records = seeds.collect(k)
    watch.lap("time_collect")
    for run_fields, forwarded in zip(fields, seeds.forward(k, records)):
        run_fields |= forwarded
    watch.lap("time_forward")
    influences = seeds.attribute(k, records)
    for influence in influences:
        check_finite_scores(k, influence.scores)
    watch.lap("time_influence")
    selections = [
        agent.method.select(run_records, influence.scores, agent.selection_rng, influence.attribute)
        for agent, run_records, influence in zip(agents, records, influences)
    ]
    watch.lap("time_select")
    for run_fields, stats in zip(fields, seeds.update(k, records, selections, influences)):
        run_fields |= stats  # its time includes every-step influence
    watch.lap("time_update")
    first = agents[0].cfg  # the runs share every setting but the seed
    skipped: list[dict[str, float]] = [{"eval_episodes": 0}] * len(agents)  # the test return stays NaN
    evaluations = seeds.evaluate(k) if is_eval_round(k, first.eval.every, first.env.rounds) else skipped
    for run_fields, evaluation in zip(fields, evaluations):
        run_fields |= evaluation
    watch.lap("time_eval")
    shares = watch.shares(len(agents))
    return [
        round_row(agent, k, run_records, selection, influence.scores, run_fields | shares)
        for agent, run_records, selection, influence, run_fields in zip(agents, records, selections, influences, fields)
    ]


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
