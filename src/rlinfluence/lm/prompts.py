"""The queries a run trains on, attributes against and evaluates on, as token-id lists.

Real (env=toxicity, docs/settings.md#language-models): RealToxicityPrompts' train split filtered to
prompt toxicity > `min_prompt_toxicity`; each query is the first L tokens of prompt + continuation, L drawn in
`query_tokens`; the first `1 - test_fraction` of the rows train, the first `val_size` rows of the rest are
the val prompts of f_seq. Evaluation: Wiki-Toxic's test comments with label 1 (toxic), the first
`eval.episodes` of them, cut to 2,000 characters. Tiny (env=toxicity_tiny): the same cuts of the toxic
prompts tiny.py generates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlinfluence.lm import hub, tiny

TINY = "tiny"
EVAL_CHARACTERS = 2000
TINY_PROMPTS = 2000


@dataclass
class Prompts:
    train: list[list[int]]
    val: list[list[int]]
    eval: list[list[int]]


def _queries(texts: list[str], tokenizer, lengths: tuple[int, int], rng: np.random.Generator) -> list[list[int]]:
    """The first L tokens of each text, L uniform in [lengths[0], lengths[1]]."""
    return [ids[: int(rng.integers(lengths[0], lengths[1] + 1))] for ids in tokenizer(texts)["input_ids"]]


def _split(queries: list[list[int]], test_fraction: float, val_size: int) -> tuple[list, list]:
    n_train = int(round(len(queries) * (1 - test_fraction)))
    return queries[:n_train], queries[n_train:][:val_size]


def load_prompts(lm_cfg, tokenizer, n_eval: int, seed: int) -> Prompts:
    rng = np.random.default_rng(seed)  # the query lengths: part of the data set, fixed by the run seed
    lengths = tuple(lm_cfg.query_tokens)
    if lm_cfg.prompts == TINY:
        texts = tiny.toxic_prompts(TINY_PROMPTS, seed=1)
        eval_texts = tiny.toxic_prompts(n_eval, seed=2, templates=tiny.EVAL_TEMPLATES)
        # An eval prompt is a whole toxic remark without its last words (as Wiki-Toxic's are whole comments).
        eval_queries = [ids[: max(1, len(ids) - 2)] for ids in tokenizer(eval_texts)["input_ids"]]
    else:
        texts = _real_toxicity_prompts(lm_cfg)
        eval_queries = tokenizer(_wiki_toxic(lm_cfg, n_eval))["input_ids"]
    train, val = _split(_queries(texts, tokenizer, lengths, rng), lm_cfg.test_fraction, lm_cfg.val_size)
    return Prompts(train, val, eval_queries)


def _real_toxicity_prompts(lm_cfg) -> list[str]:
    import datasets

    rows = hub.load(
        "env.lm.prompts", lm_cfg.prompts, hub.DATASET, lambda name: datasets.load_dataset(name, split="train")
    )
    threshold = lm_cfg.min_prompt_toxicity
    return [
        row["prompt"]["text"] + row["continuation"]["text"]
        for row in rows
        if row["prompt"]["toxicity"] is not None and row["prompt"]["toxicity"] > threshold
    ]


def _wiki_toxic(lm_cfg, n_eval: int) -> list[str]:
    import datasets

    rows = hub.load(
        "env.lm.eval_prompts", lm_cfg.eval_prompts, hub.DATASET, lambda name: datasets.load_dataset(name, split="test")
    )
    toxic = [row["comment_text"][:EVAL_CHARACTERS] for row in rows if row["label"] == 1]
    return toxic[:n_eval]
