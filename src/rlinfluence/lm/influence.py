"""Per-sequence influence on the LoRA weights (docs/algorithm.md#language-models), positive = helpful.

score_i = ⟨∇ℓ_i(θ_k), ∇L_f(θ_k)⟩ over the LoRA A and B matrices only, where ℓ_i is record i's policy loss
(ppo.record_losses; plus vf_coef · its value loss with env.lm.influence_value_loss, the authors' leak;
GRPO: grpo.record_losses)
and L_f = −f is the target: f_seq = mean_j (Σ_t log π(y_jt | x_j, y_j<t)) · Â_j,last over fresh responses to
the val prompts, or f_return = the masked token mean of Â_t · log π_t over them (Fig. 16's ablation).

Fast path: one backward of Σ_i ℓ_i over a chunk of records with hooks on every lora_A / lora_B. Records
do not interact in the forward pass, so the activations and output gradients at row i are record i's
alone, and for a LoRA pair with input X, H = A·X and output gradient G_B (of B·H), and G_A = the gradient
at H: ∇_A ℓ_i = Σ_t G_A,itᵀ X_it and ∇_B ℓ_i = Σ_t G_B,itᵀ H_it. Their inner products with the target's
gradients (V_A, V_B) are Σ_t G_A,it · (V_A X_it) and Σ_t G_B,it · (V_B H_it), never materialising a
per-record gradient. `reference_scores` is the explicit per-record autograd loop the tests check it against.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from rlinfluence.choices import chosen
from rlinfluence.lm.policy import Policy
from rlinfluence.lm.ppo import masked_mean, record_losses
from rlinfluence.lm.rollout import Sequences


def _sequence_loss(logprobs: torch.Tensor, val: Sequences) -> torch.Tensor:
    """−f_seq: each response's summed log-probability times its last token's advantage."""
    assert val.advantages is not None, "annotate the val responses first"
    last = val.mask.shape[1] - 1 - val.mask.flip(1).argmax(1)
    last_advantage = val.advantages[torch.arange(len(val)), last]
    return -((logprobs * val.mask).sum(1) * last_advantage).mean()


def _return_loss(logprobs: torch.Tensor, val: Sequences) -> torch.Tensor:
    """−f_return: the masked token mean of Â_t · log π_t."""
    assert val.advantages is not None, "annotate the val responses first"
    return -masked_mean(val.advantages * logprobs, val.mask)


# target.name -> the language-model agent's L_f (lm.trainer.LMTrainer.TARGETS validates the same names)
TARGET_LOSSES = {"seq": _sequence_loss, "return": _return_loss}


def target_loss(policy: Policy, val: Sequences, target: str) -> torch.Tensor:
    """L_f = −f on the val records (their advantages whitened over the val batch, as the train side's)."""
    loss = chosen(TARGET_LOSSES, "target.name", target)
    logprobs, _ = policy(val.input_ids, val.attention_mask)
    return loss(logprobs, val)


def target_gradient(policy: Policy, val: Sequences, target: str, chunk: int) -> list[torch.Tensor]:
    """∇L_f over the LoRA weights, accumulated over chunks of the val records (a mean over all of them)."""
    parameters = policy.lora_parameters()
    total = [torch.zeros_like(p, dtype=torch.float32) for p in parameters]
    for start in range(0, len(val), chunk):
        ids = torch.arange(start, min(start + chunk, len(val)), device=val.input_ids.device)
        loss = target_loss(policy, val.rows(ids), target) * len(ids) / len(val)
        for accumulated, grad in zip(total, torch.autograd.grad(loss, parameters)):
            accumulated += grad.float()
    return total


def record_loss_fn(
    clip_range: float, value_clip: float, vf_coef: float, with_value_loss: bool
) -> Callable[[Policy, Sequences], torch.Tensor]:
    """ℓ_i for every record of a batch at θ_k: the update's per-record loss (ppo.record_losses)."""

    def losses(policy: Policy, batch: Sequences) -> torch.Tensor:
        logprobs, values = policy(batch.input_ids, batch.attention_mask)
        policy_loss, value_loss, _ = record_losses(logprobs, values, batch, clip_range, value_clip)
        return policy_loss + vf_coef * value_loss if with_value_loss else policy_loss

    return losses


@contextmanager
def _recording(policy: Policy) -> Iterator[list[dict[str, torch.Tensor]]]:
    """Records X (lora_A's input), H (lora_B's input) and the gradients at H and at lora_B's output."""
    records = []
    handles = []
    for lora_a, lora_b in policy.lora_pairs():
        record: dict[str, torch.Tensor] = {}
        records.append(record)

        def keep_input(module, inputs, output, record=record, name="x"):
            record[name] = inputs[0].detach()

        def keep_b(module, inputs, output, record=record):
            record["h"] = inputs[0].detach()
            inputs[0].register_hook(lambda grad: record.__setitem__("grad_h", grad.detach()))
            output.register_hook(lambda grad: record.__setitem__("grad_out", grad.detach()))

        handles += [lora_a.register_forward_hook(keep_input), lora_b.register_forward_hook(keep_b)]
    try:
        yield records
    finally:
        for handle in handles:
            handle.remove()


def sequence_scores(
    policy: Policy,
    batch: Sequences,
    direction: list[torch.Tensor],
    loss_fn: Callable[[Policy, Sequences], torch.Tensor],
    chunk: int,
) -> torch.Tensor:
    """⟨∇ℓ_i, direction⟩ for every record i (direction: one tensor per LoRA weight, A then B per pair)."""
    scores = []
    for start in range(0, len(batch), chunk):
        part = batch.rows(torch.arange(start, min(start + chunk, len(batch)), device=batch.input_ids.device))
        with _recording(policy) as records:
            loss_fn(policy, part).sum().backward(inputs=policy.lora_parameters())
        score = torch.zeros(len(part), device=part.input_ids.device)
        for record, v_a, v_b in zip(records, direction[0::2], direction[1::2]):
            score += (record["grad_h"].float() * (record["x"].float() @ v_a.T)).sum((1, 2))
            score += (record["grad_out"].float() * (record["h"].float() @ v_b.T)).sum((1, 2))
        scores.append(score)
    for parameter in policy.lora_parameters():
        parameter.grad = None  # the backward above only fed the hooks
    return torch.cat(scores)


def reference_scores(
    policy: Policy,
    batch: Sequences,
    direction: list[torch.Tensor],
    loss_fn: Callable[[Policy, Sequences], torch.Tensor],
) -> torch.Tensor:
    """The same scores from one explicit autograd gradient per record (slow; the tests' reference)."""
    scores: list[Any] = []  # 0-d tensors, which sum() types as possibly its start, the int 0
    for i in range(len(batch)):
        loss = loss_fn(policy, batch.rows(torch.tensor([i], device=batch.input_ids.device))).sum()
        grads = torch.autograd.grad(loss, policy.lora_parameters())
        scores.append(sum((g.float() * v).sum() for g, v in zip(grads, direction)))
    return torch.stack(scores)
