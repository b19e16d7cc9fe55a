"""The policy: a causal LM with LoRA adapters and a scalar value head; the reference is the same model
with the adapters switched off (docs/settings.md#language-models: trainable = LoRA and value head).

The whole model stays in eval mode (dropout off, LoRA dropout included), as the authors ran both arms:
then a record's loss is a deterministic function of the weights, which the influence scores need.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import torch
from torch import nn

from rlinfluence.lm import hub
from rlinfluence.lm.tiny import tiny_assets

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def load_tokenizer(model_cfg):
    from transformers import AutoTokenizer

    path = str(tiny_assets(model_cfg.tiny).tokenizer) if model_cfg.path == "tiny" else model_cfg.path
    tokenizer = hub.load("model.path", path, hub.MODEL, AutoTokenizer.from_pretrained)
    if tokenizer.pad_token is None:  # GPT-Neo has none; padded positions are masked everywhere
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _base_model(model_cfg):
    from transformers import AutoConfig, AutoModelForCausalLM

    if model_cfg.path == "tiny":
        return AutoModelForCausalLM.from_pretrained(tiny_assets(model_cfg.tiny).model)
    dtype = DTYPES[model_cfg.dtype]
    if model_cfg.random_init:
        config = hub.load("model.path", model_cfg.path, hub.MODEL, AutoConfig.from_pretrained)
        return AutoModelForCausalLM.from_config(config, dtype=dtype)
    return hub.load(
        "model.path", model_cfg.path, hub.MODEL, lambda name: AutoModelForCausalLM.from_pretrained(name, dtype=dtype)
    )


class Policy(nn.Module):
    def __init__(self, model_cfg, generator: torch.Generator):
        super().__init__()
        from peft import LoraConfig, get_peft_model

        lora = model_cfg.lora
        with torch.random.fork_rng():  # LoRA A and the value head are initialised from the run's seed
            torch.manual_seed(int(torch.randint(2**31 - 1, (1,), generator=generator)))
            self.lm = get_peft_model(
                _base_model(model_cfg),
                LoraConfig(
                    r=lora.r,
                    lora_alpha=lora.alpha,
                    lora_dropout=lora.dropout,
                    target_modules=list(lora.targets),
                    bias="none",
                    task_type="CAUSAL_LM",
                ),
            )
            hidden = self.lm.config.hidden_size
            self.value_head = nn.Linear(hidden, 1, dtype=self.lm.dtype)
        self.eval()

    def train(self, mode: bool = True) -> Policy:
        return super().train(False)  # always eval mode (module docstring)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per position j < L-1: log π(token j+1 | tokens ≤ j) and the value V(tokens ≤ j), in float32."""
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        logprobs = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)
        token_logprobs = logprobs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
        values = self.value_head(out.hidden_states[-1][:, :-1]).squeeze(-1).float()
        return token_logprobs, values

    @contextmanager
    def reference(self) -> Iterator[None]:
        """The reference policy π_ref: the base LM, adapters disabled."""
        with self.lm.disable_adapter():
            yield

    def lora_pairs(self) -> list[tuple[nn.Linear, nn.Linear]]:
        """(lora_A, lora_B) of every adapted projection: the parameters influence is taken on."""
        from peft.tuners.lora import LoraLayer

        return [
            (cast(nn.Linear, layer.lora_A["default"]), cast(nn.Linear, layer.lora_B["default"]))
            for layer in self.lm.modules()
            if isinstance(layer, LoraLayer)
        ]

    def lora_parameters(self) -> list[torch.Tensor]:
        return [weight for pair in self.lora_pairs() for weight in (pair[0].weight, pair[1].weight)]

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """LoRA and value-head weights only: the base model never changes (and a 2.7B copy per checkpoint
        would not fit)."""
        return {name: p.detach().cpu().clone() for name, p in self.named_parameters() if p.requires_grad}

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        parameters = dict(self.named_parameters())
        with torch.no_grad():
            for name, value in state.items():
                parameters[name].copy_(value)
