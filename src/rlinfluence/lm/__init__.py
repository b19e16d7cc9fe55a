"""The language-model path (env.agent=lm): LM-PPO (or GRPO) with LoRA on a causal LM, detoxified against a
reward model, with IIF's per-sequence influence on the LoRA weights (paper §5.3; docs/algorithm.md#language-models).

hub: models and data sets by name · tiny: the offline corpus, tokenizer and GPT-Neo of env=toxicity_tiny ·
prompts: train / val / eval queries · reward: reward model and toxicity classifier · policy: LM + LoRA +
value head · rollout: generation and the sequence records · ppo: KL controller, token GAE, losses,
update · grpo: group-relative advantages, GRPO's loss and update · algorithms: PPO and GRPO behind one
interface (env.lm.algorithm) · influence: LoRA gradients along f_seq / f_return · evaluation: test
toxicity · trainer: the agent the round loop drives.
"""
