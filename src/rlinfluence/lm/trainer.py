"""The language-model agent (env.agent=lm, run/agents.py): one LM-PPO round per call, through the same
round loop, selection methods, run dirs, metrics.csv and checkpoints as the control agent.

    generate & score   responses to the round's `env.n_steps` train prompts; the reward model scores them
    forward            log π_θk, log π_ref, V_θk; KL-penalised token rewards, GAE, whitening
    influence          fresh responses to the val prompts → ∇L_f; ⟨∇ℓ_i, ∇L_f⟩ per record (lm/influence.py)
    select             the shared selection method (iif keeps the positive records at p = 100 %)
    update             LM-PPO epochs over the kept records; then the KL controller steps
    evaluate           test toxicity on the eval prompts

The round loop (round.py) runs these stages and times each (time_collect, time_forward, time_influence,
time_update: paper Table 6). The round's prompts, response length and sampling noise are functions of
(seed, round), so a resumed run repeats the rounds it redoes exactly; what carries over between rounds
(trainable weights, Adam, β, the selection and shuffle RNGs) is in the checkpoint.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from rlinfluence.config.schema import ConfigError
from rlinfluence.config.validation import require_one_of
from rlinfluence.corruption import planted_records
from rlinfluence.lm import hub
from rlinfluence.lm.evaluation import ToxicityEvaluator
from rlinfluence.lm.influence import TARGET_LOSSES, record_loss_fn, sequence_scores, target_gradient
from rlinfluence.lm.policy import DTYPES, Policy, load_tokenizer
from rlinfluence.lm.ppo import (
    AdaptiveKLController,
    masked_whiten,
    penalized_rewards,
    ppo_update,
    sequence_kl,
    token_gae,
)
from rlinfluence.lm.prompts import TINY, load_prompts
from rlinfluence.lm.reward import make_reward, make_toxicity
from rlinfluence.lm.rollout import Sequences, generate, pack
from rlinfluence.run.logger import COLUMNS, LM_COLUMNS
from rlinfluence.seeding import child_stream, numpy_generator, round_seed, spawn_streams, torch_generator
from rlinfluence.selection import AUTO, Influence, Selection, make_selection
from rlinfluence.update import make_optimizer


class LMTrainer:
    columns = COLUMNS + LM_COLUMNS
    TARGETS = tuple(TARGET_LOSSES)
    METHODS = ("ppo", "iif", "random")  # the methods that need no more of a record than its influence

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        require_one_of("target.name", cfg.target.name, cls.TARGETS)
        require_one_of("method.name", cfg.method.name, cls.METHODS)
        if cfg.method.p == AUTO:
            raise ConfigError(f"method.p=auto is for the control envs; env={cfg.env.name} needs a number in (0, 100]")
        if cfg.model is None:
            raise ConfigError(f"env={cfg.env.name} needs a policy model: model=<name> (conf/model/)")
        require_one_of("model.dtype", cfg.model.dtype, tuple(DTYPES))
        lm = cfg.env.lm
        for key in ("query_tokens", "response_tokens"):
            bounds = list(lm[key])
            if len(bounds) != 2 or not 0 < bounds[0] <= bounds[1]:
                raise ConfigError(f"env.lm.{key}={list(lm[key])} must be [min, max] with 0 < min <= max")
        for key in ("val_size", "generation_batch", "eval_new_tokens"):
            if lm[key] <= 0:
                raise ConfigError(f"env.lm.{key}={lm[key]} must be > 0")
        # The LM influence is the plain round-start inner product (lm/influence.py); the control path's variants
        # of it do not apply.
        require_one_of("influence.preconditioner", cfg.influence.preconditioner, ("none",))
        require_one_of("influence.checkpoints", cfg.influence.checkpoints, ("round_start",))
        if cfg.model.path != TINY:
            hub.require("model.path", cfg.model.path, hub.MODEL)
        for key, kind in (
            ("reward_model", hub.MODEL),
            ("eval_classifier", hub.MODEL),
            ("prompts", hub.DATASET),
            ("eval_prompts", hub.DATASET),
        ):
            if lm[key] != TINY:
                hub.require(f"env.lm.{key}", lm[key], kind)

    def __init__(self, cfg: DictConfig):
        self.cfg, self.lm_cfg, self.device = cfg, cfg.env.lm, cfg.device
        self.streams = spawn_streams(cfg.seed)
        self.tokenizer = load_tokenizer(cfg.model)
        self.policy = Policy(cfg.model, torch_generator(self.streams["network"])).to(self.device)
        self.optimizer = make_optimizer(cfg.optimizer, [p for p in self.policy.parameters() if p.requires_grad])
        self.kl = AdaptiveKLController(self.lm_cfg.kl.init, self.lm_cfg.kl.target, self.lm_cfg.kl.horizon)
        self.reward = make_reward(self.lm_cfg, self.device)
        self.prompts = load_prompts(
            self.lm_cfg, self.tokenizer, cfg.eval.episodes, int(self.streams["prompts"].generate_state(1)[0])
        )
        if len(self.prompts.train) < cfg.env.n_steps:
            raise ConfigError(f"env.n_steps={cfg.env.n_steps} exceeds the {len(self.prompts.train)} train prompts")
        self.evaluator = ToxicityEvaluator(
            self.prompts.eval,
            self.tokenizer,
            self.reward,
            make_toxicity(self.lm_cfg, self.device),
            self.lm_cfg,
            self.streams["eval"],
            self.device,
        )
        self.method = make_selection(cfg)
        self.selection_rng = numpy_generator(self.streams["selection"])
        self.shuffle_rng = numpy_generator(self.streams["shuffle"])
        self.record_loss = record_loss_fn(
            cfg.ppo.clip_range, self.lm_cfg.value_clip, cfg.ppo.vf_coef, self.lm_cfg.influence_value_loss
        )

    # ------------------------------------------------------------------ the stages

    def round_queries(self, k: int) -> list[list[int]]:
        """Round k's train prompts: batch k of a pass over a per-pass permutation of the train prompts."""
        size, n_train = self.cfg.env.n_steps, len(self.prompts.train)
        per_pass = n_train // size
        order = np.random.default_rng(child_stream(self.streams["prompts"], (k - 1) // per_pass)).permutation(n_train)
        position = (k - 1) % per_pass
        return [self.prompts.train[i] for i in order[position * size : (position + 1) * size]]

    def rollout(self, queries: list[list[int]], seed: int, new_tokens: int) -> Sequences:
        """Sampled responses to `queries`, scored by the reward model."""
        responses = generate(
            self.policy,
            queries,
            self.tokenizer,
            new_tokens,
            self.lm_cfg.min_new_tokens,
            0,
            seed,
            self.lm_cfg.generation_batch,
            self.device,
        )
        scores = self.reward(self.tokenizer.batch_decode(responses, skip_special_tokens=True))
        return pack(queries, responses, scores, self.tokenizer.pad_token_id, self.device)

    def round_sampling(self, k: int) -> tuple[int, int]:
        """Round k's sampling seed and response length (one length per round, as TRL's)."""
        seed = round_seed(self.streams["actions"], k)
        low, high = self.lm_cfg.response_tokens
        return seed, int(np.random.default_rng(seed).integers(low, high + 1))

    @torch.no_grad()
    def annotate(self, batch: Sequences) -> float:
        """log π_θk, log π_ref, V_θk and the KL to π_ref of every record, then the KL-penalised rewards, GAE
        and whitened advantages; returns the mean sequence KL."""
        shape = batch.mask.shape
        batch.logprobs, batch.ref_logprobs, batch.values = (torch.zeros(shape, device=self.device) for _ in range(3))
        for start in range(0, len(batch), self.lm_cfg.generation_batch):
            ids = torch.arange(start, min(start + self.lm_cfg.generation_batch, len(batch)), device=self.device)
            part = batch.rows(ids)
            width = part.mask.shape[1]
            batch.logprobs[ids, :width], batch.values[ids, :width] = self.policy(part.input_ids, part.attention_mask)
            with self.policy.reference():
                batch.ref_logprobs[ids, :width], _ = self.policy(part.input_ids, part.attention_mask)
        rewards = penalized_rewards(batch.scores, batch.logprobs, batch.ref_logprobs, batch.mask, self.kl.value)
        advantages, batch.returns = token_gae(
            rewards, batch.values, batch.mask, self.cfg.ppo.gamma, self.cfg.ppo.gae_lambda
        )
        batch.advantages = masked_whiten(advantages, batch.mask) if self.cfg.ppo.normalize_advantage else advantages
        batch.kl = sequence_kl(batch.logprobs, batch.ref_logprobs, batch.mask)
        return batch.mean_kl()

    def influence(self, batch: Sequences, k: int, new_tokens: int) -> np.ndarray:
        """Each record's influence on the target (target.name) at θ_k, on fresh val responses."""
        val = self.rollout(self.prompts.val, round_seed(self.streams["val_generation"], k), new_tokens)
        self.annotate(val)
        chunk = self.lm_cfg.generation_batch
        direction = target_gradient(self.policy, val, self.cfg.target.name, chunk)
        return sequence_scores(self.policy, batch, direction, self.record_loss, chunk).cpu().numpy()

    # ------------------------------------------------------------------ the round loop's interface (agents.Agent)

    def state_fields(self) -> dict[str, float]:
        return {"kl_coef": self.kl.value}

    def collect(self, k: int) -> Sequences:
        seed, new_tokens = self.round_sampling(k)
        batch = self.rollout(self.round_queries(k), seed, new_tokens)
        planted = planted_records(self.cfg.seed, k, len(batch), self.cfg.corruption.fraction)
        if planted is not None:  # a noisy reward model: the planted responses' scores change sign
            batch.planted = planted.to(self.device)
            batch.scores[batch.planted] *= -1
        return batch

    def forward(self, k: int, batch: Sequences) -> dict[str, float]:
        return {"mean_kl": self.annotate(batch)}

    def attribute(self, k: int, batch: Sequences) -> Influence:
        if not self.method.needs_scores:
            return Influence()
        return Influence(self.influence(batch, k, self.round_sampling(k)[1]))

    def update(self, k: int, batch: Sequences, selection: Selection, influence: Influence) -> dict[str, float]:
        """LM-PPO epochs over the kept records; then the KL controller steps on the round's KL."""
        stats = ppo_update(self.policy, self.optimizer, batch, selection, self.cfg.ppo, self.lm_cfg, self.shuffle_rng)
        self.kl.update(batch.mean_kl(), len(batch))
        return stats

    def train_return(self, batch: Sequences) -> float:
        """The reward model's mean score of the round's responses."""
        return float(batch.scores.mean())

    def evaluate(self, k: int) -> dict[str, float]:
        return self.evaluator.evaluate(self.policy, k)

    def state_dict(self, k: int) -> dict[str, Any]:
        return {
            "round": k,
            "policy": self.policy.trainable_state(),
            "optimizer": self.optimizer.state_dict(),
            "kl_coef": self.kl.value,
            "selection_rng": self.selection_rng.bit_generator.state,
            "shuffle_rng": self.shuffle_rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> int:
        self.policy.load_trainable_state(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.kl.value = state["kl_coef"]
        self.selection_rng.bit_generator.state = state["selection_rng"]
        self.shuffle_rng.bit_generator.state = state["shuffle_rng"]
        return int(state["round"])

    def close(self) -> None:
        """Nothing to release: no env processes."""
