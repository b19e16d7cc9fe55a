"""The stable-baselines3 drop-in and the public attribution API: SB3's own policy and buffer, scored
against an explicit per-record autograd reference; the drop set; the minibatches; mode none = stock SB3."""

from __future__ import annotations

import importlib.util
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.base_class import BaseAlgorithm  # noqa: E402
from stable_baselines3.common.buffers import RolloutBuffer  # noqa: E402

from rlinfluence.attribution import drop_set, record_influence  # noqa: E402
from rlinfluence.sb3 import IIFDictRolloutBuffer, IIFRolloutBuffer, InfluenceFilter, sb3_policy, sb3_records  # noqa: E402


class TinyImageEnv(gym.Env):
    """36×36 grey frames (NatureCNN's smallest input); the reward depends on the action and the frame."""

    observation_space = gym.spaces.Box(0, 255, (36, 36, 1), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        frame = self._frame()
        self.t += 1
        reward = float(action == frame.mean() // 86)
        return frame, reward, self.t >= 8, False, {}

    def _frame(self):
        return self.np_random.integers(0, 256, (36, 36, 1), dtype=np.uint8)


class TinyDictEnv(gym.Env):
    """A Dict observation (a vector and a discrete mode, as SB3's MultiInputPolicy takes them); the reward
    depends on the action, the mode and the vector."""

    observation_space = gym.spaces.Dict(
        {"position": gym.spaces.Box(-1, 1, (3,), np.float32), "mode": gym.spaces.Discrete(2)}
    )
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action):
        observation = self._observation()
        self.t += 1
        reward = float(action == (observation["mode"] + (observation["position"][0] > 0)))
        return observation, reward, self.t >= 8, False, {}

    def _observation(self):
        return {
            "position": self.np_random.uniform(-1, 1, 3).astype(np.float32),
            "mode": int(self.np_random.integers(2)),
        }


def make_ppo(env_name: str, n_envs: int = 1, **kwargs) -> PPO:
    policies = {
        "CartPole-v1": ("MlpPolicy", lambda: gym.make("CartPole-v1"), {}),
        "TinyDict": ("MultiInputPolicy", TinyDictEnv, {}),
        "Pendulum-v1": ("MlpPolicy", lambda: gym.make("Pendulum-v1"), {}),
        "TinyImage": ("CnnPolicy", TinyImageEnv, {"features_extractor_kwargs": {"features_dim": 32}}),
    }
    policy, make_env, policy_kwargs = policies[env_name]
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env(make_env, n_envs=n_envs, seed=0)
    settings: dict[str, Any] = {
        "n_steps": 32,
        "batch_size": 16,
        "n_epochs": 2,
        "seed": 0,
        "policy_kwargs": policy_kwargs,
        "rollout_buffer_class": IIFRolloutBuffer,
    } | kwargs
    return PPO(policy, env, **settings)


class CapturingFilter(InfluenceFilter):
    """Also keeps θ_k and the round's records, for the reference to recompute the scores from."""

    def _on_rollout_end(self):
        import copy

        assert isinstance(self.model, PPO)  # BaseCallback's model is any algorithm; the drop-in's is PPO
        self.policy_at_k = copy.deepcopy(self.model.policy)
        self.records = sb3_records(self.model.rollout_buffer, self.model.action_space, self.model.device)
        super()._on_rollout_end()


STATE, ACTION = np.array([0.01, -0.02, 0.03, 0.0], np.float32), 1  # CartPole's s*, a* for f_action
DICT_STATE = {"position": np.array([0.5, -0.1, 0.2], np.float32), "mode": np.array([1.0], np.float32)}  # TinyDict's


def rows(obs, ids):
    """Records `ids` of a tensor or of every key of a dict of tensors (SB3's Dict layout)."""
    return {key: value[ids] for key, value in obs.items()} if isinstance(obs, dict) else obs[ids]


def state_batch(state):
    if isinstance(state, dict):
        return {key: torch.as_tensor(value)[None] for key, value in state.items()}
    return torch.as_tensor(state)[None]


def reference_scores(
    policy, records, ent_coef: float, clip_range: float, target: str = "return", state=STATE
) -> torch.Tensor:
    """The definition with SB3's own evaluate_actions: one backward pass per record, dotted with ∇L_f."""
    params = [p for p in policy.parameters() if p.requires_grad]
    obs, actions, old_log_probs, advantages = (
        records[k] for k in ("observations", "actions", "old_log_probs", "advantages")
    )

    def grad(loss):
        return [
            torch.zeros_like(p) if g is None else g
            for p, g in zip(params, torch.autograd.grad(loss, params, allow_unused=True))
        ]

    if target == "return":  # f_return over the records, raw advantages
        _, log_prob, _ = policy.evaluate_actions(obs, actions)
        target_grad = grad(-(advantages * log_prob).mean())
    else:  # f_action = log π(a*|s*)
        _, log_prob, _ = policy.evaluate_actions(state_batch(state), torch.tensor([ACTION]))
        target_grad = grad(-log_prob.sum())
    normalized = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    scores = torch.empty(len(advantages), dtype=torch.float64)
    for i in range(len(advantages)):
        _, log_prob_i, entropy_i = policy.evaluate_actions(rows(obs, slice(i, i + 1)), actions[i : i + 1])
        ratio = torch.exp(log_prob_i - old_log_probs[i])
        clipped = torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
        loss = -torch.min(ratio * normalized[i], clipped * normalized[i]) - ent_coef * entropy_i
        scores[i] = sum((g.double() * t.double()).sum() for g, t in zip(grad(loss.sum()), target_grad))
    return scores


@pytest.mark.parametrize(
    ("env_name", "n_envs", "target"),
    [
        ("CartPole-v1", 2, "return"),
        ("CartPole-v1", 1, "action"),
        ("Pendulum-v1", 1, "return"),
        ("TinyImage", 1, "return"),
        ("TinyDict", 2, "return"),
        ("TinyDict", 2, "action"),
    ],
)
def test_dropin_scores_equal_per_record_autograd_on_sb3s_policy(env_name, n_envs, target):
    model = make_ppo(env_name, n_envs, n_steps=24, batch_size=12, ent_coef=0.01)
    state = DICT_STATE if env_name == "TinyDict" else STATE
    callback = CapturingFilter(mode="iif", p=50, target=target, target_state=state, target_action=ACTION)
    model.learn(24 * n_envs, callback=callback)
    fast = callback.rounds[0]["scores"]
    slow = reference_scores(callback.policy_at_k, callback.records, 0.01, 0.2, target, state).numpy()
    assert len(fast) == 24 * n_envs
    assert (slow < 0).any() and (slow > 0).any()
    assert np.abs(fast - slow).max() <= 1e-6 * np.abs(slow).max()


def test_the_api_scores_any_torch_policy_and_a_user_target():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))

    def policy(obs):
        return torch.distributions.Categorical(logits=net(obs))

    obs, actions = torch.randn(40, 5), torch.randint(0, 3, (40,))
    with torch.no_grad():
        old_log_probs = policy(obs).log_prob(actions)
    records = {"observations": obs, "actions": actions, "old_log_probs": old_log_probs, "advantages": torch.randn(40)}
    validation = {"observations": torch.randn(40, 5), "actions": actions, "advantages": torch.randn(40)}

    def validation_loss(params):  # f_return on another buffer, written by hand as a user target
        logits = torch.func.functional_call(net, params, (validation["observations"],))
        log_prob = torch.distributions.Categorical(logits=logits).log_prob(validation["actions"])
        return -(validation["advantages"] * log_prob).mean()

    by_name = record_influence(policy, net, records, "return", target_records=validation, chunk_size=7)
    by_function = record_influence(policy, net, records, validation_loss)
    assert np.allclose(by_name, by_function, rtol=1e-5, atol=1e-7)
    action = record_influence(policy, net, records, "action", target_state=np.zeros(5), target_action=1)
    assert action.shape == (40,) and not np.allclose(action, by_name)


def test_drop_set_is_the_most_negative_share_of_the_negatives():
    scores = np.array([0.3, -2.0, -0.1, 0.0, -5.0, -0.7, 1.0, -0.2])  # 5 negatives
    assert drop_set(scores, 50).tolist() == [1, 4]  # ⌊5·0.5⌋ = 2: the −5 and the −2
    assert drop_set(scores, 100).tolist() == [1, 2, 4, 5, 7]
    assert len(drop_set(scores, 50, "random", np.random.default_rng(0))) == 2
    assert drop_set(scores, 50, "none").size == 0


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: drop_set(np.zeros(3), 50, "worst"), "mode='worst'"),
        (lambda: drop_set(np.zeros(3), 0), "p=0"),
        (lambda: InfluenceFilter(p=150), "p=150"),
        (lambda: InfluenceFilter(target="value"), "target='value'"),
        (lambda: InfluenceFilter(target="action"), "target='action' needs target_state"),
        (lambda: InfluenceFilter(mode="random", p="auto"), "p=auto is for mode=iif"),
    ],
)
def test_bad_settings_are_refused_in_one_line_naming_the_argument(call, names):
    with pytest.raises(ValueError, match=names) as refused:
        call()
    assert "\n" not in str(refused.value)


# How the IIF buffer gets into the model: named when it is built, or (None: PPO's stock buffer) swapped in by the
# callback alone, as rl-zoo's YAML, which can name callbacks but no buffer class, has it.
BUFFER_CLASSES = pytest.mark.parametrize("rollout_buffer_class", [IIFRolloutBuffer, None], ids=["named", "callback"])


@BUFFER_CLASSES
def test_a_dict_observation_space_trains_two_rounds_with_its_drops_applied(rollout_buffer_class):
    model = make_ppo("TinyDict", n_envs=2, n_steps=32, batch_size=16, rollout_buffer_class=rollout_buffer_class)
    callback = CapturingFilter(mode="iif", p=60)
    model.learn(128, callback=callback)
    assert type(model.rollout_buffer).__name__ == "IIFDictRolloutBuffer"  # SB3's Dict layout, our drops
    assert [r["round"] for r in callback.rounds] == [1, 2]
    dropped = callback.rounds[-1]["dropped"]
    assert len(dropped) > 0 and set(callback.records["observations"]) == {"position", "mode"}
    buffer = model.rollout_buffer
    advantages = buffer.advantages.flatten()
    batches = [batch.advantages.numpy() for batch in buffer.get(model.batch_size)]
    kept = np.setdiff1d(np.arange(len(advantages)), dropped)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.sort(advantages[kept]))


def test_what_the_dropin_cannot_score_is_refused_before_the_first_rollout():
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env

    def cartpole_with_multi_discrete_actions():
        return gym.wrappers.TransformAction(gym.make("CartPole-v1"), lambda a: int(a[0]), gym.spaces.MultiDiscrete([2]))

    multi_discrete = make_vec_env(cartpole_with_multi_discrete_actions, n_envs=1)
    with pytest.raises(ValueError, match=r"action space MultiDiscrete\(\[2\]\) is not supported by rlinfluence.sb3"):
        PPO("MlpPolicy", multi_discrete, rollout_buffer_class=IIFRolloutBuffer)
    cartpole = make_vec_env("CartPole-v1", n_envs=1)
    others: list[tuple[str, BaseAlgorithm]] = [("stable_baselines3.A2C", A2C("MlpPolicy", cartpole, n_steps=8))]
    if importlib.util.find_spec("sb3_contrib"):  # the bench extra's
        from sb3_contrib import MaskablePPO, RecurrentPPO

        others += [
            ("sb3_contrib.RecurrentPPO", RecurrentPPO("MlpLstmPolicy", cartpole, n_steps=8)),
            ("sb3_contrib.MaskablePPO", MaskablePPO("MlpPolicy", cartpole, n_steps=8)),
        ]
    for name, algorithm in others:
        with pytest.raises(TypeError, match=f"needs stable_baselines3.PPO .*not {name} .*sb3-contrib"):
            algorithm.learn(8, callback=InfluenceFilter(mode="none"))
        assert algorithm.num_timesteps == 0  # refused before any rollout


@BUFFER_CLASSES
def test_minibatches_never_hold_a_dropped_record(rollout_buffer_class):
    model = make_ppo("CartPole-v1", n_envs=2, n_steps=64, batch_size=32, rollout_buffer_class=rollout_buffer_class)
    callback = CapturingFilter(mode="iif", p=60)
    model.learn(128, callback=callback)
    assert isinstance(model.rollout_buffer, IIFRolloutBuffer)
    assert model.rollout_buffer_class is (rollout_buffer_class or RolloutBuffer)  # what a saved model records
    scores, dropped = callback.rounds[0]["scores"], callback.rounds[0]["dropped"]
    assert dropped.tolist() == drop_set(scores, 60).tolist() and len(dropped) > 0
    buffer = model.rollout_buffer  # still the round's, flattened by SB3's order
    advantages = buffer.advantages.flatten()
    assert np.array_equal(advantages, callback.records["advantages"].numpy())  # our record ids are SB3's
    assert len(np.unique(advantages)) == len(advantages)  # an advantage identifies its record
    batches = [batch.advantages.numpy() for batch in buffer.get(model.batch_size)]
    kept = np.setdiff1d(np.arange(len(advantages)), dropped)
    assert len(batches) == -(-len(kept) // 32)
    assert np.array_equal(np.sort(np.concatenate(batches)), np.sort(advantages[kept]))


def test_a_rollout_buffer_other_than_sb3s_own_is_refused_not_replaced():
    class StepOrderBuffer(RolloutBuffer):  # a user's buffer whose own minibatches the IIF buffer would undo
        pass

    model = make_ppo("CartPole-v1", rollout_buffer_class=StepOrderBuffer)
    with pytest.raises(
        TypeError, match="RolloutBuffer or DictRolloutBuffer .* or IIFRolloutBuffer, not StepOrderBuffer"
    ):
        model.learn(32, callback=InfluenceFilter(mode="iif"))
    assert model.num_timesteps == 0 and type(model.rollout_buffer) is StepOrderBuffer


def final_parameters(mode: str | None) -> list[torch.Tensor]:
    if mode is None:
        from stable_baselines3.common.env_util import make_vec_env

        model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=1, seed=0), n_steps=64, batch_size=16, seed=0)
        model.learn(192)
    else:
        model = make_ppo("CartPole-v1", n_steps=64, batch_size=16, n_epochs=10, policy_kwargs={})
        model.learn(192, callback=InfluenceFilter(mode=mode, p=50))
    return [p.detach().clone() for p in model.policy.parameters()]


def test_attribution_only_leaves_sb3s_learning_bit_identical():
    stock = final_parameters(None)
    assert all(torch.equal(a, b) for a, b in zip(stock, final_parameters("none")))
    assert not all(torch.equal(a, b) for a, b in zip(stock, final_parameters("iif")))  # the check can see a drop


def test_the_callback_logs_its_rounds_to_sb3s_logger(tmp_path):
    import pandas as pd
    from stable_baselines3.common.logger import configure

    model = make_ppo("CartPole-v1", n_steps=32)
    model.set_logger(configure(str(tmp_path), ["csv"]))
    callback = InfluenceFilter(mode="random", p=50, seed=1)
    model.learn(64, callback=callback)
    assert [r["round"] for r in callback.rounds] == [1, 2]
    last = callback.rounds[-1]
    assert last["n_kept"] + last["n_dropped"] == 32 and last["n_dropped"] == last["n_negative"] // 2
    assert last["dropped_fraction"] == last["n_dropped"] / 32  # issue 57: p is a percent of the negatives only
    logged = pd.read_csv(tmp_path / "progress.csv")
    assert logged["influence/n_dropped"].tolist() == [r["n_dropped"] for r in callback.rounds]
    assert logged["influence/dropped_fraction"].tolist() == [r["dropped_fraction"] for r in callback.rounds]


def test_a_saved_model_records_the_public_buffer_path_and_loads(tmp_path):
    """Issue 57: saved models named the private rlinfluence.sb3.buffer.IIFRolloutBuffer."""
    import json
    import zipfile

    make_ppo("CartPole-v1").save(tmp_path / "model.zip")
    data = zipfile.ZipFile(tmp_path / "model.zip").read("data").decode()
    assert json.loads(data)["rollout_buffer_class"]["__module__"] == "rlinfluence.sb3"
    assert "rlinfluence.sb3.buffer" not in data
    assert type(PPO.load(tmp_path / "model.zip").rollout_buffer) is IIFRolloutBuffer


def test_a_dict_space_gets_the_exported_dict_buffer():
    assert type(make_ppo("TinyDict").rollout_buffer) is IIFDictRolloutBuffer


def test_sb3_policy_scores_a_model_as_the_callback_does():
    """Issue 57: SB3's policy object given to the API directly, through the documented two-line adapter."""
    model = make_ppo("Pendulum-v1", n_steps=24, batch_size=12)
    callback = CapturingFilter(mode="iif", p=50)
    model.learn(24, callback=callback)
    scores = record_influence(*sb3_policy(callback.policy_at_k), callback.records)
    np.testing.assert_array_equal(scores, callback.rounds[0]["scores"])
    assert sb3_policy(model)[1] is model.policy
    with pytest.raises(TypeError, match="sb3_policy takes an SB3 PPO model or an ActorCriticPolicy, not Linear"):
        sb3_policy(torch.nn.Linear(2, 2))  # type: ignore[arg-type]  # the misuse refused
