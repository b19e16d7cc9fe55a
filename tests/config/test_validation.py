"""validation.py: every bad setting is refused in one line naming its key, before anything is written
(issues 9, 32, 33); a setting the run does not read is a warning; another env id that fits is accepted."""

from __future__ import annotations

import pytest

from conftest import FIT_HINT, FROZENLAKE_STATE_0, compose_config, config_refusal, tiny
from rlinfluence.choices import ConfigError
from rlinfluence.run.identity import digest, non_default_settings
from rlinfluence.run.rundir import relative_run_dir, run_dir
from rlinfluence.validation import validate


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["target.state=[1,0]", "target.action=[2]"], "target.state has 2 entries, env=frozenlake observes 16"),
        ([FROZENLAKE_STATE_0, "target.action=[4]"], "target.action=[4.0] must be one action index in 0..3"),
        ([FROZENLAKE_STATE_0, "target.action=[1,2]"], "must be one action index"),
        (  # issue 55: a NaN s* made every score NaN, a run that silently dropped nothing
            ["env=acrobot", "target.state=[0,0,0,0,0,nan]", "target.action=[1]"],
            "target.state=[0.0, 0.0, 0.0, 0.0, 0.0, nan] must be finite numbers (NaN or inf found)",
        ),
        (["env=acrobot", "target.state=[0,0,0,0,0,0]", "target.action=[inf]"], "target.action=[inf] must be finite"),
    ],
)
def test_an_action_target_that_does_not_fit_the_env_is_a_config_error(overrides, message):
    assert message in config_refusal("target=action", *overrides)


def test_no_evaluation_episode_is_a_config_error():
    with pytest.raises(ConfigError, match="eval.episodes=0 must be >= 1"):
        validate(compose_config(["eval.episodes=0"]))


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["ppo.max_grad_norm=0"], "ppo.max_grad_norm=0.0 must be > 0, or null (no clipping)"),
        (["ppo.ent_coef=-0.01"], "ppo.ent_coef=-0.01 must be >= 0"),
        (["ppo.vf_coef=-1"], "ppo.vf_coef=-1.0 must be >= 0"),
        (["optimizer.eps=0"], "optimizer.eps=0.0 must be > 0"),
        (["torch_threads=0"], "torch_threads=0 must be > 0"),
        (["logger.init_timeout=0"], "logger.init_timeout=0.0 must be > 0"),
        (["env.network.activation=gelu"], "env.network.activation='gelu' is not one of: tanh, relu"),
        (["env.network.pi=[64,0]"], "env.network.pi=[64, 0] must list layer widths > 0"),
        (
            ["env.wrappers=[one_hot,flip]"],
            "env.wrappers='flip' is not one of: one_hot, minigrid_image, atari, channel_first",
        ),
        (["env.state_key=cell"], "env.state_key='cell' is not one of: toy_text_state, minigrid_pose"),
        (
            ["env.wrappers=[]"],
            "env.id=FrozenLake-v1 observes Discrete(16) after env.wrappers=[], not an array a network takes" + FIT_HINT,
        ),
        (
            ["env=acrobot", "env.wrappers=[one_hot]"],
            "env.id=Acrobot-v1 does not take env=acrobot's env.make_kwargs or "
            "env.wrappers=['one_hot'] (AttributeError: ",
        ),
        (["task=timeline", "env=acrobot", "analysis.timeline.top=0"], "analysis.timeline.top=0 must be >= 1"),
        (["task=counterfactual", "analysis.counterfactual.groups=0"], "analysis.counterfactual.groups=0 must be >= 1"),
        (["task=replay"], "task=replay needs replay.run=<experiment>/<env>/<optimizer>/<leaf>/seed<k>"),
        (
            ["task=replay", "replay.run=main/nosuch/*"],
            "replay.run=main/nosuch/* matches no committed run of figures.data_dir=paper_figures/data (the nearest: ",
        ),
        (
            ["task=replay", "replay.run=main/frozenlake/sgd/iif-p50/seed0", "replay.rounds=-1"],
            "replay.rounds=-1 must be >= 0",
        ),
        # issue 33: each closed choice, refused from its one registry
        (["optimizer.name=adamw"], "optimizer.name='adamw' is not one of: sgd, adam"),
        (["env.network.kind=resnet"], "env.network.kind='resnet' is not one of: mlp, cnn, nature_cnn"),
        (["influence.backend=vjp"], "influence.backend='vjp' is not one of: jvp, reference"),
        (["influence.preconditioner=shampoo"], "influence.preconditioner='shampoo' is not one of: none, adam"),
        (["influence.checkpoints=final"], "influence.checkpoints='final' is not one of: round_start, every_step"),
        (["logger.mode=cloud"], "logger.mode='cloud' is not one of: offline, online, disabled"),
        (["target.name=seq"], "target.name='seq' is not one of: return, action"),
        (["method=td_error", "method.alpha=-1"], "method.alpha=-1.0 must be >= 0"),
        (["env.wrappers=[one_hot,atari]"], "env.wrappers has atari, whose settings env.atari are unset"),
    ],
)
def test_a_value_out_of_range_or_not_fitting_the_env_names_its_key(overrides, message):
    assert config_refusal(*overrides).startswith(message)


@pytest.mark.parametrize(
    "task,key",
    [
        ("train", "runs_root"),
        ("diagnose", "runs_root"),
        ("diagnose", "figures.data_dir"),
        ("figures", "figures.out_dir"),
    ],
)
def test_a_path_a_task_would_write_under_a_file_is_refused_before_it_runs(tmp_path, task, key):
    (tmp_path / "file").write_text("")
    paths = {
        "runs_root": tmp_path / "runs",
        "figures.data_dir": tmp_path,
        "figures.out_dir": tmp_path / "out",
        key: tmp_path / "file" / "below",
    }
    message = config_refusal(f"task={task}", *(f"{name}={path}" for name, path in paths.items()))
    below, file = tmp_path / "file" / "below", tmp_path / "file"
    assert message == f"{key}={below} is not writable: {file} is not a directory"


def test_another_env_id_with_the_presets_spaces_is_accepted_and_hashed():
    cfg = compose_config(["env=acrobot", "env.id=CartPole-v1"])
    validate(cfg)
    # Filed apart from the preset's own runs: the id is the one setting that differs, hashed into the leaf.
    assert non_default_settings(cfg) == {"env.id": "CartPole-v1"}
    assert str(relative_run_dir(cfg)) == f"acrobot/sgd/iif-p50-{digest({'env.id': 'CartPole-v1'})}/seed0"


def test_a_method_setting_the_method_does_not_read_is_a_one_line_warning(tmp_path, capsys):
    cfg = tiny(tmp_path, "method=ppo", "method.p=30")
    validate(cfg)
    assert capsys.readouterr().err == (
        "rlinfluence: warning: method.p=30 does not apply to method=ppo; ignored (not part of the run's identity)\n"
    )
    assert run_dir(cfg) == run_dir(tiny(tmp_path, "method=ppo"))
