"""The paper's environments: settings, preprocessing, state keys, and a 2-round run of every
env × method pair the paper uses (plus Pong), all through the real Hydra config."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from highway_env.envs.common.abstract import AbstractEnv
from minigrid.minigrid_env import MiniGridEnv

from conftest import compose_config, metrics_rows, one_network_rollout
from rlinfluence.cli import run_task
from rlinfluence.control.collect import TrainEnvs
from rlinfluence.control.networks import ActorCritic, GaussianHead
from rlinfluence.envs.make import make_env
from rlinfluence.influence import influence_scores, reference_scores
from rlinfluence.seeding import torch_generator
from rlinfluence.targets import ActionTarget, ReturnTarget

# Shrink what is slow at the tiny budget: highway's 40-step episodes (the evaluation plays them out),
# and Pong's games of thousands of steps (a time limit on the emulator frames; ALE also reloads its ROM
# on every seeded reset, ~0.2 s), and BipedalWalker's 1,600-step episodes of a policy that stands still.
SHRINK = {
    "highway": ["env.n_steps=16", "ppo.batch_size=8", "+env.make_kwargs.config.duration=4", "eval.episodes=1"],
    "pong": [
        "env.n_envs=2",
        "env.n_steps=16",
        "ppo.batch_size=16",
        "+env.make_kwargs.max_episode_steps=200",
        "eval.episodes=1",
    ],
    "bipedalwalker": ["+env.make_kwargs.max_episode_steps=50"],
}


def env_config(env: str, *overrides: str):
    return compose_config(["debug=smoke", f"env={env}"] + SHRINK.get(env, []) + list(overrides))


# ---------------------------------------------------------------- settings and spaces


@pytest.mark.parametrize(
    "env,obs_shape,obs_dtype,action_space",
    [
        ("highway", (5, 5), np.float32, gym.spaces.Discrete(5)),
        ("bipedalwalker", (24,), np.float32, gym.spaces.Box(-1, 1, (4,), np.float32)),
        ("pong", (4, 84, 84), np.uint8, gym.spaces.Discrete(6)),
    ],
)
def test_env_spaces(env, obs_shape, obs_dtype, action_space):
    made = make_env(compose_config([f"env={env}"]).env)
    obs, _ = made.reset(seed=0)
    assert made.observation_space.shape == obs.shape == obs_shape and obs.dtype == obs_dtype
    assert made.action_space == action_space
    made.close()


def test_highway_is_the_papers_task_at_5_hz():
    highway = make_env(compose_config(["env=highway"]).env).unwrapped
    assert isinstance(highway, AbstractEnv)  # highway-env's (untyped): its config
    config = highway.config
    assert config["observation"]["type"] == "Kinematics" and config["action"]["type"] == "DiscreteMetaAction"
    assert config["vehicles_count"] == 10
    # highway-v0's task (the -fast variant would change lanes, duration and ego spacing) ...
    assert (config["lanes_count"], config["duration"]) == (4, 40)
    assert (config["policy_frequency"], config["ego_spacing"]) == (1, 2)
    assert config["simulation_frequency"] == 5  # ... with -fast's physics step


def test_pong_is_the_zoo_atari_setup():
    cfg = compose_config(["env=pong"])
    assert (cfg.env.n_envs, cfg.env.n_steps, cfg.ppo.batch_size, cfg.ppo.n_epochs) == (8, 128, 256, 4)
    assert (cfg.optimizer.name, cfg.optimizer.lr, cfg.ppo.clip_range, cfg.ppo.ent_coef, cfg.ppo.vf_coef) == (
        "adam",
        2.5e-4,
        0.1,
        0.01,
        0.5,
    )
    model = ActorCritic(
        gym.spaces.Box(0, 255, (4, 84, 84), np.uint8),
        gym.spaces.Discrete(6),
        cfg.env.network,
        torch.Generator().manual_seed(0),
    )
    assert sum(p.numel() for p in model.parameters()) == 1_687_719  # SB3's CnnPolicy on Pong has the same count
    # The frame stack moves: after a step the newest frame differs from the oldest.
    env = make_env(cfg.env)
    env.reset(seed=0)
    for _ in range(10):
        obs, *_ = env.step(0)
    assert not np.array_equal(obs[0], obs[-1])


def test_env_file_picks_its_optimizer_and_the_command_line_wins():
    walker = compose_config(["env=bipedalwalker"])
    assert (walker.optimizer.name, walker.optimizer.lr) == ("adam", 3e-4)
    for overrides in (["env=bipedalwalker", "optimizer=sgd"], ["optimizer=sgd", "env=bipedalwalker"]):
        assert compose_config(overrides).optimizer.name == "sgd"
    assert compose_config(["env=frozenlake"]).optimizer.name == "sgd"


def test_bipedalwalker_budget():
    cfg = compose_config(["env=bipedalwalker"])
    assert (cfg.env.rounds * cfg.env.n_steps, cfg.method.p, cfg.eval.episodes) == (1_024_000, 6.25, 100)


# ---------------------------------------------------------------- state keys


def rollout(cfg, n_steps=64):
    envs = TrainEnvs(cfg.env, np.random.SeedSequence(0))
    model = ActorCritic(envs.observation_space, envs.action_space, cfg.env.network, torch.Generator().manual_seed(0))
    buffer = one_network_rollout(model, envs, n_steps, 0.99, 0.95, torch.Generator().manual_seed(0))
    envs.close()
    return buffer


def test_frozenlake_state_key_is_the_one_hot_state():
    buffer = rollout(compose_config(["env=frozenlake"]))
    assert torch.equal(buffer.state_keys, buffer.obs.argmax(1))


def test_minigrid_state_key_is_the_pose_behind_the_egocentric_view():
    buffer = rollout(compose_config(["env=minigrid"]), n_steps=200)
    keys = buffer.state_keys.numpy()
    views = buffer.obs.reshape(len(buffer), -1).numpy()
    for key in np.unique(keys):  # one pose, one view (Empty-8x8 has nothing else that changes)
        assert (views[keys == key] == views[keys == key][0]).all()
    # ... but not the other way round: distinct poses share a view, so the view is no state id.
    n_views = len(np.unique(views, axis=0))
    assert len(np.unique(keys)) > n_views


def test_the_minigrid_preset_replays_the_librarys_env_step_for_step():
    """Our Empty-8x8 (views looked up per pose, src/rlinfluence/envs/minigrid_view.py) against the library's,
    both through the preset's wrappers: same seeds and random actions (pickup/drop/toggle included),
    the same observation, reward and episode end at every step, through goals and time limits; and
    again after a pose is set by hand, as task=diagnose does."""
    library_id = "minigrid:MiniGrid-Empty-8x8-v0"
    ours = make_env(compose_config(["env=minigrid"]).env)
    stock = make_env(compose_config(["env=minigrid", f"env.id={library_id}"]).env)
    assert type(stock.unwrapped) is not type(ours.unwrapped)
    rng = np.random.default_rng(0)
    goals = time_limits = 0
    episode, done = 0, True
    for _ in range(12_000):
        if done:
            expected, _ = stock.reset(seed=episode)
            got, _ = ours.reset(seed=episode)
            assert np.array_equal(got, expected)
            episode += 1
        action = int(rng.choice(7, p=[0.3, 0.3, 0.3, 0.025, 0.025, 0.025, 0.025]))
        expected, reward, terminated, truncated, _ = stock.step(action)
        got, our_reward, our_terminated, our_truncated, _ = ours.step(action)
        assert np.array_equal(got, expected) and got.dtype == expected.dtype
        assert (our_reward, our_terminated, our_truncated) == (reward, terminated, truncated)
        goals += terminated
        time_limits += truncated and not terminated
        done = terminated or truncated
    assert goals > 20 and time_limits > 20
    for pose in ((3, 4, 2), (6, 6, 0), (1, 5, 3)):
        for env in (stock, ours):
            env.reset(seed=1)
            grid = env.unwrapped
            assert isinstance(grid, MiniGridEnv)  # both: ours subclasses the library's EmptyEnv
            grid.agent_pos, grid.agent_dir = pose[:2], pose[2]
        assert np.array_equal(ours.step(2)[0], stock.step(2)[0])


def test_envs_without_a_state_key_store_none():
    assert rollout(compose_config(["env=acrobot"]), n_steps=8).state_keys is None


# ---------------------------------------------------------------- influence on the new architectures


def real_buffer(env: str, n_steps: int, *overrides: str):
    cfg = env_config(env, f"env.n_steps={n_steps}", *overrides)
    envs = TrainEnvs(cfg.env, np.random.SeedSequence(1))
    model = ActorCritic(
        envs.observation_space, envs.action_space, cfg.env.network, torch_generator(np.random.SeedSequence(2))
    )
    if isinstance(model.action_head, GaussianHead):  # away from the init value, so its gradient is exercised
        with torch.no_grad():
            model.action_head.log_std.copy_(torch.tensor([-0.5, 0.2, -1.0, 0.4]))
    buffer = one_network_rollout(model, envs, n_steps, 0.99, 0.95, torch.Generator().manual_seed(3))
    envs.close()
    return cfg, model, buffer


def assert_exact(fast, slow):
    assert slow.abs().max() > 0 and (slow < 0).any() and (slow > 0).any()
    assert (fast - slow).abs().max() <= 1e-5 * slow.abs().max()


def test_gaussian_policy_influence_matches_the_per_record_reference_on_bipedalwalker():
    cfg, model, buffer = real_buffer("bipedalwalker", 64, "ppo.ent_coef=0.01")
    assert_exact(
        influence_scores(model, buffer, ReturnTarget(), cfg.ppo, chunk_size=24),
        reference_scores(model, buffer, ReturnTarget(), cfg.ppo),
    )
    target = ActionTarget.of(state=buffer.obs[5].tolist(), action=[0.5, -0.5, 0.0, 1.0])
    assert_exact(influence_scores(model, buffer, target, cfg.ppo), reference_scores(model, buffer, target, cfg.ppo))


def test_nature_cnn_influence_matches_the_per_record_reference_on_pong():
    cfg, model, buffer = real_buffer("pong", 6)  # 2 envs x 6 steps
    assert_exact(
        influence_scores(model, buffer, ReturnTarget(), cfg.ppo, chunk_size=5),
        reference_scores(model, buffer, ReturnTarget(), cfg.ppo),
    )


# ---------------------------------------------------------------- every env x method pair runs

MAIN = [
    (env, [f"method={m}"])
    for env in ("frozenlake", "acrobot", "minigrid", "highway", "lunarlander", "bipedalwalker")
    for m in ("ppo", "iif", "random")
]
ADAM = [(env, [f"method={m}", "optimizer=adam"]) for env in ("minigrid", "lunarlander") for m in ("ppo", "iif")]
HEURISTICS = [
    (env, ["method=advantage", f"method.variant={v}"]) for env in ("frozenlake", "minigrid") for v in ("h1", "h2")
] + [(env, ["method=td_error"]) for env in ("frozenlake", "lunarlander", "bipedalwalker")]
PONG = [("pong", [f"method={m}"]) for m in ("ppo", "iif")]


@pytest.mark.parametrize(
    "env,overrides",
    MAIN + ADAM + HEURISTICS + PONG,
    ids=lambda x: x if isinstance(x, str) else "-".join(o.split("=")[1] for o in x),
)
def test_env_method_pair_runs_two_rounds(tmp_path, env, overrides):
    cfg = env_config(env, *overrides)
    summary = run_task(cfg, tmp_path)
    assert summary["done"] and summary["rounds_completed"] == 2
    rows = metrics_rows(tmp_path)
    records = cfg.env.n_envs * cfg.env.n_steps
    for row in rows[1:]:
        assert int(row["n_records"]) == records and int(row["gradient_steps"]) > 0
        assert 0 < int(row["n_kept"]) <= records
        assert np.isfinite(float(row["policy_loss"])) and np.isfinite(float(row["test_return"]))
