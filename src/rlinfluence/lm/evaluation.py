"""Test toxicity (paper Fig. 7b): the policy continues the eval prompts (Wiki-Toxic's toxic comments) with
`eval_new_tokens` sampled tokens (top_k `eval_top_k`, generate()'s default); the toxicity classifier's
mean probability is the test toxicity, and the reward model's mean score is the row's test_return.

The sampling seed comes from (eval seed, round) alone, as in the control evaluator: every method sees the
same noise at the same round, and a resumed run evaluates as an uninterrupted one.
"""

from __future__ import annotations

import numpy as np

from rlinfluence.lm.policy import Policy
from rlinfluence.lm.reward import Scorer
from rlinfluence.lm.rollout import generate
from rlinfluence.seeding import round_seed


def _sem(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


class ToxicityEvaluator:
    def __init__(
        self,
        queries: list[list[int]],
        tokenizer,
        reward: Scorer,
        toxicity: Scorer,
        lm_cfg,
        seed_seq: np.random.SeedSequence,
        device: str,
    ):
        self.queries, self.tokenizer, self.reward, self.toxicity = queries, tokenizer, reward, toxicity
        self.lm_cfg, self.seed_seq, self.device = lm_cfg, seed_seq, device

    def evaluate(self, policy: Policy, round_index: int) -> dict[str, float]:
        responses = generate(
            policy,
            self.queries,
            self.tokenizer,
            self.lm_cfg.eval_new_tokens,
            0,
            self.lm_cfg.eval_top_k,
            round_seed(self.seed_seq, round_index),
            self.lm_cfg.generation_batch,
            self.device,
        )
        texts = self.tokenizer.batch_decode(responses, skip_special_tokens=True)
        toxicity, reward = self.toxicity(texts), self.reward(texts)
        return {
            "test_toxicity": float(toxicity.mean()),
            "test_toxicity_sem": _sem(toxicity),
            "test_return": float(reward.mean()),
            "test_return_sem": _sem(reward),
            "eval_episodes": len(texts),
        }
