"""Generating responses and the round's records: whole (query, response) sequences.

A `Sequences` batch is right-padded: positions 0..L-1, the query first, then the response. Per-token
quantities live on the L-1 "next-token" positions j (the model at j predicts token j+1); `mask[j]` is
1 where token j+1 is a response token. Records are identified by their row (the selection's ids): a
`Sequences` is the language-model agent's `records.Records`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from rlinfluence.lm.policy import Policy


@dataclass
class Sequences:
    input_ids: torch.Tensor  # (N, L), right-padded
    attention_mask: torch.Tensor  # (N, L)
    mask: torch.Tensor  # (N, L-1) float: next-token position j predicts a response token
    scores: torch.Tensor  # (N,) the reward model's score of each response
    # Filled by `annotate` at θ_k:
    logprobs: torch.Tensor | None = None  # (N, L-1) log π_θk
    ref_logprobs: torch.Tensor | None = None  # (N, L-1) log π_ref
    values: torch.Tensor | None = None  # (N, L-1) V_θk
    advantages: torch.Tensor | None = None  # (N, L-1) PPO: whitened GAE advantages; GRPO: the group's, per token
    returns: torch.Tensor | None = None  # (N, L-1) PPO: GAE advantages (before whitening) + values; GRPO: none
    kl: torch.Tensor | None = None  # (N,) Σ (log π_θk − log π_ref) over each response: what the KL controller steers
    planted: torch.Tensor | None = None  # (N,) bool: the score was negated (corruption.py); None in a clean run

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def mean_kl(self) -> float:
        assert self.kl is not None, "annotate the sequences first"
        return float(self.kl.mean())

    def rows(self, ids: torch.Tensor) -> Sequences:
        """The records `ids`, cut to their longest sequence."""
        length = int(self.attention_mask[ids].sum(1).max())

        def take(name: str, tensor: torch.Tensor | None) -> torch.Tensor | None:
            if tensor is None or tensor.ndim == 1:
                return None if tensor is None else tensor[ids]
            return tensor[ids, : length if name in TOKEN_FIELDS else length - 1]

        tensors: dict[str, Any] = {f.name: take(f.name, getattr(self, f.name)) for f in fields(self)}
        return Sequences(**tensors)


TOKEN_FIELDS = ("input_ids", "attention_mask")  # width L; every other per-token field has width L-1


def pack(
    queries: list[list[int]], responses: list[list[int]], scores: np.ndarray, pad_id: int, device: str
) -> Sequences:
    lengths = [len(q) + len(r) for q, r in zip(queries, responses)]
    width = max(lengths)
    input_ids = torch.full((len(queries), width), pad_id, dtype=torch.long)
    attention = torch.zeros(len(queries), width, dtype=torch.long)
    mask = torch.zeros(len(queries), width - 1)
    for row, (query, response) in enumerate(zip(queries, responses)):
        input_ids[row, : lengths[row]] = torch.tensor(query + response)
        attention[row, : lengths[row]] = 1
        mask[row, len(query) - 1 : lengths[row] - 1] = 1
    return Sequences(
        input_ids.to(device),
        attention.to(device),
        mask.to(device),
        torch.as_tensor(scores, dtype=torch.float32, device=device),
    )


@torch.no_grad()
def generate(
    policy: Policy,
    queries: list[list[int]],
    tokenizer,
    new_tokens: int,
    min_new_tokens: int,
    top_k: int,
    seed: int,
    batch: int,
    device: str,
) -> list[list[int]]:
    """Sampled responses (temperature 1, top_p 1, top_k 0 = the full distribution), each cut after its
    first EOS (kept). The sampling noise comes from `seed` alone, so a round's responses do not depend on
    what ran before it (a resumed run samples the same)."""
    eos = tokenizer.eos_token_id
    responses = []
    with torch.random.fork_rng(devices=[device] if device.startswith("cuda") else []):
        torch.manual_seed(seed)
        for start in range(0, len(queries), batch):
            chunk = queries[start : start + batch]
            width = max(map(len, chunk))
            # Left-padded for generation (generate() derives the positions from the attention mask).
            ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(q)) + q for q in chunk], device=device)
            attention = torch.tensor([[0] * (width - len(q)) + [1] * len(q) for q in chunk], device=device)
            out = policy.lm.generate(
                input_ids=ids,
                attention_mask=attention,
                do_sample=True,
                top_k=top_k,
                top_p=1.0,
                temperature=1.0,
                max_new_tokens=new_tokens,
                min_new_tokens=min_new_tokens,
                eos_token_id=eos,
                pad_token_id=tokenizer.pad_token_id,
            )
            for row in out[:, width:].tolist():
                responses.append(row[: row.index(eos) + 1] if eos in row else row)
    return responses
