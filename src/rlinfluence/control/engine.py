"""The control agent's engine: the runs of a process (one seed, or the seeds of a set, which differ in their seed
alone) trained together, each stage of a round once for all of them (`Stack`, round.py's `Seeds`). One run is a
stack of one: there is no other control engine.

Each seed is a `Trainer` (control/trainer.py, built from the seed's config): its envs, evaluation envs, RNG streams
and checkpoint are its own, so its collection, selection and evaluation draw what that seed alone draws (arms stay
paired by common random numbers). The seeds' actor-critics are stacked for the round (control/stacked_networks.py): one
forward per collection step samples every seed's actions, and the round's records, influence and PPO update are
computed once for all seeds (control/stacked_influence.py, control/stacked_update.py). Evaluation runs each seed's own
network on its own episodes, all seeds' episodes stepped together on one batched simulator where the env has one
(control/stacked_evaluation.py). Every selection method runs, on its seed's records and RNG: the scores it ranks by are
the stack's; the further targets some selections score on (method.p=auto's held-out halves, iif_guard's entropy)
differ per seed and are asked for one at a time, so each seed's own network scores them at θ_k with
Trainer.attribution, as are the records of a round whose influence settings the stack's pass does not compute
(`STACK_SCORED`). A seed gets the same bits whichever seeds run beside it (tests/control/test_engine.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from omegaconf import OmegaConf

from rlinfluence.config.schema import PPOConfig
from rlinfluence.control.collect import Rollout, rollout_records
from rlinfluence.control.stacked_collect import collection_simulator
from rlinfluence.control.stacked_evaluation import stacked_evaluation
from rlinfluence.control.stacked_influence import stacked_influence_scores
from rlinfluence.control.stacked_networks import SeedCritic, StackedActorCritic
from rlinfluence.control.stacked_update import update_seeds
from rlinfluence.control.trainer import ControlInfluence, Trainer, step_agreement
from rlinfluence.influence import StepInfluence
from rlinfluence.records import RolloutBuffer
from rlinfluence.selection import Selection
from rlinfluence.update import StepHook

# The influence settings the stack's one pass computes (control/stacked_influence.py); under any other, each seed's
# records are scored by its own Trainer at θ_k (Trainer.attribution), as a selection's further targets are.
STACK_SCORED = (
    ("influence.backend", "jvp"),
    ("influence.normalization", "buffer"),
    ("influence.preconditioner", "none"),
)


def stacked_method_scores(
    model: StackedActorCritic, trainers: list[Trainer], records: list[RolloutBuffer], ppo: PPOConfig
) -> list[np.ndarray | None]:
    """Each seed's round-start scores on the target its method ranks by (target.name's, or
    the method's own, method=consensus's round mean loss), all seeds in one pass where the influence settings are
    the stack's; None where neither the method needs them (ppo, advantage, td_error) nor a corrupted round ranks its
    planted records by them nor every-step influence is compared with them."""
    first = trainers[0]
    if not first.wants_scores(records[0]):  # the seeds share every setting but the seed
        return [None] * len(trainers)
    target = first.method.scored_target(first.target)
    if all(OmegaConf.select(first.cfg, key) == value for key, value in STACK_SCORED):
        scores = stacked_influence_scores(model, records, target, ppo, first.cfg.influence.chunk_size)
        return list(scores.cpu().numpy())
    return [trainer.attribution(buffer)(target) for trainer, buffer in zip(trainers, records)]


def _at_its_theta(model: StackedActorCritic, i: int, trainer: Trainer, steps: StepInfluence) -> StepHook:
    """Seed i's every-step hook: its network takes the stack's θ_j of its slice, then its influence adds the step."""

    def on_step(ids: torch.Tensor, advantages: torch.Tensor) -> None:
        trainer.model.load_state_dict(model.seed_state_dict(i))
        steps.add_step(ids, advantages)

    return on_step


class Stack:
    """round.Seeds of the control agent: the seeds' actor-critics stacked for the round (control/stacked_networks.py),
    and each stage of the round once for all of them. One run is a stack of one."""

    def __init__(self, trainers: Sequence[Trainer]):
        self.agents = list(trainers)
        self.model = StackedActorCritic([trainer.model for trainer in trainers])

    @torch.no_grad()
    def collect(self, k: int) -> list[RolloutBuffer]:
        """Each seed's round-k rollout (Trainer.start_rollout's), every step's actions of all seeds from one forward,
        and their envs stepped at once on one simulator where there is one (control/stacked_collect.py); their
        records then computed with each seed's slice of the stack, GAE once for all (control/collect.py's
        rollout_records)."""
        model, trainers = self.model, self.agents
        simulator = collection_simulator(trainers)
        noise = torch.stack([trainer.start_rollout() for trainer in trainers], dim=1)
        rollout = Rollout([trainer.envs for trainer in trainers], trainers[0].cfg.env.n_steps, noise)
        noise = noise.to(model.device)
        for t in range(rollout.n_steps):
            obs = torch.as_tensor(rollout.observe(t), device=model.device)
            rollout.act(t, model.sample_actions(obs, noise[t]).cpu().numpy(), simulator)
        planted = [trainer.planted(k) for trainer in trainers]
        scored = [
            trainer.scored(rollout, i, SeedCritic(model, i), seed_planted)
            for i, (trainer, seed_planted) in enumerate(zip(trainers, planted))
        ]
        ppo = trainers[0].cfg.ppo  # the seeds share every setting but the seed
        records = rollout_records(rollout, scored, ppo.gamma, ppo.gae_lambda)
        return [
            trainer.corrupted(buffer, seed_planted) for trainer, buffer, seed_planted in zip(trainers, records, planted)
        ]

    def forward(self, k: int, records: list[RolloutBuffer]) -> list[dict[str, float]]:
        """Nothing: the rollout computes the log-probs, values and advantages at θ_k."""
        return [{} for _ in records]

    def attribute(self, k: int, records: list[RolloutBuffer]) -> list[ControlInfluence]:
        """Each seed's scores on the target its method ranks by (`stacked_method_scores`), its attribution at θ_k
        on any further target its selection asks for, and its every-step influence (Trainer.steps)."""
        scores = stacked_method_scores(self.model, self.agents, records, self.agents[0].ppo_settings(k))
        return [
            ControlInfluence(seed_scores, trainer.attribution(buffer), trainer.steps(k, buffer))
            for trainer, buffer, seed_scores in zip(self.agents, records, scores)
        ]

    def update(
        self, k: int, records: list[RolloutBuffer], selections: list[Selection], influences: list[ControlInfluence]
    ) -> list[dict[str, float]]:
        """Round k's PPO update of every seed on its selected records, through the stack; each seed's statistics and,
        with every-step influence, how well its round-start scores rank it."""
        first, model = self.agents[0], self.model
        hooks = [
            None if influence.steps is None else _at_its_theta(model, i, trainer, influence.steps)
            for i, (trainer, influence) in enumerate(zip(self.agents, influences))
        ]
        stats = update_seeds(
            model,
            [(trainer.model, trainer.optimizer) for trainer in self.agents],
            first.cfg.optimizer.name,
            first.learning_rate(k),
            records,
            selections,
            first.ppo_settings(k),
            [trainer.shuffle_rng for trainer in self.agents],
            hooks,
        )
        return [
            seed_stats | step_agreement(influence, selection)
            for seed_stats, influence, selection in zip(stats, influences, selections)
        ]

    def evaluate(self, k: int) -> list[dict[str, float]]:
        return stacked_evaluation(self.agents, k)


class Seed(Trainer):
    """One seed of the control agent on its own, with the stages the analyses rerun one at a time (collect, update):
    each through a stack of one, as its run trained it, so that the replayed update of the run's own selection gives
    the run's own weights."""

    def collect(self, k: int) -> RolloutBuffer:
        [records] = Stack([self]).collect(k)
        return records

    def update(
        self, k: int, buffer: RolloutBuffer, selection: Selection, influence: ControlInfluence | None = None
    ) -> dict[str, float]:
        [stats] = Stack([self]).update(k, [buffer], [selection], [influence or ControlInfluence()])
        return stats
