"""`task=timeline` (paper §4.2, Fig. 4, 10): how a behaviour forms over the rounds of a run.

The behaviour is f_action = log π(a*|s*). Each round k of a standard-PPO run is replayed from its
snapshot: the buffer θ_k collected is scored with f_action at θ_k (influence.py), and the round's rows
are its `analysis.timeline.top` records of highest influence (observation, action, Â, distance to s* in
the embedding below), each carrying the round's π_θk(a*|s*) and graph roughness R.

Target: s* = `analysis.timeline.state` (an env's preset may set it: conf/env/acrobot.yaml); when null,
the env's start state (its first observation after a reset with the run's seed). a* = `analysis.timeline.action`,
or by default the final policy's most probable action in s*: the behaviour the run ends up with,
followed back to where it formed.

Roughness (paper App. B.2), over the records with I > 0:
    R = Σ_{i<j} w_ij (Ĩ_i − Ĩ_j)² / Σ_{i<j} w_ij,   Ĩ = I / max I,   w_ij = exp(−‖e_i − e_j‖² / σ²)
on the undirected u-nearest-neighbour graph (u = `analysis.timeline.neighbours`) of the records'
embeddings e, the final network's penultimate policy layer. σ is the median length of the graph's
edges: the median-distance heuristic taken over the distances the weights are taken of. Low R: records
the final network sees as alike have alike influence (the behaviour rests on a region of state
space); high R: its support is scattered.

Phases (`phases`): the rounds cut into `analysis.timeline.phases` stretches of at least
MIN_PHASE_ROUNDS rounds that minimise the squared deviation of the standardised (π(a*|s*), R) from
their stretch's mean: the least-squares change points of both curves at once, found exactly by
dynamic programming, with no threshold to tune. The number of phases is given (the paper shows 3).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import torch
from omegaconf import DictConfig
from scipy.spatial import cKDTree

from rlinfluence.analyses.standard_run import (
    analyse_rounds,
    before_round,
    check_at_least_one,
    check_outputs,
    check_rounds,
    ensure_standard_run,
    every_round_if_empty,
    standard_run_config,
)
from rlinfluence.choices import ConfigError
from rlinfluence.control.engine import Seed
from rlinfluence.control.fit import check_action_target
from rlinfluence.control.networks import ActorCritic
from rlinfluence.envs.make import make_env, space_shape
from rlinfluence.run.checkpoint import load_snapshot
from rlinfluence.run.tasks import register
from rlinfluence.targets import ActionTarget

MIN_PHASE_ROUNDS = 3  # a phase is a stretch of training, not one noisy round


# ---------------------------------------------------------------- graph roughness


def knn_edges(points: np.ndarray, neighbours: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The undirected `neighbours`-nearest-neighbour graph of `points`: (i, j, ‖p_i − p_j‖) once per
    edge, i < j. i and j are joined when either is among the other's nearest."""
    n = len(points)
    u = min(neighbours, n - 1)
    distance, index = cKDTree(points).query(points, k=u + 1)
    # Each point's own entry is dropped (among exact duplicates it need not come first).
    others = index != np.arange(n)[:, None]
    keep = others & (np.cumsum(others, axis=1) <= u)
    i, j = np.repeat(np.arange(n), u + 1)[keep.ravel()], index[keep]
    pairs, first = np.unique(np.minimum(i, j) * n + np.maximum(i, j), return_index=True)
    return pairs // n, pairs % n, distance[keep][first]


def graph_roughness(embeddings: np.ndarray, influence: np.ndarray, neighbours: int) -> float:
    """R over the positive-influence records (module docstring); NaN with fewer than two of them."""
    positive = influence > 0
    if positive.sum() < 2:
        return float("nan")
    values = influence[positive] / influence[positive].max()
    i, j, distance = knn_edges(embeddings[positive], neighbours)
    # σ from the edges of nonzero length: identical embeddings (one state seen twice) weigh 1 for any σ.
    lengths = distance[distance > 0]
    sigma = np.median(lengths) if lengths.size else 1.0
    weights = np.exp(-((distance / sigma) ** 2))
    return float((weights * (values[i] - values[j]) ** 2).sum() / weights.sum())


# ---------------------------------------------------------------- phases


def phase_starts(series: np.ndarray, phases: int, min_length: int = MIN_PHASE_ROUNDS) -> list[int]:
    """Where each of `phases` contiguous segments of the rows of `series` ([n, d]) starts (the first at
    0), minimising the summed squared deviation of the standardised columns from their segment means.
    Fewer segments when n cannot hold `phases` of `min_length`."""
    x = np.asarray(series, dtype=float)
    spread = x.std(0)
    x = (x - x.mean(0)) / np.where(spread > 0, spread, 1.0)
    n = len(x)
    phases = max(1, min(phases, n // min_length))
    total = np.vstack([np.zeros(x.shape[1]), np.cumsum(x, 0)])
    squares = np.concatenate([[0.0], np.cumsum((x**2).sum(1))])

    def cost(a: int, b: int) -> float:  # rows a..b−1 about their mean
        return squares[b] - squares[a] - ((total[b] - total[a]) ** 2).sum() / (b - a)

    # best[p][b]: the least cost of rows 0..b−1 in p + 1 segments; start[p][b]: where its last begins.
    best = np.full((phases, n + 1), np.inf)
    start = np.zeros((phases, n + 1), dtype=int)
    for b in range(min_length, n + 1):
        best[0, b] = cost(0, b)
    for p in range(1, phases):
        for b in range((p + 1) * min_length, n + 1):
            options = [(best[p - 1, a] + cost(a, b), a) for a in range(p * min_length, b - min_length + 1)]
            best[p, b], start[p, b] = min(options)
    starts: list[int] = []
    b = n
    for p in range(phases - 1, 0, -1):
        b = start[p, b]
        starts.insert(0, b)
    return [0, *starts]


def round_series(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per round of one run's timeline rows: π(a*|s*), R and the counts."""
    return rows.drop_duplicates("round")[["round", "pi_target", "roughness", "n_positive", "n_records"]]


def phases(rows: pd.DataFrame, n_phases: int) -> pd.Series:
    """The phase (1, 2, ...) of each round of one run's timeline rows, indexed by round; rounds without
    a roughness (fewer than two positive records) take the phase of the rounds around them."""
    series = round_series(rows).set_index("round").sort_index()
    known = series.dropna(subset=["pi_target", "roughness"])
    starts = [known.index[s] for s in phase_starts(known[["pi_target", "roughness"]].to_numpy(), n_phases)]
    return pd.Series(np.searchsorted(starts, series.index, side="right").clip(1), index=series.index, name="phase")


# ---------------------------------------------------------------- the task


def most_probable_action(model: ActorCritic, state: torch.Tensor) -> int:
    with torch.no_grad():
        return int(model.policy_output(state).argmax(-1).item())


def target_state_tensor(target: ActionTarget) -> torch.Tensor:
    assert isinstance(target.state, torch.Tensor)  # a control env's observation: a tensor, never a dict
    return target.state


def target_probability(model: ActorCritic, target: ActionTarget) -> float:
    with torch.no_grad():
        device = model.device
        log_prob = model.action_head.log_prob(
            model.policy_output(target_state_tensor(target).to(device)), target.action.to(device)
        )
    return float(log_prob.exp().item())


def embed(model: ActorCritic, obs: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return model.policy_latent(obs.to(model.device)).cpu().numpy().astype(np.float64)


def timeline_round(trainer: Seed, run_dir: Path, k: int, target: ActionTarget, final: ActorCritic) -> pd.DataFrame:
    cfg, settings = trainer.cfg, trainer.cfg.analysis.timeline
    before_round(trainer, run_dir, k)
    buffer = trainer.collect(k)
    scores = trainer.attribution(buffer)(target).astype(np.float64)
    embeddings = embed(final, buffer.obs)
    top = np.argsort(-scores, kind="stable")[: settings.top]
    observations = buffer.obs[top].reshape(len(top), -1).numpy()
    rows = pd.DataFrame(
        {
            "env": cfg.env.name,
            "seed": cfg.seed,
            "round": k,
            "pi_target": target_probability(trainer.model, target),
            "roughness": graph_roughness(embeddings, scores, settings.neighbours),
            "n_positive": int((scores > 0).sum()),
            "n_records": len(buffer),
            "target_state": json.dumps(target_state_tensor(target).ravel().tolist()),
            "target_action": int(target.action.item()),
            "rank": np.arange(1, len(top) + 1),
            "record": top,
            "influence": scores[top],
            "action": buffer.actions[top].numpy().astype(np.int64),
            "advantage_gae": buffer.advantages[top].numpy(),
            "embedding_distance": np.linalg.norm(embeddings[top] - embed(final, target_state_tensor(target)), axis=1),
        }
    )
    return pd.concat(
        [rows, pd.DataFrame(observations, columns=[f"obs_{d}" for d in range(observations.shape[1])])], axis=1
    )


def final_policy(cfg: DictConfig, spaces: tuple[gym.Space, gym.Space]) -> ActorCritic:
    """The policy network after the standard run's last round (the run is trained first if needed)."""
    run_dir = ensure_standard_run(standard_run_config(cfg))
    model = ActorCritic(*spaces, cfg.env.network, torch.Generator())
    model.load_state_dict(load_snapshot(run_dir, cfg.env.rounds)["model"])
    return model


def timeline_rounds(cfg: DictConfig) -> list[int]:
    return every_round_if_empty(cfg, cfg.analysis.timeline.rounds)


def target_state(cfg: DictConfig) -> tuple[list[float], tuple[gym.Space, gym.Space]]:
    """s* (flat) and the env's spaces."""
    env = make_env(cfg.env)
    try:
        spaces = env.observation_space, env.action_space
        start, _ = env.reset(seed=cfg.seed)
    finally:
        env.close()
    state = cfg.analysis.timeline.state
    state = state if state is not None else np.ravel(start)
    return [float(v) for v in state], spaces


def check_timeline(cfg: DictConfig) -> None:
    check_outputs(cfg)
    settings = cfg.analysis.timeline
    check_rounds(cfg, "analysis.timeline.rounds", timeline_rounds(cfg))
    check_at_least_one(
        settings,
        "analysis.timeline",
        {
            "neighbours": "u of the u-nearest-neighbour graph",
            "top": "records written per round",
            "phases": "segments of the timeline",
        },
    )
    state, spaces = target_state(cfg)
    if not isinstance(spaces[1], gym.spaces.Discrete):
        raise ConfigError(f"task=timeline follows one discrete action a*; env={cfg.env.name} has continuous actions")
    check_action_target(cfg.env, state, [0 if settings.action is None else settings.action], "analysis.timeline")


@register("timeline", check=check_timeline)
def timeline(cfg: DictConfig) -> pd.DataFrame:
    settings = cfg.analysis.timeline
    rounds = timeline_rounds(cfg)
    flat_state, spaces = target_state(cfg)
    state = np.reshape(flat_state, space_shape(spaces[0]))

    final = final_policy(cfg, spaces)
    action = settings.action
    if action is None:
        action = most_probable_action(final, torch.tensor(state, dtype=torch.float32).unsqueeze(0))
    target = ActionTarget.of(state, [action])
    return analyse_rounds(
        cfg,
        "timeline",
        rounds,
        partial(timeline_round, target=target, final=final),
        report=partial(phase_lines, n_phases=settings.phases),
    )


def phase_lines(rows: pd.DataFrame, n_phases: int) -> list[str]:
    """One line per phase of the timeline: its rounds, mean π(a*|s*) and roughness."""
    series = round_series(rows)
    return [
        f"phase {phase}: rounds {group['round'].min()}-{group['round'].max()}, "
        f"π(a*|s*) {group['pi_target'].mean():.3f}, roughness {group['roughness'].mean():.4f}"
        for phase, group in series.groupby(series["round"].map(phases(rows, n_phases)))
    ]
