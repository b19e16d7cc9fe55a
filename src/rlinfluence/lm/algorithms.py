"""The LM path's algorithms (env.lm.algorithm): what differs between LM-PPO and GRPO, behind the one
interface the LM trainer delegates to. Everything else in a round (prompts, generation, reward, the
forward pass at θ_k, the influence's target and hooks, selection, evaluation) is shared.

    group_size         responses sampled per prompt in a round (PPO: 1)
    advantages         a round's advantages from its scores and log π_θk, log π_ref, V_θk
    record_loss        ℓ_i of every record, at any θ (the update's; the influence differentiates it at θ_k)
    update             the epochs over the kept records (the strategy holds the run's policy and optimizer)
    kl_coef            the KL coefficient the row logs (PPO: the adaptive controller's β; GRPO: its fixed β)
    check_config       one-line refusals of settings the algorithm cannot run with or would ignore
    state_dict         what a checkpoint keeps of it (PPO: the controller's β), and load_state_dict
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from rlinfluence.choices import ConfigError, require_one_of
from rlinfluence.config.schema import GRPOConfig
from rlinfluence.lm import grpo
from rlinfluence.lm.influence import record_loss_fn
from rlinfluence.lm.policy import Policy
from rlinfluence.lm.ppo import AdaptiveKLController, masked_whiten, penalized_rewards, ppo_update, token_gae
from rlinfluence.lm.rollout import Sequences
from rlinfluence.selection import Selection


class LMAlgorithm(Protocol):
    group_size: int
    record_loss: Callable[[Policy, Sequences], torch.Tensor]

    def __init__(self, cfg: DictConfig, policy: Policy, optimizer: torch.optim.Optimizer) -> None: ...

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        """Raise ConfigError (one line naming the key) on settings the algorithm cannot run with."""

    @property
    def kl_coef(self) -> float: ...

    def advantages(self, batch: Sequences) -> None:
        """Fill batch.advantages (and what else the update needs) of a batch annotated at θ_k."""

    def update(self, batch: Sequences, selection: Selection, rng: np.random.Generator) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class LMPPO:
    """TRL 0.5's PPO (lm/ppo.py): KL-penalised token rewards, GAE, whitening; β follows the KL controller."""

    group_size = 1

    def __init__(self, cfg: DictConfig, policy: Policy, optimizer: torch.optim.Optimizer):
        self.cfg, self.policy, self.optimizer, lm = cfg, policy, optimizer, cfg.env.lm
        self.kl = AdaptiveKLController(lm.kl.init, lm.kl.target, lm.kl.horizon)
        self.record_loss = record_loss_fn(cfg.ppo.clip_range, lm.value_clip, cfg.ppo.vf_coef, lm.influence_value_loss)

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        """GRPO's settings, which PPO would ignore, at their defaults (the LM settings PPO reads are checked
        by the trainer): a run's identity names no setting that does nothing."""
        defaults = OmegaConf.structured(GRPOConfig)
        for key, value in cfg.env.lm.grpo.items():
            if value != defaults[key]:
                raise ConfigError(f"env.lm.grpo.{key}={value} needs env.lm.algorithm=grpo (LM-PPO ignores it)")

    @property
    def kl_coef(self) -> float:
        return self.kl.value

    def advantages(self, batch: Sequences) -> None:
        assert batch.logprobs is not None and batch.ref_logprobs is not None and batch.values is not None
        rewards = penalized_rewards(batch.scores, batch.logprobs, batch.ref_logprobs, batch.mask, self.kl.value)
        advantages, batch.returns = token_gae(
            rewards, batch.values, batch.mask, self.cfg.ppo.gamma, self.cfg.ppo.gae_lambda
        )
        batch.advantages = masked_whiten(advantages, batch.mask) if self.cfg.ppo.normalize_advantage else advantages

    def update(self, batch: Sequences, selection: Selection, rng: np.random.Generator) -> dict[str, float]:
        """LM-PPO epochs over the kept records; then the KL controller steps on the round's KL."""
        stats = ppo_update(self.policy, self.optimizer, batch, selection, self.cfg.ppo, self.cfg.env.lm, rng)
        self.kl.update(batch.mean_kl(), len(batch))
        return stats

    def state_dict(self) -> dict[str, Any]:
        return {"kl_coef": self.kl.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.kl.value = state["kl_coef"]


class GRPO:
    """Group-relative advantages, no value head (lm/grpo.py)."""

    def __init__(self, cfg: DictConfig, policy: Policy, optimizer: torch.optim.Optimizer):
        self.cfg, self.policy, self.optimizer, self.settings = cfg, policy, optimizer, cfg.env.lm.grpo
        self.group_size = self.settings.group_size
        # Dr. GRPO's constant: the longest response a round can sample.
        self.max_tokens = int(cfg.env.lm.response_tokens[1])
        self.record_loss = grpo.record_loss_fn(cfg.ppo.clip_range, self.settings, self.max_tokens)

    @classmethod
    def check_config(cls, cfg: DictConfig) -> None:
        lm, settings = cfg.env.lm, cfg.env.lm.grpo
        size = settings.group_size
        if size < 2:
            raise ConfigError(f"env.lm.grpo.group_size={size} must be >= 2 (a group's baseline needs two responses)")
        for key, value in (("env.n_steps", cfg.env.n_steps), ("env.lm.val_size", lm.val_size)):
            if value % size:
                raise ConfigError(f"{key}={value} must be a multiple of env.lm.grpo.group_size={size}")
        require_one_of("env.lm.grpo.loss_type", settings.loss_type, grpo.LOSS_TYPES)
        require_one_of("env.lm.grpo.drop_baseline", settings.drop_baseline, grpo.DROP_BASELINES)
        if settings.beta < 0:
            raise ConfigError(f"env.lm.grpo.beta={settings.beta} must be >= 0")
        if lm.influence_value_loss:
            raise ConfigError("env.lm.influence_value_loss=true needs env.lm.algorithm=ppo (GRPO has no value loss)")

    @property
    def kl_coef(self) -> float:
        return float(self.settings.beta)

    def advantages(self, batch: Sequences) -> None:
        advantages = grpo.group_advantages(batch.scores, self.group_size, self.settings.scale_rewards)
        batch.advantages = grpo.on_tokens(advantages, batch.mask)

    def update(self, batch: Sequences, selection: Selection, rng: np.random.Generator) -> dict[str, float]:
        return grpo.grpo_update(
            self.policy, self.optimizer, batch, selection, self.cfg.ppo, self.settings, self.max_tokens, rng
        )

    def state_dict(self) -> dict[str, Any]:
        return {}  # β is fixed; nothing carries over between rounds

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Nothing to restore."""


# env.lm.algorithm -> its strategy (LMTrainer.check_config validates the name)
ALGORITHMS: dict[str, type[LMAlgorithm]] = {"ppo": LMPPO, "grpo": GRPO}
