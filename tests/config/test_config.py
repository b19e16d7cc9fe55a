"""Every config option composes; bad input fails early with a message naming the key."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf.errors import ValidationError

from conftest import cli_refusal, compose_config, config_refusal
from rlinfluence.config.paths import CONFIG_DIR, PACKAGE_DIR, REPO_ROOT
from rlinfluence.lm.hub import HubAssetMissing
from rlinfluence.run.rundir import relative_run_dir, run_dir
from rlinfluence.validation import validate

GROUPS = ["env", "method", "optimizer", "target", "logger", "launcher", "model"]
# Options that need extra values before they can run.
REQUIRED_EXTRAS = {
    ("target", "action"): [f"target.state=[{','.join(['1'] + ['0'] * 15)}]", "target.action=[0]"],
    ("method", "advantage"): ["method.variant=h1"],
    ("env", "gym"): ["env.id=CartPole-v1"],  # no default id (issue 43)
}
# Options of the language-model path, composed with the offline LM env.
LM_OPTIONS = {("target", "seq"), ("model", "tiny"), ("model", "gpt_neo_125m"), ("model", "gpt_neo_2p7b")}
# Options that name a Hugging Face model or data set (refused in one line on a machine without it).
NEEDS_HUB = {("env", "toxicity"), ("model", "gpt_neo_125m"), ("model", "gpt_neo_2p7b")}
# Options that preset another option's setting (p=auto), with the method they run.
PRESETS = {("method", "iif_auto"): "iif", ("method", "iif_guard_auto"): "iif_guard", ("method", "random25"): "random"}


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


@pytest.mark.parametrize("group,option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_group_option_composes_and_validates(group, option):
    extras = REQUIRED_EXTRAS.get((group, option), [])
    base = ["env=frozenlake"] if group == "method" else []  # methods need an env they support
    base = ["env=toxicity_tiny"] if (group, option) in LM_OPTIONS else base
    cfg = compose_config(base + [f"{group}={option}"] + extras)
    try:
        validate(cfg)
    except HubAssetMissing as error:  # a machine without the model / data set: refused in one line
        assert (group, option) in NEEDS_HUB and "HF_HOME" in str(error)
    if group in cfg and "name" in cfg[group]:
        assert cfg[group].name == PRESETS.get((group, option), option)


def test_defaults_are_the_paper_frozenlake_iif_setting():
    cfg = compose_config([])
    assert (cfg.env.name, cfg.method.name, cfg.method.p, cfg.optimizer.name, cfg.optimizer.lr) == (
        "frozenlake",
        "iif",
        50,
        "sgd",
        5e-3,
    )
    assert (cfg.env.n_steps, cfg.env.rounds, cfg.ppo.batch_size, cfg.ppo.n_epochs) == (2048, 50, 64, 10)
    assert cfg.logger.mode == "offline"


def test_method_p_follows_the_env_unless_overridden():
    assert compose_config(["env=lunarlander"]).method.p == 12.5
    assert compose_config(["env=lunarlander", "method.p=25"]).method.p == 25


def test_run_dir_is_deterministic_and_names_the_run():
    cfg = compose_config(["env=acrobot", "method=random", "seed=3"])
    assert str(relative_run_dir(cfg)) == "acrobot/sgd/random-p50/seed3"
    assert run_dir(cfg) == Path("runs/default/acrobot/sgd/random-p50/seed3")


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["method.p=150"], "method.p"),
        (["method.p=0"], "method.p"),
        (["method=random", "method.p=-5"], "method.p"),
        (["env.rounds=-1"], "env.rounds"),
        (["env.n_steps=0"], "env.n_steps"),
        (["ppo.batch_size=0"], "ppo.batch_size"),
        (["optimizer.lr=-0.1"], "optimizer.lr"),
        (["logger.mode=cloud"], "logger.mode"),
        (["eval.episodes=0"], "eval.episodes"),
        (["target=action"], "target.state"),
        (["task=plot"], "task"),
        (["device=tpu"], "device"),
    ],
)
def test_bad_values_raise_one_line_naming_the_key(overrides, key):
    assert key in config_refusal(*overrides)


def test_unknown_env_lists_the_available_ones():
    with pytest.raises(MissingConfigException) as error:
        compose_config(["env=frozen_lake"])
    assert "env/frozen_lake" in str(error.value) and "frozenlake" in str(error.value)


def test_wrong_type_names_the_key():
    with pytest.raises(ConfigCompositionException) as error:
        compose_config(["seed=abc"])
    assert "seed=abc" in str(error.value)
    assert isinstance(error.value.__cause__, ValidationError) and "Integer" in str(error.value.__cause__)


def test_the_package_ships_every_config_file():
    """A wheel carries conf/ as package data (pyproject.toml), which is how an installed package finds it."""
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]

    def matching(patterns: list[str]) -> set[Path]:
        return {path for pattern in patterns for path in PACKAGE_DIR.glob(pattern)}

    shipped = matching(setuptools["package-data"]["rlinfluence"])
    shipped -= matching(setuptools["exclude-package-data"]["rlinfluence"])
    assert shipped == {path for path in (PACKAGE_DIR / "conf").rglob("*.yaml") if "local" not in path.parts}
    assert Path(CONFIG_DIR) == REPO_ROOT / "conf"  # in a checkout, the repo's own conf/


def test_misspelt_key_is_rejected():
    with pytest.raises(ConfigCompositionException) as error:
        compose_config(["ppo.batchsize=32"])
    assert "batchsize" in str(error.value)


def test_cli_reports_bad_value_in_one_line_and_writes_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "rlinfluence", "method.p=150", f"runs_root={tmp_path}", "logger=disabled"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli_refusal(result) == (
        "rlinfluence: config error: method.p=150.0 must be in (0, 100] or auto "
        "(percent of negative-influence records to drop)"
    )
    assert not any(tmp_path.iterdir())


# Runs `python -m rlinfluence <argv>` in this process, then prints the plotting and task modules it loaded.
IMPORT_PROBE = """import runpy, sys
sys.argv[0] = "rlinfluence"
try:
    runpy.run_module("rlinfluence", run_name="__main__")
finally:
    print(sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "seaborn")
                 or m.startswith(("rlinfluence.analyses", "rlinfluence.figures"))))
"""


def test_a_training_command_imports_no_plotting_or_analysis_code(tmp_path):
    tiny_run = [f"runs_root={tmp_path}", "debug=smoke", "env.rounds=1"]
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, *tiny_run], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert next(tmp_path.rglob("DONE"))  # it trained
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_a_rejected_command_leaves_a_finished_runs_record_untouched(tmp_path):
    base = [sys.executable, "-m", "rlinfluence", f"runs_root={tmp_path}", "debug=smoke", "env.rounds=1"]
    subprocess.run(base, check=True, capture_output=True, timeout=120)
    run_dir = next(tmp_path.rglob("DONE")).parent
    record = {p.name: p.read_text() for p in (run_dir / ".hydra").iterdir()}
    assert "env.rounds=1" in record["overrides.yaml"] and "rounds: 1" in record["config.yaml"]
    rejected = subprocess.run(base + ["ppo.gamma=2"], capture_output=True, text=True, timeout=120)
    assert rejected.returncode == 2 and "ppo.gamma" in rejected.stderr
    assert {p.name: p.read_text() for p in (run_dir / ".hydra").iterdir()} == record


@pytest.mark.parametrize(
    "overrides,refusal",
    [
        # issue 55: `+` added a key nothing reads, and the run was filed under a new hash
        (["+ppo.batchsize=500"], "ppo.batchsize is not a setting (did you mean ppo.batch_size?)"),
        (["++ppo.batchsize=500"], "ppo.batchsize is not a setting (did you mean ppo.batch_size?)"),
        (["+batchsize=500"], "batchsize is not a setting (did you mean ppo.batch_size?)"),  # at the wrong level
        (["+foo=1"], "foo is not a setting (rlinfluence --cfg job lists the settings)"),
        (["+figures.collapse.acrobot.belw=1"], "figures.collapse.acrobot.belw is not a setting (did you mean "),
        (
            ["env=toxicity_tiny", "+env.lm.kl.targt=1"],
            "env.lm.kl.targt is not a setting (did you mean env.lm.kl.target?)",
        ),
    ],
)
def test_a_key_no_code_reads_is_refused_naming_the_nearest_setting(overrides, refusal):
    assert config_refusal("debug=smoke", *overrides).startswith(refusal)


@pytest.mark.parametrize(
    "overrides",
    [
        ["env=highway", "+env.make_kwargs.config.duration=4"],  # an env's own keyword arguments: any key
        ["env=highway", "+env.train_make_kwargs.config.vehicles_count=50"],
        ["+experiment=main"],  # a config group, not a key
    ],
)
def test_a_key_added_where_the_config_takes_any_key_is_accepted(overrides):
    validate(compose_config(["debug=smoke", *overrides], return_hydra_config=True))  # Hydra's own keys too


@pytest.mark.parametrize(
    "overrides,refusal",
    [
        # issue 55: each wrote outside runs_root, into the repo root, or one level up
        (["experiment_name=../../escape"], "experiment_name='../../escape' must be one folder name"),
        (["experiment_name="], "experiment_name='' must be one folder name (not empty, no '/', not '.' or '..')"),
        (["experiment_name=.."], "experiment_name='..' must be one folder name"),
        (["env.name=a/b"], "env.name='a/b' must be one folder name"),
        (["runs_root="], "runs_root='' names no folder: give the one run dirs go under (default: runs)"),
        (
            ["task=figures", f"figures.runs_root={REPO_ROOT}", "figures.experiment=../main"],
            "figures.experiment='../main'",
        ),
    ],
)
def test_a_name_that_leaves_its_folder_is_refused(overrides, refusal):
    assert config_refusal(*overrides).startswith(refusal)
