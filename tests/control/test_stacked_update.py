"""The control engine's update: N seeds' actor-critics stacked and updated together. Each seed starts as its own network
starts, takes a plainly written PPO update's step up to float rounding, and gets the same bits whether it is updated
alone or among others."""

import copy
from typing import cast

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from conftest import compose_config
from rlinfluence.control.engine import Seed, Stack
from rlinfluence.control.networks import ActorCritic
from rlinfluence.control.stacked_influence import stacked_influence_scores
from rlinfluence.control.stacked_networks import StackedActorCritic, StackedConv2d
from rlinfluence.control.stacked_optim import STACKED_OPTIMIZERS, StackedAdam, stacked_optimizer
from rlinfluence.control.stacked_update import clip_grad_norm_per_seed, stacked_ppo_update
from rlinfluence.influence import influence_scores
from rlinfluence.losses import normalize_advantages, normalize_rows, policy_loss_per_record, value_loss_per_record
from rlinfluence.records import RolloutBuffer
from rlinfluence.round import run_round
from rlinfluence.seeding import numpy_generator, spawn_streams, torch_generator
from rlinfluence.selection import Selection
from rlinfluence.targets import ReturnTarget
from rlinfluence.update import OPTIMIZERS, make_optimizer, minibatch_ids

SEEDS = list(range(17))  # N = 17: one past a power of two
N_STEPS = 200  # 7 minibatches of 32 (debug=smoke) per epoch, the last a smaller one


class Seeds:
    """17 seeds of one config: each seed's trainer and its round-1 records."""

    def __init__(self, env: str, *overrides: str):
        self.cfg = compose_config(["debug=smoke", f"env={env}", f"env.n_steps={N_STEPS}", *overrides])
        self.trainers = [Seed(self.with_seed(seed)) for seed in SEEDS]
        self.buffers = [trainer.collect(1) for trainer in self.trainers]
        # Kept sets of different sizes (IIF's are), one reweighted seed (td_error's sampling weights).
        draw = np.random.default_rng(0)
        self.selections = [Selection(keep=draw.random(N_STEPS) < draw.uniform(0.4, 1.0)) for _ in SEEDS]
        weights = draw.random(N_STEPS)
        self.selections[3] = Selection(keep=np.ones(N_STEPS, bool), weights=weights / weights.sum())
        self.alone: dict[int, tuple[dict[str, torch.Tensor], dict[str, float]]] = {}

    def updated_alone(self, seed: int) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
        if seed not in self.alone:
            self.alone[seed] = self.stacked_update([seed])[seed]
        return self.alone[seed]

    def with_seed(self, seed: int):
        cfg = copy.deepcopy(self.cfg)
        cfg.seed = seed
        return cfg

    def stack(self, seeds: list[int]) -> StackedActorCritic:
        envs = self.trainers[0].envs
        return StackedActorCritic.from_seeds(envs.observation_space, envs.action_space, self.cfg.env.network, seeds)

    def stacked_update(self, seeds: list[int]) -> dict[int, tuple[dict[str, torch.Tensor], dict[str, float]]]:
        """Seed → (its parameters, its statistics) after one stacked update of `seeds`, in that order."""
        model = self.stack(seeds)
        seed_optimizers = [(self.trainers[seed].model, self.trainers[seed].optimizer) for seed in seeds]
        stats = stacked_ppo_update(
            model,
            stacked_optimizer(self.cfg.optimizer.name, model, seed_optimizers, self.cfg.optimizer.lr),
            [self.buffers[seed] for seed in seeds],
            [self.selections[seed] for seed in seeds],
            self.cfg.ppo,
            [shuffle_rng(seed) for seed in seeds],
        )
        return {seed: (model.seed_state_dict(i), stats[i]) for i, seed in enumerate(seeds)}


def reference_update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    buffer: RolloutBuffer,
    selection: Selection,
    ppo,
    rng: np.random.Generator,
) -> dict[str, float]:
    """The oracle: SB3's PPO update of one network written plainly (nn.Linear layers, torch's optimizer, one
    global clip), to check the stack's arithmetic against."""
    buffer = buffer.to(model.device)
    # Read the settings once: a DictConfig lookup in the hot loop costs as much as a small layer.
    clip_range, ent_coef, vf_coef = float(ppo.clip_range), float(ppo.ent_coef), float(ppo.vf_coef)
    max_grad_norm = ppo.max_grad_norm
    normalize, drop_last = bool(ppo.normalize_advantage), bool(ppo.drop_last_minibatch)
    sums = torch.zeros(5, device=model.device)  # policy loss, value loss, entropy, approx KL, clip fraction
    n_minibatches = 0
    for _ in range(ppo.n_epochs):
        for ids in minibatch_ids(selection, ppo.batch_size, rng, drop_last):
            ids = ids.to(model.device)
            head_out, values = model(buffer.obs[ids])
            log_prob, entropy = model.action_head.log_prob_entropy(head_out, buffer.actions[ids])
            advantages = buffer.advantages[ids]
            if normalize:
                advantages = normalize_advantages(advantages)
            policy_loss = policy_loss_per_record(
                log_prob, buffer.log_probs[ids], advantages, clip_range, entropy, ent_coef
            ).mean()
            value_loss = value_loss_per_record(values, buffer.returns[ids]).mean()
            loss = policy_loss + vf_coef * value_loss

            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if max_grad_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()

            with torch.no_grad():
                log_ratio = log_prob - buffer.log_probs[ids]
                sums += torch.stack(
                    [
                        policy_loss,
                        value_loss,
                        entropy.mean(),
                        ((log_ratio.exp() - 1) - log_ratio).mean(),
                        ((log_ratio.exp() - 1).abs() > clip_range).float().mean(),
                    ]
                )
            n_minibatches += 1
    means = (sums / max(n_minibatches, 1)).tolist()
    keys = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
    return dict(zip(keys, means)) | {"gradient_steps": n_minibatches}


def shuffle_rng(seed: int) -> np.random.Generator:
    return numpy_generator(spawn_streams(seed)["shuffle"])  # the trainer's shuffle_rng, fresh


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest's: a run's torch_threads


@pytest.fixture(
    scope="module",
    params=["frozenlake", "acrobot", "acrobot optimizer=adam", "doorkey", "gym env.id=Pendulum-v1", "bipedalwalker"],
)  # MLPs and a CNN (MiniGrid's, on DoorKey), SGD and Adam (DoorKey's, BipedalWalker's); categorical and Gaussian heads
def seeds(request, one_thread) -> Seeds:
    # max_grad_norm 0.5 clips (Acrobot's value loss alone is in the hundreds): per seed, or the seeds would mix.
    env, *overrides = request.param.split()
    return Seeds(env, "ppo.max_grad_norm=0.5", *overrides)


def test_each_seeds_slice_starts_as_that_seeds_own_network(seeds):
    stacked = seeds.stack([7, 12, 2])
    for i, seed in enumerate([7, 12, 2]):
        own = seeds.trainers[seed].model.state_dict()
        mine = stacked.seed_state_dict(i)
        assert mine.keys() == own.keys()
        assert all(torch.equal(mine[name], own[name]) for name in own)


def test_one_stacked_seed_takes_a_plain_ppo_update_up_to_float_rounding(seeds):
    """Not bit-for-bit: baddbmm's kernels round unlike nn.Linear's addmm (control/stacked_networks.py). The same
    minibatches in the same order, so the parameters after 10 epochs differ in the last bits only."""
    for seed in (0, 3):  # a kept-set seed and the reweighted one
        trainer = seeds.trainers[seed]
        model = copy.deepcopy(trainer.model)
        start = {name: value.clone() for name, value in model.state_dict().items()}
        reference = reference_update(
            model,
            make_optimizer(seeds.cfg.optimizer, model.parameters()),  # a fresh one, as the stack's
            seeds.buffers[seed],
            seeds.selections[seed],
            seeds.cfg.ppo,
            shuffle_rng(seed),
        )
        parameters, stats = seeds.updated_alone(seed)
        assert stats["gradient_steps"] == reference["gradient_steps"] > 0
        assert stats == pytest.approx(reference, rel=1e-4, abs=1e-7)
        for name, value in model.state_dict().items():
            assert not torch.equal(value, start[name]) or name.endswith("bias")  # the update moved it
            assert torch.allclose(parameters[name], value, rtol=0, atol=1e-6), name


@pytest.mark.parametrize(
    "batch", [[9, 5], [5, 0, 9], [1, 12, 7, 10, 14, 4, 5, 8, 0, 9, 2, 13, 11, 6, 3, 15], SEEDS, SEEDS[::-1]]
)  # N = 2, 3, 16, 17 against each seed alone (N = 1)
def test_a_seeds_update_is_bit_identical_alone_or_among_others_in_any_order(seeds, batch):
    together = seeds.stacked_update(batch)
    for seed in batch:
        alone_parameters, alone_stats = seeds.updated_alone(seed)
        parameters, stats = together[seed]
        assert stats == alone_stats
        assert all(torch.equal(parameters[name], alone_parameters[name]) for name in alone_parameters), seed


def test_each_seed_is_scored_at_its_own_theta_as_its_network_alone_and_among_others(seeds):
    """Round-start influence on the agent's target (f_return): each row is the scores of that seed's own network
    on its records up to float rounding, and the same bits whether the seed is scored alone or in a stack."""
    target, ppo = seeds.trainers[0].target, seeds.cfg.ppo

    def scores(batch: list[int], chunk_size: int) -> torch.Tensor:
        return stacked_influence_scores(
            seeds.stack(batch), [seeds.buffers[seed] for seed in batch], target, ppo, chunk_size
        )

    together = scores([5, 0, 9], 64)  # 64: four chunks of the 200 records
    for row, seed in zip(together, [5, 0, 9]):
        own = influence_scores(seeds.trainers[seed].model, seeds.buffers[seed], target, ppo)
        assert torch.allclose(row, own, rtol=1e-4, atol=1e-7)
        assert torch.equal(row, scores([seed], 64)[0])
        assert torch.equal(row, scores([seed], 4096)[0])  # one chunk or several: the same bits
    every = scores(SEEDS[::-1], 64)
    assert torch.equal(every[SEEDS[::-1].index(0)], together[1])


@pytest.mark.parametrize("env", ["frozenlake", "acrobot", "gym env.id=Pendulum-v1"])
def test_iifs_scores_at_a_later_theta_are_the_trainers_influence_alone_and_among_three(env, one_thread):
    """IIF's round-2 scores as the stacked engine computes them (Stack.attribute's call) against each seed's own
    (Trainer.influence: round_attribution with the run's influence settings), on the same records at the same θ_2,
    which round 1 made (IIF's selection and update); seed 1 alone (N = 1) and among seeds 0-2 (N = 3)."""
    cfg = compose_config(["debug=smoke", *f"env={env}".split(), "method=iif", f"env.n_steps={N_STEPS}"])
    trainers = []
    for seed in range(3):
        seed_cfg = copy.deepcopy(cfg)
        seed_cfg.seed = seed
        trainers.append(Seed(seed_cfg))
    for trainer in trainers:
        assert run_round(Stack([trainer]), 1)[0]["n_kept"] < N_STEPS  # IIF dropped records before θ_2
    records = [trainer.collect(2) for trainer in trainers]
    own = [trainer.influence(buffer) for trainer, buffer in zip(trainers, records)]
    first = trainers[0]
    for batch in ([1], [0, 1, 2]):
        stacked = stacked_influence_scores(
            StackedActorCritic([trainers[seed].model for seed in batch]),
            [records[seed] for seed in batch],
            first.target,
            first.ppo_settings(2),
            first.cfg.influence.chunk_size,
        )
        for row, seed in zip(stacked.numpy(), batch):
            scale = np.abs(own[seed]).max()
            assert scale > 0
            # a score sums products over the parameters, so its rounding is of the largest scores' size (a few float32
            # epsilons of it, ~4e-7 as measured), however small the score itself: Pendulum's have both
            np.testing.assert_allclose(row, own[seed], rtol=1e-4, atol=1e-6 * scale, err_msg=f"seed {seed} of {batch}")


def test_the_stacked_engine_refuses_what_it_cannot_run_in_one_line():
    net = compose_config(["env=acrobot"]).env.network
    model = StackedActorCritic.from_seeds(gym.spaces.Box(-1.0, 1.0, (6,)), gym.spaces.Discrete(3), net, [0, 1])
    with pytest.raises(ValueError, match="^observations for 3 seeds, the stack runs 2$"):
        model(torch.zeros(3, 4, 6))
    cfg = compose_config(["env=acrobot"])
    seed = ActorCritic(gym.spaces.Box(-1.0, 1.0, (6,)), gym.spaces.Discrete(3), net, torch.Generator())
    decaying = torch.optim.Adam(seed.parameters(), weight_decay=0.1)
    with pytest.raises(ValueError, match="^the stacked update runs Adam without weight decay, amsgrad or maximize$"):
        StackedAdam(model, [(seed, decaying)] * 2, 1e-3)
    sgd = stacked_optimizer("sgd", model, [], 1e-3)
    assert STACKED_OPTIMIZERS.keys() == OPTIMIZERS.keys()  # every optimizer.name runs stacked
    with pytest.raises(ValueError, match="^0 buffers, 0 selections and 1 generators for 2 seeds$"):
        stacked_ppo_update(model, sgd, [], [], cfg.ppo, [shuffle_rng(0)])
    uneven = [RolloutBuffer(*[torch.zeros(size)] * 11) for size in (2, 3)]
    keep_all = [Selection(np.ones(len(buffer), dtype=bool)) for buffer in uneven]
    with pytest.raises(ValueError, match=r"^the seeds' buffers must hold as many records each; they hold \[2, 3\]$"):
        stacked_ppo_update(model, sgd, uneven, keep_all, cfg.ppo, [shuffle_rng(0), shuffle_rng(1)])
    with pytest.raises(ValueError, match=r"^1 buffers \(of sizes \[0\]\) for 2 seeds$"):
        stacked_influence_scores(model, [RolloutBuffer(*[torch.zeros(0)] * 11)], ReturnTarget(), cfg.ppo)


def test_stacked_adam_steps_each_seed_as_torch_adam_steps_it_alone():
    """Seeds stepping in different minibatches (different counts): each one's parameters and Adam state after
    every step are torch.optim.Adam's on that seed alone, a seed that sits a step out moves nothing, and the
    state kept in each seed's optimizer carries into the next round's stack."""
    cfg = compose_config(["env=minigrid", "optimizer=adam", "optimizer.lr=0.01"])  # a CNN and an MLP
    space, actions = gym.spaces.Box(0, 255, (3, 7, 7), np.uint8), gym.spaces.Discrete(3)
    seeds = [4, 1, 7]
    alone = [ActorCritic(space, actions, cfg.env.network, torch_generator(spawn_streams(s)["network"])) for s in seeds]
    torch_adams = [make_optimizer(cfg.optimizer, model.parameters()) for model in alone]
    mine = [copy.deepcopy(model) for model in alone]  # each seed's network and optimizer in the engine
    mine_adams = [make_optimizer(cfg.optimizer, model.parameters()) for model in mine]
    draw = torch.Generator().manual_seed(0)
    for schedule in ([[0, 1, 2], [0, 2], [2], [1]], [[1], [0, 1, 2], [2, 0]]):  # a round, then the next
        stack = StackedActorCritic(mine)
        adam = StackedAdam(stack, list(zip(mine, mine_adams)), cfg.optimizer.lr)
        for stepping in schedule:
            grads = [
                {key: torch.randn(p.shape, generator=draw) for key, p in model.named_parameters()} for model in alone
            ]
            for k in stepping:
                for key, p in alone[k].named_parameters():
                    p.grad = grads[k][key]
                torch_adams[k].step()
            for key, layer, attr in stack.seed_parameters():  # every seed has a gradient; only `stepping` step
                getattr(layer, attr).grad = layer.stacked(attr, [seed_grads[key] for seed_grads in grads])
            adam.step(stepping)
            for k, model in enumerate(alone):
                parameters = stack.seed_state_dict(k)
                for key, value in model.state_dict().items():
                    assert torch.allclose(parameters[key], value, rtol=1e-6, atol=1e-9), (k, key)
        for k, model in enumerate(mine):
            model.load_state_dict(stack.seed_state_dict(k))
        adam.keep(list(zip(mine, mine_adams)))
        for k in range(len(seeds)):
            kept, expected = mine_adams[k].state_dict(), torch_adams[k].state_dict()
            assert kept["param_groups"] == expected["param_groups"]
            for index, state in expected["state"].items():
                assert torch.equal(kept["state"][index]["step"], state["step"])
                for moment in ("exp_avg", "exp_avg_sq"):
                    assert torch.allclose(kept["state"][index][moment], state[moment], rtol=1e-6, atol=1e-12)
    assert [int(adam_state["state"][0]["step"]) for adam_state in (a.state_dict() for a in torch_adams)] == [4, 4, 5]


IMAGE_NETWORKS = [("minigrid", (3, 7, 7), 11), ("pong", (4, 84, 84), 256)]  # the CNN, and Pong's nature_cnn (strided)


@pytest.mark.parametrize("env, shape, levels", IMAGE_NETWORKS)
def test_each_seeds_convolutions_are_engine_defaults_bit_for_bit(env, shape, levels):
    """A seed's convolutions in the stack are its own conv2d, engine=default's layers' bits."""
    cfg = compose_config([f"env={env}"])
    space, actions = gym.spaces.Box(0, 255, shape, np.uint8), gym.spaces.Discrete(3)
    stack = StackedActorCritic.from_seeds(space, actions, cfg.env.network, [4, 1, 7])
    draw = torch.Generator().manual_seed(0)
    images = torch.randint(0, levels, (3, 20, *shape), generator=draw, dtype=torch.uint8)
    convolutions_end = [isinstance(layer, torch.nn.Flatten) for layer in stack.features].index(True) + 1
    stacked = images
    for layer in list(stack.features)[:convolutions_end]:  # scale, each conv and its ReLU, flatten
        stacked = layer(stacked, None) if isinstance(layer, StackedConv2d) else layer(stacked)
    for k, seed in enumerate([4, 1, 7]):
        alone = ActorCritic(space, actions, cfg.env.network, torch_generator(spawn_streams(seed)["network"]))
        convolutions = cast(torch.nn.Sequential, alone.features)[0]
        assert torch.equal(stacked[k], convolutions(images[k]))


@pytest.mark.parametrize("env, shape, levels", IMAGE_NETWORKS)
def test_an_image_networks_seed_gives_the_same_bits_alone_or_among_others(env, shape, levels):
    cfg = compose_config([f"env={env}"])
    space, actions = gym.spaces.Box(0, 255, shape, np.uint8), gym.spaces.Discrete(6)
    images = torch.randint(0, levels, (3, 20, *shape), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    among = StackedActorCritic.from_seeds(space, actions, cfg.env.network, [4, 1, 7])(images)
    alone = StackedActorCritic.from_seeds(space, actions, cfg.env.network, [1])(images[1:2])
    assert all(torch.equal(mine[1], its[0]) for mine, its in zip(among, alone))


def test_a_seeds_gradient_clip_is_the_same_alone_or_among_others():
    """The clip's norm over a seed's 18 parameters (the CNN's) reduces each seed's norms in one order at any N."""
    draw = torch.Generator().manual_seed(0)
    grads = [torch.randn(len(SEEDS), 5, generator=draw) * torch.rand(1, generator=draw) for _ in range(18)]

    def clipped(seeds: list[int]) -> list[torch.Tensor]:
        parameters = [torch.nn.Parameter(torch.zeros(len(seeds), 5)) for _ in grads]
        for parameter, grad in zip(parameters, grads):
            parameter.grad = grad[seeds].clone()
        clip_grad_norm_per_seed(parameters, 0.5)
        return [cast(torch.Tensor, parameter.grad) for parameter in parameters]

    together = clipped(SEEDS)
    assert not torch.equal(together[0], grads[0])  # it clips
    for k in SEEDS:
        assert all(torch.equal(alone[0], among[k]) for alone, among in zip(clipped([k]), together)), k


@pytest.mark.parametrize("size", [1, 2, 3, 63, 64, 257, 2048])
def test_advantages_are_normalised_per_seed_row_as_each_seed_alone(size, one_thread):
    """The stacked update normalises its [seeds, minibatch] advantages in one call: each row gets the bits its
    seed's minibatch gets alone, equal advantages exact zeros and a lone record unchanged, at any N."""
    draw = torch.Generator().manual_seed(size)
    advantages = torch.randn(16, size, generator=draw) * torch.rand(16, 1, generator=draw) * 40 + 0.3
    advantages[3] = 0.7  # all equal
    advantages[5, : size // 2] = advantages[5, 0]
    for n in (1, 3, 16):
        rows = normalize_rows(advantages[:n])
        for k in range(n):
            assert torch.equal(rows[k], normalize_advantages(advantages[k])), (n, k)
    assert torch.equal(normalize_rows(advantages)[3], torch.zeros(size) if size > 1 else advantages[3])
