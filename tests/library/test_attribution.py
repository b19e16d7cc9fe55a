"""The public attribution API's input contract (docs/api.md, attribution/inputs.py): every documented layout
gives the scores of the canonical one, everything else is one ValueError naming the key and the shapes;
drop_set's checks and p="auto"; and our scores against a peer's implementation (dattri's gradient dot products).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from rlinfluence.attribution import drop_set, record_influence
from rlinfluence.selection import best_drop_count

N = 24


def categorical_policy(seed: int = 0, obs_dim: int = 4, n_actions: int = 3):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(obs_dim, 16), torch.nn.Tanh(), torch.nn.Linear(16, n_actions))
    return net, lambda obs: torch.distributions.Categorical(logits=net(obs))


def gaussian_policy(act_dim: int, seed: int = 0, obs_dim: int = 4):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(obs_dim, 16), torch.nn.Tanh(), torch.nn.Linear(16, act_dim))
    log_std = torch.nn.Parameter(torch.full((act_dim,), -0.5))
    module = torch.nn.ModuleDict({"mean": net})
    module.register_parameter("log_std", log_std)
    return module, lambda obs: torch.distributions.Normal(net(obs), log_std.exp())


def make_records(policy, actions: torch.Tensor, n: int = N, seed: int = 1) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    obs = torch.randn(n, 4, generator=generator)
    with torch.no_grad():
        log_probs = policy(obs).log_prob(actions)
    old_log_probs = log_probs.sum(-1) if log_probs.ndim > 1 else log_probs
    return {"observations": obs, "actions": actions, "old_log_probs": old_log_probs, "advantages": torch.randn(n)}


@pytest.fixture
def discrete():
    net, policy = categorical_policy()
    return net, policy, make_records(policy, torch.randint(0, 3, (N,), generator=torch.Generator().manual_seed(2)))


def explicit_scores(policy, module, records, target_loss) -> np.ndarray:
    """The definition, one backward pass per record: ⟨∇ℓ_i, ∇L_f⟩, ℓ_i = −Â_i(normalised)·ratio at θ_k."""
    params = [p for p in module.parameters() if p.requires_grad]
    target_grad = torch.autograd.grad(target_loss(), params)
    adv = records["advantages"]
    normalized = (adv - adv.mean()) / (adv.std() + 1e-8)
    scores = []
    for i in range(len(adv)):
        log_prob = policy(records["observations"][i : i + 1]).log_prob(records["actions"][i : i + 1]).sum()
        loss = -torch.exp(log_prob - records["old_log_probs"][i]) * normalized[i]
        grads = torch.autograd.grad(loss, params)
        scores.append(sum(float((g * t).sum()) for g, t in zip(grads, target_grad)))
    return np.array(scores)


def test_scores_are_the_definition(discrete):
    net, policy, records = discrete

    def f_return_loss():
        log_prob = policy(records["observations"]).log_prob(records["actions"])
        return -(records["advantages"] * log_prob).mean()

    scores = record_influence(policy, net, records)
    expected = explicit_scores(policy, net, records, f_return_loss)
    assert scores.shape == (N,) and scores.dtype == np.float64
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-7 * np.abs(expected).max())


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(lambda r: r | {"advantages": r["advantages"][:, None]}, id="advantages (N, 1)"),
        pytest.param(lambda r: r | {"old_log_probs": r["old_log_probs"][:, None]}, id="old_log_probs (N, 1)"),
        pytest.param(lambda r: r | {"actions": r["actions"][:, None].float()}, id="SB3 actions (N, 1) float"),
        pytest.param(lambda r: {k: v.numpy() for k, v in r.items()}, id="numpy"),
        pytest.param(lambda r: {k: v.double() if v.is_floating_point() else v for k, v in r.items()}, id="float64"),
        pytest.param(
            lambda r: {k: v.numpy().astype(np.float64) if v.is_floating_point() else v.numpy() for k, v in r.items()},
            id="numpy float64",
        ),
    ],
)
def test_every_documented_layout_gives_the_canonical_scores(discrete, layout):
    net, policy, records = discrete
    canonical = record_influence(policy, net, records)
    np.testing.assert_allclose(record_influence(policy, net, layout(records)), canonical, rtol=1e-5, atol=1e-9)


def test_a_one_dimensional_box_takes_flat_or_column_actions():
    module, policy = gaussian_policy(act_dim=1)
    records = make_records(policy, torch.randn(N, 1))
    flat = records | {"actions": records["actions"][:, 0]}
    np.testing.assert_allclose(record_influence(policy, module, flat), record_influence(policy, module, records))


def with_value(key: str, value: float):
    return lambda r: r | {key: r[key].index_fill(0, torch.tensor([3]), value)}


BAD_RECORDS = {  # what a user might pass -> the refusal it gets
    "short advantages": (
        lambda r: r | {"advantages": r["advantages"][:-1]},
        r"records\['advantages'\] has shape \(23,\); it needs \(24,\)",
    ),
    "time-major advantages": (
        lambda r: r | {"advantages": r["advantages"].reshape(6, 4)},
        r"shape \(6, 4\); it needs \(24,\).*flatten \(T, n_envs",
    ),
    "short actions": (
        lambda r: r | {"actions": r["actions"][:-2]},
        r"records\['actions'\] has shape \(22,\); the policy's distribution takes \(24,\)",
    ),
    "2-D discrete actions": (
        lambda r: r | {"actions": r["actions"].reshape(4, 6)},
        r"records\['actions'\] has shape \(4, 6\)",
    ),
    "fractional actions": (lambda r: r | {"actions": r["actions"] + 0.5}, r"records\['actions'\] holds non-integer"),
    "NaN advantage": (with_value("advantages", float("nan")), r"records\['advantages'\] holds NaN or inf"),
    "inf log-prob": (with_value("old_log_probs", float("inf")), r"records\['old_log_probs'\] holds NaN or inf"),
    "empty": (lambda r: {k: v[:0] for k, v in r.items()}, r"records\['observations'\] has no rows"),
    "missing key": (lambda r: {k: v for k, v in r.items() if k != "advantages"}, "records lack advantages"),
    "strings": (lambda r: r | {"observations": [["a"] * 4] * N}, r"records\['observations'\] must be a numeric"),
}


@pytest.mark.parametrize(("change", "message"), BAD_RECORDS.values(), ids=BAD_RECORDS)
def test_bad_records_are_one_value_error_naming_the_key(discrete, change, message):
    net, policy, records = discrete
    with pytest.raises(ValueError, match=message) as refused:
        record_influence(policy, net, change(records))
    assert "\n" not in str(refused.value)


def test_a_gaussian_refuses_actions_of_another_width():
    module, policy = gaussian_policy(act_dim=2)
    records = make_records(policy, torch.randn(N, 2))
    with pytest.raises(
        ValueError, match=r"records\['actions'\] has shape \(24, 3\); the policy's distribution takes \(24, 2\)"
    ):
        record_influence(policy, module, records | {"actions": torch.randn(N, 3)})


def test_f_action_takes_a_flat_or_shaped_state_and_refuses_a_wrong_size(discrete):
    net, policy, records = discrete
    state = np.array([0.1, -0.2, 0.3, 0.0])
    flat = record_influence(policy, net, records, "action", target_state=state, target_action=2)
    shaped = record_influence(policy, net, records, "action", target_state=state[None], target_action=[2])

    def f_action_loss():
        return -policy(torch.tensor(state, dtype=torch.float32)[None]).log_prob(torch.tensor([2])).sum()

    np.testing.assert_allclose(flat, shaped)
    np.testing.assert_allclose(flat, explicit_scores(policy, net, records, f_action_loss), rtol=1e-4, atol=1e-9)
    with pytest.raises(ValueError, match=r"target_state has shape \(5,\) \(5 values\); the observations are \(4,\)"):
        record_influence(policy, net, records, "action", target_state=np.zeros(5), target_action=1)
    with pytest.raises(ValueError, match=r"target_action has shape \(2,\)"):
        record_influence(policy, net, records, "action", target_state=state, target_action=[1, 2])


def test_target_records_are_checked_as_records(discrete):
    net, policy, records = discrete
    validation = {k: records[k] for k in ("observations", "actions", "advantages")}
    with pytest.raises(ValueError, match=r"target_records\['advantages'\] has shape \(23,\); it needs \(24,\)"):
        record_influence(policy, net, records, target_records=validation | {"advantages": torch.randn(23)})


@pytest.mark.parametrize(
    ("scores", "p", "mode", "message"),
    [
        (np.zeros((3, 3)), 50, "iif", r"scores has shape \(3, 3\); it needs \(N,\)"),
        (np.array([]), 50, "iif", "scores is empty"),
        (np.array([1.0, np.nan]), 50, "iif", "scores must be finite"),
        (np.zeros(3), 0, "iif", r"p=0.0 must be in \(0, 100\] or auto"),
        (np.zeros(3), "auto", "random", r"p=auto must be in \(0, 100\] .*p=auto is for mode=iif"),
        (np.zeros(3), "auto", "iif", "p='auto' needs attribute="),
        (np.zeros(3), 50, "worst", "mode='worst' is not one of: iif, random, none"),
    ],
)
def test_drop_set_refuses_in_one_line(scores, p, mode, message):
    with pytest.raises(ValueError, match=message):
        drop_set(scores, p, mode)


def test_p_auto_through_the_api_is_the_held_out_rule(discrete):
    """The count p="auto" drops equals the rule re-derived here: split the buffer in two halves with the same
    RNG, score each record on the f_return of the half that does not hold it, drop the prefix of the
    most-negative-first candidates whose predicted held-out gain −Σ score is largest."""
    net, policy, records = discrete
    scores = record_influence(policy, net, records)
    attribute = partial(record_influence, policy, net, records)
    dropped = drop_set(scores, "auto", rng=np.random.default_rng(7), attribute=attribute)

    first = np.zeros(N, bool)
    first[np.random.default_rng(7).permutation(N)[: N // 2]] = True
    on_first, on_second = (
        record_influence(
            policy, net, records, target_records={k: v[torch.from_numpy(half)] for k, v in records.items()}
        )
        for half in (first, ~first)
    )
    held_out = np.where(first, on_second, on_first)
    order = np.argsort(scores, kind="stable")[: np.count_nonzero(scores < 0)]
    count = best_drop_count(held_out[order])
    assert sorted(dropped.tolist()) == sorted(order[:count].tolist())
    assert 0 < count < len(order)  # a case where the rule is neither "drop none" nor "drop every negative"


# ------------------------------------------------------------------ a peer's implementation: dattri


def test_scores_equal_dattris_gradient_dot_products(discrete):
    """dattri's TracIn attributor (one checkpoint, weight 1, unnormalised, identity projection) is the plain
    per-sample gradient dot product ⟨∇loss_i, ∇target_j⟩; with the per-record PPO loss at θ_k as its loss and
    −Â_j log π(a_j|s_j) as its target, our f_return score of record i is the mean over j of its row."""
    pytest.importorskip("dattri")
    from dattri.algorithm.tracin import TracInAttributor
    from dattri.task import AttributionTask
    from torch.func import functional_call
    from torch.utils.data import DataLoader, TensorDataset

    net, policy, records = discrete
    obs, actions, old, adv = (records[k] for k in ("observations", "actions", "old_log_probs", "advantages"))
    normalized = (adv - adv.mean()) / (adv.std() + 1e-8)

    def log_prob(params, ob, action):
        logits = functional_call(net, params, (ob[None],))
        return torch.distributions.Categorical(logits=logits).log_prob(action[None]).sum()

    def ppo_loss(params, sample):  # one record: the PPO policy loss at θ_k (ratio 1, clip inactive)
        ob, action, old_log_prob, advantage = sample
        return -torch.exp(log_prob(params, ob, action) - old_log_prob) * advantage

    def return_target(params, sample):  # one record's term of L_f = −mean_j Â_j log π(a_j|s_j)
        ob, action, advantage = sample
        return -advantage * log_prob(params, ob, action)

    task = AttributionTask(loss_func=ppo_loss, model=net, checkpoints=net.state_dict(), target_func=return_target)
    attributor = TracInAttributor(
        task=task, weight_list=torch.ones(1), normalized_grad=False, projector_kwargs={"proj_type": "identity"}
    )
    train = DataLoader(TensorDataset(obs, actions, old, normalized), batch_size=8)
    test = DataLoader(TensorDataset(obs, actions, adv), batch_size=8)
    theirs = attributor.attribute(train, test).mean(dim=1).double().numpy()

    ours = record_influence(policy, net, records)
    assert (ours < 0).any() and (ours > 0).any()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-6 * np.abs(theirs).max())


# ------------------------------------------------------------------ issue 55: wrong scores are refused, not returned


def test_a_distribution_with_a_batch_axis_in_front_is_refused(discrete):
    """Categorical(logits=net(obs)[None]) has batch shape (1, N): its scores were near zero, without an error."""
    net, _, records = discrete
    with pytest.raises(ValueError, match=r"policy\(observations\[:2\]\) gave a distribution of batch shape \(1, 2\)"):
        record_influence(lambda obs: torch.distributions.Categorical(logits=net(obs)[None]), net, records)


def test_a_policy_reading_parameters_outside_the_module_is_refused():
    """CleanRL's continuous agent with actor_mean as the module: actor_logstd was silently a constant."""
    module, policy = gaussian_policy(act_dim=2)
    records = make_records(policy, torch.randn(N, 2))
    with pytest.raises(
        ValueError, match=r"policy reads 1 tensor\(s\) requiring grad that module does not hold \(shapes \[\(2,\)\]\)"
    ):
        record_influence(policy, module["mean"], records)


def test_parameters_the_log_prob_does_not_read_are_refused(discrete):
    """A critic's parameters alone gave all-zero scores, so IIF dropped nothing."""
    net, policy, records = discrete
    agent = torch.nn.ModuleDict({"actor": net, "critic": torch.nn.Linear(4, 1)})
    with pytest.raises(
        ValueError, match=r"parameters=\['critic.weight', 'critic.bias'\] are none of .*every score would be exactly 0"
    ):
        record_influence(policy, agent, records, parameters=["critic.weight", "critic.bias"])
    np.testing.assert_array_equal(  # the actor chosen from the whole agent: the actor's own scores
        record_influence(
            policy, agent, records, parameters=["actor.0.weight", "actor.0.bias", "actor.2.weight", "actor.2.bias"]
        ),
        record_influence(policy, net, records),
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"clip_range": -1}, r"clip_range=-1 must be a finite number > 0 \(PPO's clip range ε; default 0.2\)"),
        ({"clip_range": 0}, r"clip_range=0 must be a finite number > 0"),
        (
            {"ent_coef": float("nan")},
            r"ent_coef=nan must be a finite number >= 0 \(the entropy bonus's weight; default 0\)",
        ),
        ({"ent_coef": "0.01"}, r"ent_coef='0.01' must be a finite number >= 0"),
    ],
)
def test_ppo_coefficients_out_of_range_are_refused(discrete, options, message):
    net, policy, records = discrete
    with pytest.raises(ValueError, match=message):
        record_influence(policy, net, records, **options)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"records": "actions 3 of 3"},
            r"records\['actions'\] holds actions outside the policy's distribution's support "
            r"IntegerInterval\(lower_bound=0, upper_bound=2\) \(1 of them, the first at record 5: 3\)",
        ),
        ({"target_action": 3}, r"target_action holds actions outside the policy's distribution's support"),
        ({"target_state": [0.0, np.nan, 0.0, 0.0]}, r"target_state holds NaN or inf \(shape \(4,\)\)"),
    ],
)
def test_actions_outside_the_support_and_a_nan_target_state_are_one_line(discrete, arguments, message):
    """Torch's own refusals were many lines ending in the whole tensor; a NaN s* gave NaN scores."""
    net, policy, records = discrete
    if "records" in arguments:
        records = records | {"actions": records["actions"].index_fill(0, torch.tensor([5]), 3)}
    target = {"target_state": np.zeros(4), "target_action": 1} | {k: v for k, v in arguments.items() if k != "records"}
    with pytest.raises(ValueError, match=message) as refused:
        record_influence(policy, net, records, "action", **target)
    assert "\n" not in str(refused.value)


def test_time_major_inputs_are_told_the_flat_size(discrete):
    """Every key (T=6, n_envs=4, ...): the refusal named (6,), the T rows, where the records are 24."""
    net, policy, records = discrete
    time_major = {key: value.reshape(6, 4, *value.shape[1:]) for key, value in records.items()}
    with pytest.raises(
        ValueError,
        match=r"records\['advantages'\] has shape \(6, 4\); it needs \(24,\), one value per record \(every key",
    ):
        record_influence(policy, net, time_major)


SCORES_20_NEGATIVE = np.linspace(-1, 1, 41)


def test_drop_set_says_p_is_a_string():
    with pytest.raises(ValueError, match=r"p='50' is a string; it needs a number in \(0, 100\]"):
        drop_set(SCORES_20_NEGATIVE, "50")


def test_drop_set_takes_an_int_seed_as_numpy_does():
    np.testing.assert_array_equal(
        drop_set(SCORES_20_NEGATIVE, 50, "random", rng=0),
        drop_set(SCORES_20_NEGATIVE, 50, "random", rng=np.random.default_rng(0)),
    )
    with pytest.raises(ValueError, match=r"rng='0' must be a numpy Generator, an int seed or None, not str"):
        drop_set(SCORES_20_NEGATIVE, 50, "random", rng="0")  # type: ignore[arg-type]  # the misuse refused


def test_a_p_below_one_warns_that_it_is_a_percent():
    """Issue 57: p=0.25 (meant as a quarter) was accepted and dropped nothing."""
    with pytest.warns(UserWarning, match=r"p=0.25 is a percent of the negative-influence records.*pass p=25"):
        assert len(drop_set(SCORES_20_NEGATIVE, 0.25)) == 0
