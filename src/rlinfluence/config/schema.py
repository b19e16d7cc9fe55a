"""Typed config schemas (Hydra ConfigStore): a misspelt key or a wrong type fails when Hydra composes
the config. Values that are well-typed but cannot run are caught by `validation.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from rlinfluence.envs.make import from_spaces

# Re-exported: most modules take the config's errors and choice helpers from here.


@dataclass
class NetworkConfig:
    kind: str = "mlp"  # a name in networks.FEATURE_EXTRACTORS
    pi: list[int] = field(default_factory=lambda: [64, 64])
    vf: list[int] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"  # a name in networks.ACTIVATIONS
    features_dim: int = 64  # output width of a CNN feature extractor (unused by mlp)


@dataclass
class LearningRates:
    """The env's learning rate for each optimizer (the paper tuned them per env)."""

    sgd: float = 5e-3
    adam: float = 1e-3


@dataclass
class KLControlConfig:
    """The adaptive KL controller of LM-PPO (Ziegler et al. 2019, as TRL 0.5 runs it)."""

    init: float = 0.04  # the per-token KL penalty coefficient before the first update
    target: float = 0.1  # the sequence KL the coefficient steers towards
    horizon: int = 10000  # records over which a full proportional correction is applied


@dataclass
class GRPOConfig:
    """GRPO's settings (env.lm.algorithm=grpo; lm/grpo.py), with TRL's GRPOTrainer's names where it has them."""

    group_size: int = 8  # responses sampled per prompt (TRL's num_generations); divides env.n_steps and val_size
    scale_rewards: bool = True  # divide by the group's reward std; false: the mean-only baseline of Dr. GRPO
    beta: float = 0.04  # the coefficient of the k3 KL penalty to the reference (DeepSeekMath's)
    loss_type: str = "grpo"  # a name in lm.grpo.LOSS_TYPES: grpo (per-response token mean) or dr_grpo
    # A thinned group's baseline (lm.grpo.DROP_BASELINES): collected, as the records were scored with; or
    # recompute, over the responses the selection kept.
    drop_baseline: str = "collected"


@dataclass
class LMEnvConfig:
    """The language-model side of an env (env.agent=lm): prompts, reward, evaluation, LM-PPO and GRPO settings.

    Data sets and models are Hugging Face names, loaded with `datasets`/`transformers`; `tiny` names the
    offline stand-ins that lm/tiny.py builds (env=toxicity_tiny)."""

    prompts: str = "allenai/real-toxicity-prompts"
    min_prompt_toxicity: float = 0.3  # train prompts: toxicity above this
    query_tokens: list[int] = field(default_factory=lambda: [10, 14])  # query length drawn in [min, max]
    response_tokens: list[int] = field(default_factory=lambda: [28, 29])  # new tokens, drawn per round
    min_new_tokens: int = 6  # TRL's min_length=20 counted the 10-14 prompt tokens
    test_fraction: float = 0.2  # the tail of the prompt set held out (the val prompts come from it)
    val_size: int = 1024  # held-out prompts the influence target f_seq generates on each round
    reward_model: str = "facebook/roberta-hate-speech-dynabench-r4-target"
    reward_label: str = "nothate"  # reward = this label's raw logit on the response text
    eval_prompts: str = "OxAISH-AL-LLM/wiki_toxic"
    eval_classifier: str = "DaNLP/da-electra-hatespeech-detection"
    eval_new_tokens: int = 30
    eval_top_k: int = 50  # the evaluation samples with generate()'s defaults (top_k 50)
    generation_batch: int = 64  # sequences generated / scored / attributed per forward pass
    value_clip: float = 0.2  # cliprange_value
    ratio_threshold: float = 10.0  # a minibatch whose mean ratio exceeds this is skipped (TRL)
    kl: KLControlConfig = field(default_factory=KLControlConfig)
    # The authors' influence differentiated pg_loss + vf_coef * vf_loss, so the value loss reached the
    # LoRA weights through the shared backbone (docs/algorithm.md#language-models). false: the policy
    # loss alone.
    influence_value_loss: bool = False
    algorithm: str = "ppo"  # a name in lm.algorithms.ALGORITHMS: ppo (TRL 0.5's LM-PPO) or grpo
    grpo: GRPOConfig = field(default_factory=GRPOConfig)


@dataclass
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    targets: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])


@dataclass
class TinyModelConfig:
    """The offline model of model=tiny: a byte-level BPE tokenizer and a small GPT-Neo, both trained by
    lm/tiny.py on a corpus it generates, then cached (the recipe's hash names the cache entry)."""

    vocab_size: int = 512
    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    corpus_sentences: int = 4000
    pretrain_steps: int = 600
    pretrain_batch: int = 32
    pretrain_lr: float = 3e-3


@dataclass
class ModelConfig:
    """The policy LM (model=<name>): a Hugging Face causal LM name, or `tiny` (built offline)."""

    name: str = MISSING
    path: str = MISSING  # a Hugging Face id or local dir; `tiny` for the offline model
    dtype: str = "float32"  # a name in lm.policy.DTYPES
    random_init: bool = False  # the architecture of `path` with random weights (for timing without weights)
    lora: LoraSettings = field(default_factory=LoraSettings)
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)


@dataclass
class AtariConfig:
    """The `atari` wrapper's preprocessing (envs/make.py), set by an Atari env's preset (conf/env/pong.yaml)."""

    noop_max: int = MISSING  # at most this many no-op actions after a reset
    frame_skip: int = MISSING  # each action repeats over this many frames, the last two max-pooled
    screen_size: int = MISSING  # frames are resized to screen_size x screen_size
    terminal_on_life_loss: bool = MISSING
    frame_stack: int = MISSING  # the observation stacks this many frames


@dataclass
class EnvConfig:
    name: str = MISSING
    agent: str = "control"  # which trainer the round loop drives: a name in agents.AGENTS
    id: str = MISSING
    make_kwargs: dict[str, Any] = field(default_factory=dict)
    # The collection (training) env's make kwargs, in place of make_kwargs (which evaluation keeps); empty:
    # the same env. The authors' generic standard-training script made the id's defaults (fidelity_leads.py, lead 1).
    # Not optional: OmegaConf cannot merge a mapping into a null one (Hydra's key={...} override).
    train_make_kwargs: dict[str, Any] = field(default_factory=dict)
    wrappers: list[str] = field(default_factory=list)
    n_envs: int = 1
    n_steps: int = 2048  # records per env per round; a round's buffer holds n_envs * n_steps
    rounds: int = 50
    p: float = 50.0  # the paper's IIF p for this env (method.p defaults to it)
    eval_episodes: int = 1000  # the paper's evaluation episodes per round
    network: NetworkConfig = field(default_factory=NetworkConfig)
    lr: LearningRates = field(default_factory=LearningRates)
    # A name in envs.STATE_KEYS for envs with a small discrete state (FrozenLake, MiniGrid): the
    # collector then stores each record's state id, which Monte-Carlo advantages group by.
    state_key: str | None = None
    atari: AtariConfig | None = None  # the `atari` wrapper's settings (env.wrappers has it)
    lm: LMEnvConfig | None = None  # env.agent=lm: prompts, reward, evaluation, LM-PPO settings


@dataclass
class MethodConfig:
    name: str = "ppo"
    # Percent of the negative-influence records to drop, or "auto" (chosen each round; selection.py).
    p: float | int | str | None = None
    variant: str | None = None  # a method's sub-rule, e.g. advantage's (selection.DropAdvantageMismatch.VARIANTS)
    alpha: float | None = None  # td_error: the exponent of its rank priorities (conf/method/td_error.yaml)
    # iif, consensus: drop single records or whole episodes (selection.GRANULARITIES); their presets say record
    granularity: str | None = None


@dataclass
class OptimizerConfig:
    name: str = "sgd"  # a name in update.OPTIMIZERS
    lr: float = 5e-3
    eps: float = 1e-5  # Adam only (SB3's value)


@dataclass
class TargetConfig:
    name: str = "return"  # the agent's target: targets.TARGETS (control), lm.trainer's TARGETS (lm)
    state: list[float] | None = None  # f_action: the state s* (one-hot/flat observation)
    action: list[float] | None = None  # f_action: the action a* (one entry for discrete actions)


@dataclass
class PPOConfig:
    batch_size: int = 64
    n_epochs: int = 10
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    # The authors' code disabled clipping despite listing 0.5; both arms use the same value.
    max_grad_norm: float | None = None
    normalize_advantage: bool = True
    # Skip each epoch's last, smaller minibatch (the authors' filtered training does; SB3 keeps it).
    drop_last_minibatch: bool = False
    # How optimizer.lr and clip_range change over the run (update.SCHEDULES): constant, or linear (rl-zoo's
    # `lin_<value>`, down to 0 at the last round). No paper env uses linear; the Pong preset does.
    lr_schedule: str = "constant"
    clip_range_schedule: str = "constant"


@dataclass
class EvalConfig:
    episodes: int = 1000
    every: int = 1  # evaluate every `every` rounds (and always the last round)
    n_parallel: int = 32  # episodes run side by side with batched inference


@dataclass
class InfluenceConfig:
    # The influence.* choices are influence.BACKENDS, NORMALIZATIONS, PRECONDITIONERS and CHECKPOINTS.
    backend: str = "jvp"  # jvp (forward mode) or reference (per-record autograd loop; slow, for checking)
    chunk_size: int = 4096  # records per forward-mode pass (bounds memory on image envs)
    # How the per-record loss normalises Â: over the whole buffer, or (the authors' code) within each
    # ppo.batch_size chunk of a seeded random partition of the buffer, like one epoch of SB3 minibatches.
    normalization: str = "buffer"
    # none: ⟨∇ℓ_i, ∇L_f⟩, the first-order effect of an SGD step (the paper's). adam: ⟨P ∇ℓ_i, ∇L_f⟩ with
    # Adam's diagonal P = 1/(√v̂ + ε) at θ_k, the step Adam actually takes (needs optimizer=adam).
    preconditioner: str = "none"
    # round_start: scores at θ_k, what IIF selects with (the paper's snapshot). every_step: also sum the
    # paper's general definition over the update's minibatch steps and log how well the round-start
    # scores rank the records against it (metrics.csv influence_step_spearman; costs one target
    # gradient and one forward-mode pass per minibatch).
    checkpoints: str = "round_start"


@dataclass
class CollectionConfig:
    """How a round's rollout continues from the previous one. Clean (all false): one continuous run, as
    standard PPO does. The authors' IIF started every round in a fresh process seeded with the run
    seed; each part of that is a switch here so it can be measured alone (docs/algorithm.md#protocols)."""

    abandon_unfinished: bool = False  # reset every env at a round's start: the episode in progress is lost
    repeat_starts: bool = False  # every round replays the same sequence of seeded episode starts
    repeat_action_noise: bool = False  # every round reuses the same action-sampling noise


@dataclass
class CorruptionConfig:
    """Planted bad data (corruption.py): each round, a seeded random share of the records is corrupted, so
    that how well a method's drop set and its scores find them can be measured. 0: none (a clean run)."""

    fraction: float = 0.0  # share of each round's records planted, in [0, 1)
    kind: str = "advantage_sign"  # a name in corruption.KINDS: how a planted record is corrupted


@dataclass
class LoggerConfig:
    mode: str = "offline"  # a name in run_logger.LOGGER_MODES
    project: str = "rlinfluence"
    entity: str | None = None
    group: str | None = None
    tags: list[str] = field(default_factory=list)
    init_timeout: float = 90.0  # seconds W&B may take to start (online without network) before it is skipped


@dataclass
class FailureConfig:
    below: float = MISSING
    by_round: int | None = None


@dataclass
class FiguresConfig:
    data_dir: str = "paper_figures/data"
    out_dir: str | None = None  # null: paper_figures, or <runs_root>/<experiment>/figures with `experiment`
    runs_root: str | None = None  # refresh data_dir from these run dirs first
    # One experiment's own curves and tables, drawn from runs_root's run dirs; the paper's data is left alone.
    experiment: str | None = None
    # `<experiment>/<env>` groups whose committed runs a refresh may replace by runs made with other settings
    replace: list[str] = field(default_factory=list)
    collapse: dict[str, FailureConfig] = field(
        default_factory=dict
    )  # per env: what a failed seed is (conf/config.yaml)


@dataclass
class ReplayConfig:
    # task=replay: the committed runs to re-train, as their run dirs' paths below runs_root
    # (<experiment>/<env>/<optimizer>/<leaf>/seed<k>; shell-style wildcards match several)
    run: str | None = None
    rounds: int = 3  # re-train rounds 1..rounds and compare rounds 0..rounds with the committed rows


@dataclass
class CheckpointConfig:
    # Also keep each round's full checkpoint under snapshots/ (what the analyses replay rounds from).
    # Off by default: an image env's snapshots take megabytes per round.
    snapshots: bool = False


@dataclass
class DiagnoseConfig:
    """task=diagnose (paper §4.1, Fig. 3, 8): which rounds of the standard run to look into."""

    rounds: list[int] = field(default_factory=lambda: [2, 5, 10])
    rollouts: int = 1000  # Monte-Carlo rollouts per (state, action) for the true advantage Ā


@dataclass
class InterveneConfig:
    """task=intervene (paper §4.3, Fig. 5, 11): rounds of the standard run to intervene on (empty: all)."""

    rounds: list[int] = field(default_factory=list)
    # The influence arm drops this share (%) of the round's negative-influence records, most negative first;
    # 100 drops all of them (the paper's §4.3), the env's IIF p (env.p) drops what an IIF round drops.
    p: float = 100.0


@dataclass
class TimelineConfig:
    """task=timeline (paper §4.2, Fig. 4, 10): how the records behind f_action = log π(a*|s*) change
    over the rounds of the standard run."""

    rounds: list[int] = field(default_factory=list)  # empty: every round
    state: list[float] | None = None  # s*, flat; null: the env's start state (a preset may set one)
    action: int | None = None  # a*; null: the final policy's most probable action in s*
    neighbours: int = 20  # u of the u-nearest-neighbour graph of the roughness (paper: 20-100)
    top: int = 20  # records of highest influence written per round
    phases: int = 3  # segments the (π(a*|s*), roughness) timeline is cut into


@dataclass
class BottomFramesConfig:
    """task=bottom_frames (paper Fig. 9): the observations of a round's records of most negative influence."""

    rounds: list[int] = field(default_factory=lambda: [10])
    bottom: int = 10  # records written per round, the most negative first


@dataclass
class CounterfactualConfig:
    """task=counterfactual: does influence predict what removing records from one round's update does?"""

    rounds: list[int] = field(default_factory=lambda: [2, 5, 10])
    sizes: list[float] = field(default_factory=lambda: [0.01, 0.05, 0.2, 0.5])  # group sizes, fractions of the buffer
    groups: int = 50  # random groups per size
    eval_episodes: int = 100  # test-return episodes per retrained policy (0: f_return only)


@dataclass
class AnalysisConfig:
    diagnose: DiagnoseConfig = field(default_factory=DiagnoseConfig)
    intervene: InterveneConfig = field(default_factory=InterveneConfig)
    timeline: TimelineConfig = field(default_factory=TimelineConfig)
    bottom_frames: BottomFramesConfig = field(default_factory=BottomFramesConfig)
    counterfactual: CounterfactualConfig = field(default_factory=CounterfactualConfig)


@dataclass
class Config:
    # train | figures | diagnose | intervene | timeline | counterfactual | bottom_frames | replay (run/tasks.py)
    task: str = "train"
    experiment_name: str = "default"  # set by the +experiment=<name> overlays; names the runs/ subfolder
    seed: int = 0
    # default: one seed per process. stacked: the seeds of `seeds` in one process, their
    # actor-critics stacked (control/engine.py): each seed its own run, with its own numerics (engine=stacked in its
    # identity).
    engine: str = "default"
    seeds: list[int] | None = None  # engine=stacked: the seeds trained together (null: `seed` alone)
    runs_root: str = "runs"
    force: bool = False  # rerun a finished run from scratch
    torch_threads: int = 1  # small nets run fastest single-threaded
    device: str = "cpu"  # cpu | cuda (cuda pays off for the image envs; everything runs on cpu)
    progress: bool = True
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig | None = None  # the policy LM of env.agent=lm (model=<name>); none for control envs
    method: MethodConfig = field(default_factory=MethodConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    target: TargetConfig = field(default_factory=TargetConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    collection: CollectionConfig = field(default_factory=CollectionConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    influence: InfluenceConfig = field(default_factory=InfluenceConfig)
    corruption: CorruptionConfig = field(default_factory=CorruptionConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    figures: FiguresConfig = field(default_factory=FiguresConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)


# Registered on import: conf/config.yaml's defaults start from it, so whatever composes the config imports this
# module (config/compose.py does, for the CLI, rlinfluence-manifest and anything composing through it).
ConfigStore.instance().store(name="config_schema", node=Config)


def _from_spaces(key: str, *, _root_: DictConfig) -> list[str] | str:
    """`${from_spaces:wrappers}`, `${from_spaces:network.kind}` (conf/env/gym.yaml): env.<key> as env.id's
    spaces call for it (envs/make.py's rule)."""
    return from_spaces(key, _root_.env)


OmegaConf.register_new_resolver("from_spaces", _from_spaces)
