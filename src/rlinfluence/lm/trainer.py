"""The language-model agent (env.agent=lm, run/agents.py): one LM-PPO (or GRPO) round per call, through
the same round loop, selection methods, run dirs, metrics.csv and checkpoints as the control agent.

    generate & score   `env.n_steps` responses to the round's train prompts (GRPO: group_size to each of
                       n_steps / group_size prompts); the reward model scores them
    forward            log π_θk, log π_ref, V_θk; the algorithm's advantages (PPO: KL-penalised token
                       rewards, GAE, whitening; GRPO: group-relative)
    influence          fresh responses to the val prompts → ∇L_f; ⟨∇ℓ_i, ∇L_f⟩ per record (lm/influence.py)
    select             the shared selection method (iif keeps the positive records at p = 100 %)
    update             the algorithm's epochs over the kept records (PPO: then the KL controller steps)
    evaluate           test toxicity on the eval prompts

What differs between the algorithms (env.lm.algorithm) lives in the strategy object of lm/algorithms.py
that the trainer delegates to; nothing here asks which one it is.

The round loop (round.py) runs these stages and times each (time_collect, time_forward, time_influence,
time_update: paper Table 6). The round's prompts, response length and sampling noise are functions of
(seed, round), so a resumed run repeats the rounds it redoes exactly; what carries over between rounds
(trainable weights, Adam, β, the selection and shuffle RNGs) is in the checkpoint.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import transformers
from omegaconf import DictConfig

from rlinfluence.choices import ConfigError, require, require_one_of
from rlinfluence.corruption import planted_records
from rlinfluence.lm import hub
from rlinfluence.lm.algorithms import ALGORITHMS
from rlinfluence.lm.evaluation import ToxicityEvaluator
from rlinfluence.lm.influence import TARGET_LOSSES, sequence_scores, target_gradient
from rlinfluence.lm.policy import DTYPES, Policy, load_tokenizer
from rlinfluence.lm.ppo import sequence_kl
from rlinfluence.lm.prompts import TINY, load_prompts
from rlinfluence.lm.reward import make_reward, make_toxicity
from rlinfluence.lm.rollout import Sequences, generate, pack
from rlinfluence.round import COLUMNS
from rlinfluence.seeding import child_stream, numpy_generator, round_seed, spawn_streams, torch_generator
from rlinfluence.selection import SELECTION_METHODS, Influence, Selection, make_selection
from rlinfluence.share import FilterShare
from rlinfluence.update import make_optimizer

# The language-model agent's metrics.csv columns beyond the round's (round.COLUMNS): test toxicity, the KL
# controller, and the forward passes' time (Table 6 splits a round into generation & scoring, forward, influence,
# update).
LM_COLUMNS = ["test_toxicity", "test_toxicity_sem", "kl_coef", "mean_kl", "time_forward"]


class LMTrainer:
    columns: ClassVar[list[str]] = COLUMNS + LM_COLUMNS  # round.Agent's: a class's, not an instance's
    TARGETS = tuple(TARGET_LOSSES)

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        require_one_of("target.name", cfg.target.name, cls.TARGETS)
        require(
            cfg.ppo.batch_size <= cfg.env.n_steps,
            f"ppo.batch_size={cfg.ppo.batch_size} must be <= the records of a round, env.n_steps={cfg.env.n_steps} "
            "responses",
        )
        # the methods that read no more of a record than its influence (SelectionMethod.any_agent)
        require_one_of("method.name", cfg.method.name, [name for name, m in SELECTION_METHODS.items() if m.any_agent])
        if cfg.method.name != "ppo":  # p=auto chooses counts on held-out returns, which the control envs have
            FilterShare.parse(
                cfg.method.p, "method.p", note=f"; p=auto is for the control envs, not env={cfg.env.name}"
            )
        if cfg.model is None:
            raise ConfigError(f"env={cfg.env.name} needs a policy model: model=<name> (conf/model/)")
        require_one_of("model.dtype", cfg.model.dtype, tuple(DTYPES))
        lm = cfg.env.lm
        require_one_of("env.lm.algorithm", lm.algorithm, ALGORITHMS)
        ALGORITHMS[lm.algorithm].check_config(cfg)
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
        if not cfg.progress:  # transformers' and the Hub's own bars (loading and writing weights) too
            transformers.utils.logging.disable_progress_bar()
        self.cfg, self.lm_cfg, self.device = cfg, cfg.env.lm, cfg.device
        self.streams = spawn_streams(cfg.seed)
        self.tokenizer = load_tokenizer(cfg.model)
        self.policy = Policy(cfg.model, torch_generator(self.streams["network"])).to(self.device)
        self.optimizer = make_optimizer(cfg.optimizer, [p for p in self.policy.parameters() if p.requires_grad])
        self.algorithm = ALGORITHMS[self.lm_cfg.algorithm](cfg, self.policy, self.optimizer)
        self.reward = make_reward(self.lm_cfg, self.device)
        self.prompts = load_prompts(
            self.lm_cfg, self.tokenizer, cfg.eval.episodes, int(self.streams["prompts"].generate_state(1)[0])
        )
        if len(self.prompts.train) < self.prompts_per_round:
            raise ConfigError(
                f"env.n_steps={cfg.env.n_steps} needs {self.prompts_per_round} train prompts; there are "
                f"{len(self.prompts.train)}"
            )
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

    # ------------------------------------------------------------------ the stages

    @property
    def prompts_per_round(self) -> int:
        return self.cfg.env.n_steps // self.algorithm.group_size

    def grouped(self, prompts: list[list[int]]) -> list[list[int]]:
        """Each prompt `group_size` times in a row: the queries of its group of responses (PPO: once)."""
        return [query for query in prompts for _ in range(self.algorithm.group_size)]

    def round_queries(self, k: int) -> list[list[int]]:
        """Round k's train queries: batch k of a pass over a per-pass permutation of the train prompts, grouped."""
        size, n_train = self.prompts_per_round, len(self.prompts.train)
        per_pass = n_train // size
        order = np.random.default_rng(child_stream(self.streams["prompts"], (k - 1) // per_pass)).permutation(n_train)
        position = (k - 1) % per_pass
        return self.grouped([self.prompts.train[i] for i in order[position * size : (position + 1) * size]])

    def val_queries(self) -> list[list[int]]:
        """The influence target's queries: `val_size` of them, on the first val prompts, grouped."""
        return self.grouped(self.prompts.val[: self.lm_cfg.val_size // self.algorithm.group_size])

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
        """log π_θk, log π_ref, V_θk and the KL to π_ref of every record, then the algorithm's advantages;
        returns the mean sequence KL."""
        shape = batch.mask.shape
        batch.logprobs, batch.ref_logprobs, batch.values = (torch.zeros(shape, device=self.device) for _ in range(3))
        for start in range(0, len(batch), self.lm_cfg.generation_batch):
            ids = torch.arange(start, min(start + self.lm_cfg.generation_batch, len(batch)), device=self.device)
            part = batch.rows(ids)
            width = part.mask.shape[1]
            batch.logprobs[ids, :width], batch.values[ids, :width] = self.policy(part.input_ids, part.attention_mask)
            with self.policy.reference():
                batch.ref_logprobs[ids, :width], _ = self.policy(part.input_ids, part.attention_mask)
        self.algorithm.advantages(batch)
        batch.kl = sequence_kl(batch.logprobs, batch.ref_logprobs, batch.mask)
        return batch.mean_kl()

    def influence(self, batch: Sequences, k: int, new_tokens: int) -> np.ndarray:
        """Each record's influence on the target (target.name) at θ_k, on fresh val responses."""
        val = self.rollout(self.val_queries(), round_seed(self.streams["val_generation"], k), new_tokens)
        self.annotate(val)
        chunk = self.lm_cfg.generation_batch
        direction = target_gradient(self.policy, val, self.cfg.target.name, chunk)
        return sequence_scores(self.policy, batch, direction, self.algorithm.record_loss, chunk).cpu().numpy()

    # ------------------------------------------------------------------ the round loop's interface (round.Agent)

    def state_fields(self) -> dict[str, float]:
        return {"kl_coef": self.algorithm.kl_coef}

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
        return self.algorithm.update(batch, selection, self.shuffle_rng)

    def train_return(self, batch: Sequences) -> float:
        """The reward model's mean score of the round's responses: the true score of a planted one, as the
        control agent's train return is what the episodes earned, not what the update saw."""
        if batch.planted is None:
            return float(batch.scores.mean())
        return float(torch.where(batch.planted, -batch.scores, batch.scores).mean())

    def evaluate(self, k: int) -> dict[str, float]:
        return self.evaluator.evaluate(self.policy, k)

    def state_dict(self, k: int) -> dict[str, Any]:
        return {
            "round": k,
            "policy": self.policy.trainable_state(),
            "optimizer": self.optimizer.state_dict(),
            "selection_rng": self.selection_rng.bit_generator.state,
            "shuffle_rng": self.shuffle_rng.bit_generator.state,
        } | self.algorithm.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> int:
        self.policy.load_trainable_state(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.algorithm.load_state_dict(state)
        self.selection_rng.bit_generator.state = state["selection_rng"]
        self.shuffle_rng.bit_generator.state = state["shuffle_rng"]
        return int(state["round"])

    def close(self) -> None:
        """Nothing to release: no env processes."""
