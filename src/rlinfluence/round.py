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
from typing import Any

from rlinfluence.control.evaluation import is_eval_round
from rlinfluence.corruption import round_detection
from rlinfluence.run.agents import Agent

NAN = float("nan")

STAGE_TIMES = ("time_collect", "time_forward", "time_influence", "time_select", "time_update", "time_eval")


class Stopwatch:
    """Each stage's seconds, counted from the end of the stage before (a metrics.csv column each)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, column: str) -> None:
        now = time.perf_counter()
        self.times[column] = now - self.last
        self.last = now


def metrics_row(agent: Agent, fields: dict[str, Any]) -> dict[str, Any]:
    """The agent's columns, NaN where the round did not measure them."""
    return {column: fields.get(column, NAN) for column in agent.columns}


def initial_row(agent: Agent) -> dict[str, Any]:
    """Round 0: the initial policy's evaluation; no other stage has run."""
    watch = Stopwatch()
    evaluation = agent.evaluate(0)
    watch.lap("time_eval")
    nothing_yet = {"round": 0, "env_steps": 0, "n_records": 0, "n_kept": 0, "gradient_steps": 0}
    return metrics_row(
        agent, nothing_yet | dict.fromkeys(STAGE_TIMES, 0.0) | watch.times | agent.state_fields() | evaluation
    )


def evaluation(agent: Agent, k: int) -> dict[str, Any]:
    """Round k's evaluation; none in the rounds eval.every skips (the row's test return stays NaN)."""
    if not is_eval_round(k, agent.cfg.eval.every, agent.cfg.env.rounds):
        return {"eval_episodes": 0}
    return agent.evaluate(k)


def run_round(agent: Agent, k: int) -> dict[str, Any]:
    """Round k's stages in order, each timed; its metrics row."""
    watch = Stopwatch()
    fields = agent.state_fields()
    records = agent.collect(k)
    watch.lap("time_collect")
    fields |= agent.forward(k, records)
    watch.lap("time_forward")
    influence = agent.attribute(k, records)
    watch.lap("time_influence")
    selection = agent.method.select(records, influence.scores, agent.selection_rng, influence.attribute)
    watch.lap("time_select")
    fields |= agent.update(k, records, selection, influence)  # its time includes every-step influence
    watch.lap("time_update")
    fields |= evaluation(agent, k)
    watch.lap("time_eval")
    scores, n = influence.scores, len(records)
    row = metrics_row(
        agent,
        fields
        | watch.times
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
    if not agent.cfg.corruption.fraction:
        return row
    return row | round_detection(records, selection, scores, agent.cfg.ppo.gamma)  # beyond the columns: logger.py
