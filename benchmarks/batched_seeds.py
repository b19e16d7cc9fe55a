"""Many seeds in one process: the control engine's stacked update and influence (src/rlinfluence/control/) and the
batched simulators (src/rlinfluence/envs/batched.py) against one seed at a time, N seeds of one config, one torch
thread, arms interleaved in one process.

    python benchmarks/batched_seeds.py [--envs frozenlake acrobot] [--seeds 1 4 16] [--reps 5]
                                       [--stages step forward update influence envs]
    python benchmarks/batched_seeds.py --envs frozenlake --seeds 1 2 --n-steps 64 --reps 1   # smoke: seconds

Five measurements, CPU seconds (time.process_time):
- one PPO minibatch step (batch 64: forward, backward, per-seed clip at 0.5, SGD) of N seeds: one seed per
  process (`stacked_ppo_update` on a stack of one, once per seed; the arm printed as `alone`), one stack of all
  seeds (one baddbmm per layer for all seeds), and the same step written with torch.func (`stack_module_state` +
  `vmap(grad(...))` of one seed's module), the alternative the engine was chosen against;
- a round's collection forwards (`forward`): n_steps steps, each sampling every seed's actions for its
  observations of that step (its round-1 records): one network's `sample_actions` once per seed, the stacked
  engine's one `sample_actions` for all seeds (control/engine.py's `Stack.collect`);
- a round's update stage at the env's settings (n_steps records, 10 epochs of minibatches of 64), on each
  seed's own round-1 records, all kept (standard PPO) and half dropped at random per seed (kept sets of
  different sizes, as IIF's are): a stack of one per seed against one `stacked_ppo_update` of all;
- a round's influence (f_return, every record scored at θ_0): one network's `influence_scores` per seed against one
  `stacked_influence_scores`;
- env steps (`envs`; N is the envs, n_steps uniform random actions each, the same seeds): N library envs as
  `make_env` builds them, stepped in turn as collection and evaluation step them without a simulator, against one
  batched simulator.
Prints ms per seed, seed-updates and seed-rounds per CPU-second, env steps per CPU-second, each with its ratio to
the seeds alone (the library's envs for env steps).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from hydra import compose, initialize_config_dir
from torch.func import functional_call, grad, stack_module_state, vmap

from rlinfluence.config.paths import CONFIG_DIR
from rlinfluence.control.engine import Stack
from rlinfluence.control.stacked_influence import stacked_influence_scores
from rlinfluence.control.stacked_networks import StackedActorCritic
from rlinfluence.control.stacked_optim import stacked_optimizer
from rlinfluence.control.stacked_update import clip_grad_norm_per_seed, stacked_ppo_update
from rlinfluence.control.trainer import Trainer
from rlinfluence.envs.batched import BatchedSimulator, batched_simulator
from rlinfluence.envs.make import make_env
from rlinfluence.influence import influence_scores
from rlinfluence.losses import normalize_advantages, policy_loss_per_record, value_loss_per_record
from rlinfluence.selection import Selection
from rlinfluence.targets import ReturnTarget


def compose_config(overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("config", overrides=overrides)


class Seeds:
    """N seeds of one env: their round-1 records and, for each arm, the seeds' networks at θ_0 and optimizers,
    built once (an arm's timing is its update alone; the parameters it moves change nothing of its cost)."""

    def __init__(self, env: str, n: int, n_steps: int):
        self.cfg = compose_config([f"env={env}", f"env.n_steps={n_steps}", "ppo.max_grad_norm=0.5", "logger=disabled"])
        trainers = []
        for seed in range(n):
            cfg = copy.deepcopy(self.cfg)
            cfg.seed = seed
            trainers.append(Trainer(cfg))
        self.buffers = [Stack([trainer]).collect(1)[0] for trainer in trainers]
        self.models = [trainer.model for trainer in trainers]
        self.optimizers = [trainer.optimizer for trainer in trainers]
        self.stacked = StackedActorCritic([copy.deepcopy(model) for model in self.models])
        self.stacked_optimizer = stacked_optimizer(
            self.cfg.optimizer.name, self.stacked, list(zip(self.models, self.optimizers)), self.cfg.optimizer.lr
        )
        self.vmapped = stack_module_state([copy.deepcopy(model) for model in self.models])
        self.alone = [StackedActorCritic([copy.deepcopy(model)]) for model in self.models]  # one stack per seed
        self.alone_optimizers = [
            stacked_optimizer(self.cfg.optimizer.name, alone, [(model, optimizer)], self.cfg.optimizer.lr)
            for alone, model, optimizer in zip(self.alone, self.models, self.optimizers)
        ]

    def rngs(self) -> list[np.random.Generator]:
        return [np.random.default_rng(seed) for seed in range(len(self.models))]


def update_alone(seeds: Seeds, ppo, selections: list[Selection]) -> None:
    """One seed per process: each seed's update on a stack of its own."""
    for alone, optimizer, buffer, selection, rng in zip(
        seeds.alone, seeds.alone_optimizers, seeds.buffers, selections, seeds.rngs()
    ):
        stacked_ppo_update(alone, optimizer, [buffer], [selection], ppo, [rng])


def stacked_update(seeds: Seeds, ppo, selections: list[Selection]) -> None:
    stacked_ppo_update(seeds.stacked, seeds.stacked_optimizer, seeds.buffers, selections, ppo, seeds.rngs())


def vmap_step(seeds: Seeds, ppo, batch: list[torch.Tensor]) -> None:
    """One minibatch step of all seeds through torch.func: one seed's module, its parameters stacked."""
    params, buffers = seeds.vmapped
    base = seeds.models[0]

    def loss(p, b, obs, actions, old_log_prob, advantages, returns):
        logits, values = functional_call(base, (p, b), (obs,))
        log_prob, entropy = base.action_head.log_prob_entropy(logits, actions)
        policy = policy_loss_per_record(log_prob, old_log_prob, advantages, ppo.clip_range, entropy, ppo.ent_coef)
        return policy.mean() + ppo.vf_coef * value_loss_per_record(values, returns).mean()

    records = list(zip(seeds.buffers, batch))
    fields = [
        torch.stack([getattr(buffer, name)[ids] for buffer, ids in records]) for name in ("obs", "actions", "log_probs")
    ]
    advantages = torch.stack([normalize_advantages(buffer.advantages[ids]) for buffer, ids in records])
    returns = torch.stack([buffer.returns[ids] for buffer, ids in records])
    step: Callable[..., dict[str, torch.Tensor]] = vmap(grad(loss))
    grads = step(params, buffers, *fields, advantages, returns)
    for name, parameter in params.items():
        parameter.grad = grads[name]
    clip_grad_norm_per_seed(params.values(), ppo.max_grad_norm)
    with torch.no_grad():
        for parameter in params.values():
            parameter.add_(parameter.grad, alpha=-seeds.cfg.optimizer.lr)


def timed(arms: dict, reps: int) -> dict[str, float]:
    """Median CPU seconds of each arm, the arms interleaved rep by rep."""
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(reps):
        for name, arm in arms.items():
            start = time.process_time()
            arm()
            seconds[name].append(time.process_time() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def minibatch_step(env: str, n: int, n_steps: int, reps: int) -> None:
    """(n_steps unused: one step is one minibatch of 64 records.)"""
    seeds = Seeds(env, n, 64)
    ppo = copy.deepcopy(seeds.cfg.ppo)
    ppo.n_epochs, ppo.batch_size = 1, 64  # one step: one minibatch of the 64 records
    keep_all = [Selection(keep=np.ones(64, bool)) for _ in range(n)]
    batch = [torch.from_numpy(rng.permutation(64)) for rng in seeds.rngs()]
    seconds = timed(
        {
            "alone": lambda: update_alone(seeds, ppo, keep_all),
            "stacked": lambda: stacked_update(seeds, ppo, keep_all),
            "vmap": lambda: vmap_step(seeds, ppo, batch),
        },
        10 * reps,  # a step is a millisecond: more of them
    )
    cells = "  ".join(
        f"{name} {1000 * s / n:.3f}" + ("" if name == "alone" else f" ({seconds['alone'] / s:.2f}x)")
        for name, s in seconds.items()
    )
    print(f"{env:11s} N={n:<3d} one minibatch step, ms per seed: {cells}")


def collection_forwards(env: str, n: int, n_steps: int, reps: int) -> None:
    seeds = Seeds(env, n, n_steps)
    n_envs = seeds.cfg.env.n_envs
    obs = torch.stack([buffer.obs for buffer in seeds.buffers]).view(
        n, n_steps, n_envs, *seeds.buffers[0].obs.shape[1:]
    )
    noise = seeds.models[0].action_head.draw_noise((n_steps, n_envs), torch.Generator().manual_seed(0))

    def alone() -> None:
        for t in range(n_steps):
            for k, model in enumerate(seeds.models):
                model.sample_actions(obs[k, t].numpy(), noise[t])

    @torch.no_grad()
    def stacked() -> None:
        for t in range(n_steps):
            seeds.stacked.sample_actions(obs[:, t], noise[t].expand(n, *noise.shape[1:]))

    seconds = timed({"alone": alone, "stacked": stacked}, reps)
    print(
        f"{env:11s} N={n:<3d} collection forwards, seed-rounds per CPU-second: alone {n / seconds['alone']:.2f}  "
        f"stacked {n / seconds['stacked']:.2f}  ratio to alone {seconds['alone'] / seconds['stacked']:.2f}x"
    )


def update_stage(env: str, n: int, n_steps: int, reps: int) -> None:
    seeds = Seeds(env, n, n_steps)
    draw = np.random.default_rng(0)
    arms = {}
    for kept, selections in {
        "all kept": [Selection(keep=np.ones(n_steps, bool)) for _ in range(n)],
        "half dropped": [
            Selection(keep=draw.permutation(n_steps) < n_steps // 2 + draw.integers(-50, 50)) for _ in range(n)
        ],
    }.items():
        arms[f"alone {kept}"] = lambda selections=selections: update_alone(seeds, seeds.cfg.ppo, selections)
        arms[f"stacked {kept}"] = lambda selections=selections: stacked_update(seeds, seeds.cfg.ppo, selections)
    seconds = timed(arms, reps)
    for kept in ("all kept", "half dropped"):
        alone, stacked = seconds[f"alone {kept}"], seconds[f"stacked {kept}"]
        print(
            f"{env:11s} N={n:<3d} update stage ({kept}), seed-updates per CPU-second: alone {n / alone:.2f}  "
            f"stacked {n / stacked:.2f}  ratio to alone {alone / stacked:.2f}x"
        )


def influence_stage(env: str, n: int, n_steps: int, reps: int) -> None:
    seeds = Seeds(env, n, n_steps)
    target, ppo = ReturnTarget(), seeds.cfg.ppo  # f_return, IIF's default
    seconds = timed(
        {
            "alone": lambda: [influence_scores(m, b, target, ppo) for m, b in zip(seeds.models, seeds.buffers)],
            "stacked": lambda: stacked_influence_scores(seeds.stacked, seeds.buffers, target, ppo),
        },
        reps,
    )
    print(
        f"{env:11s} N={n:<3d} round-start influence, seed-rounds per CPU-second: alone {n / seconds['alone']:.2f}  "
        f"stacked {n / seconds['stacked']:.2f}  ratio to alone {seconds['alone'] / seconds['stacked']:.2f}x"
    )


def play_library(envs: list[gym.Env], actions: np.ndarray) -> None:
    """Collection on the library's envs: each env stepped in turn, reset with the next seed when its episode ends."""
    for slot, env in enumerate(envs):
        env.reset(seed=slot)
    episode = len(envs)
    for row in actions.tolist():
        for env, action in zip(envs, row):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset(seed=episode)
                episode += 1


def play_batched(simulator: BatchedSimulator, actions: np.ndarray) -> None:
    """The same episodes (seeds, actions) on the batched simulator: one step for all slots."""
    simulator.reset(np.arange(simulator.n), np.arange(simulator.n))
    episode = simulator.n
    for row in actions:
        _, _, terminated, truncated = simulator.step(row)
        ended = np.flatnonzero(terminated | truncated)
        if len(ended):
            simulator.reset(ended, episode + np.arange(len(ended)))
            episode += len(ended)


def env_steps(env: str, n: int, n_steps: int, reps: int) -> None:
    """n_steps uniform random actions in each of N envs: N library envs as make_env builds them, against the
    batched simulator of N slots, on the same trajectories (tests/envs/test_batched.py)."""
    cfg = compose_config([f"env={env}", "logger=disabled"]).env
    library = [make_env(cfg) for _ in range(n)]
    simulator = batched_simulator(cfg, n)
    actions = np.random.default_rng(0).integers(simulator.action_space.n, size=(n_steps, n))
    seconds = timed(
        {"library": lambda: play_library(library, actions), "batched": lambda: play_batched(simulator, actions)}, reps
    )
    steps = n * n_steps
    print(
        f"{env:11s} N={n:<3d} env steps, steps per CPU-second: library {steps / seconds['library']:.0f}  "
        f"batched {steps / seconds['batched']:.0f}  ratio to library {seconds['library'] / seconds['batched']:.2f}x"
    )


STAGES = {
    "step": minibatch_step,
    "forward": collection_forwards,
    "update": update_stage,
    "influence": influence_stage,
    "envs": env_steps,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["frozenlake", "acrobot"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 4, 16], help="N, the seeds per stack")
    parser.add_argument("--n-steps", type=int, default=2048, help="records per round (the update stage)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--stages", nargs="+", choices=list(STAGES), default=list(STAGES))
    args = parser.parse_args()
    torch.set_num_threads(1)
    for env in args.envs:
        for stage in args.stages:
            for n in args.seeds:
                STAGES[stage](env, n, args.n_steps, args.reps)


if __name__ == "__main__":
    main()
