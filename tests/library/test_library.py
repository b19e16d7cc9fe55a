"""The library layer as a user outside this repo gets it: light imports, docs/api.md's examples running, and a
wheel that installs into a fresh venv beside CleanRL's pins, then with SB3 and rl_zoo3, and runs IIF in each; and the
CLI's commands that need no checkout, from that wheel installed non-editable."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import rlinfluence
from conftest import cli_refusal

ROOT = Path(__file__).resolve().parents[2]  # tests/library/ is two levels below the repo root
CONFIG_LIBRARIES = ("hydra", "omegaconf", "gymnasium")


def imported_modules(code: str) -> set[str]:
    """Every module `code` imports in a fresh interpreter, read from `python -X importtime`."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}


def top_level(modules: set[str]) -> set[str]:
    return {module.split(".")[0] for module in modules}


def test_importing_the_attribution_api_pulls_no_config_library():
    modules = imported_modules("import rlinfluence.attribution")
    assert "rlinfluence.attribution.scores" in modules and "torch" in top_level(modules)  # the reading works
    assert not top_level(modules) & set(CONFIG_LIBRARIES)
    assert "rlinfluence.config.schema" not in modules  # so no ConfigStore registration runs at import


def test_importing_the_sb3_dropin_adds_only_stable_baselines3_and_what_it_imports():
    pytest.importorskip("stable_baselines3")
    dropin = imported_modules("import rlinfluence.sb3")
    allowed = imported_modules("import stable_baselines3, rlinfluence.attribution")
    extra = {module for module in dropin - allowed if not module.startswith(("rlinfluence.", "stable_baselines3."))}
    assert not extra, f"rlinfluence.sb3 imports more than SB3 and the attribution API: {sorted(extra)}"
    assert not top_level(dropin) & {"hydra", "omegaconf"}


def api_examples() -> list[str]:
    text = (ROOT / "docs" / "api.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def run_outside_the_checkout(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=1200)


def run_succeeding(command: list[str], cwd: Path) -> str:
    result = run_outside_the_checkout(command, cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def run_example(python: Path | str, code: str, cwd: Path) -> str:
    return run_succeeding([str(python), "-c", code], cwd)


def test_the_api_docs_have_both_examples_and_they_run(tmp_path):
    examples = api_examples()
    assert len(examples) == 2 and "record_influence" in examples[0] and "InfluenceFilter" in examples[1]
    assert "dropped" in run_example(sys.executable, examples[0], tmp_path)
    pytest.importorskip("stable_baselines3")
    assert run_example(sys.executable, examples[1], tmp_path).count("dropped") == 2


def test_the_version_is_written_once_and_the_changelog_starts_at_it():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" in pyproject["dynamic"] and "version" not in pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+", rlinfluence.__version__)
    assert f"## {rlinfluence.__version__} " in (ROOT / "CHANGELOG.md").read_text()


# CleanRL's pins (gymnasium 0.29.1, numpy < 2) with torch 2.13.0: CleanRL pins torch 2.4.1, but the only CPU build
# pip can get here is 2.13.0 (PyPI's Linux torch wheels pull several GB of CUDA libraries; docs/install.md).
CLEANRL_PINS = ("torch==2.13.0", "numpy==1.24.4", "gymnasium==0.29.1")
OLDEST_SB3 = "stable-baselines3==2.2.1"  # the `sb3` extra's lower bound
# rl_zoo3 needs SB3 >= 2.9.2 and a newer gymnasium than CleanRL's: the repro's pins, the newest tested.
RL_ZOO = ("rl_zoo3==2.9.2", "gymnasium==1.4.0", "numpy==2.4.6")
# The zoo's own CartPole-v1 hyperparameters (its hyperparams/ppo.yml, as `rl_zoo3 train` reads it) plus the
# `callback:` key that names the IIF callback, written to zoo.yml.
ZOO_CONFIG = """
import pathlib, yaml, rl_zoo3
zoo = yaml.safe_load((pathlib.Path(rl_zoo3.__file__).parent / "hyperparams" / "ppo.yml").read_text())
iif = {"callback": [{"rlinfluence.sb3.InfluenceFilter": {"mode": "iif", "p": 50}}]}
pathlib.Path("zoo.yml").write_text(yaml.safe_dump({"CartPole-v1": zoo["CartPole-v1"] | iif}))
"""
# Stock PPO, its default buffer, and the callback alone (issue 57, item 5) on the oldest SB3 the extra allows.
CALLBACK_ALONE = """
from stable_baselines3 import PPO
from rlinfluence.sb3 import InfluenceFilter
iif = InfluenceFilter(mode="iif", p=50)
PPO("MlpPolicy", "CartPole-v1", n_steps=64, batch_size=32, seed=0).learn(128, callback=iif)
print("dropped", [r["n_dropped"] for r in iif.rounds])
"""


def distribution_names(requirements: list[str]) -> set[str]:
    return {
        re.split(r"[\[=<>~! ;]", requirement, maxsplit=1)[0].lower().replace("_", "-") for requirement in requirements
    }


def installed(python: Path) -> set[str]:
    listing = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
    return {re.split("==| @ ", line)[0].lower().replace("_", "-") for line in listing.stdout.splitlines()}


def pip_install(python: Path, *requirements: str) -> None:
    run_succeeding(
        [str(python), "-m", "pip", "-q", "--disable-pip-version-check", "install", *requirements], python.parent
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The checkout built as a wheel."""
    root = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", str(ROOT), "--no-deps", "-w", str(root)], check=True, capture_output=True)
    (built,) = root.glob(f"rlinfluence-{rlinfluence.__version__}-*.whl")
    return built


@pytest.fixture(scope="module")
def library_venv(wheel, tmp_path_factory) -> tuple[Path, Path]:
    """A fresh venv holding the wheel built from the checkout, alone beside CleanRL's pins: (its python, the
    wheel). pip's cache makes most packages a copy, not a download, after the first run."""
    root = tmp_path_factory.mktemp("library")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    pip_install(python, str(wheel), *CLEANRL_PINS)
    return python, wheel


def run_files(python: Path, codes: list[str], cwd: Path) -> str:
    """Runs each code as its own __main__ script, one after the other in one process (one torch import)."""
    paths = []
    for number, code in enumerate(codes):
        paths.append(cwd / f"script{number}.py")
        paths[-1].write_text(code)
    runner = "import runpy, sys\nfor path in sys.argv[1:]:\n    runpy.run_path(path, run_name='__main__')"
    return run_succeeding([str(python), "-c", runner, *map(str, paths)], cwd)


@pytest.mark.slow
def test_the_library_installs_beside_cleanrls_pins_and_the_oldest_sb3(library_venv, tmp_path):
    """Run from a folder outside the checkout: (1) the library alone beside CleanRL's pins, none of the
    reproduction's packages come with it, a CleanRL-shaped PPO runs IIF, and `rlinfluence` names the extra it
    needs; (2) with the `sb3` extra at its oldest SB3, docs/api.md's examples run and the callback alone turns
    stock PPO into IIF."""
    python, wheel = library_venv
    where = run_example(python, "import rlinfluence; print(rlinfluence.__file__, rlinfluence.__version__)", tmp_path)
    assert where.startswith(str(python.parents[1])) and where.split()[1] == rlinfluence.__version__
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    library = distribution_names(project["dependencies"])
    reproduction_only = distribution_names(project["optional-dependencies"]["repro"]) - library - {"gymnasium"}
    assert reproduction_only >= {"hydra-core", "wandb", "pandas", "highway-env"}
    assert not installed(python) & reproduction_only  # gymnasium: CleanRL's own, not the library's
    trained = run_files(python, [(ROOT / "tests" / "library" / "cleanrl_pins_ppo.py").read_text()], tmp_path)
    assert re.findall(r"iteration 1: [1-9]\d* of 256 records dropped", trained), trained
    cli = run_outside_the_checkout([str(python.parent / "rlinfluence")], tmp_path)
    assert cli.returncode == 2 and not cli.stdout
    assert re.fullmatch(r"rlinfluence: .* is not installed\): pip install \"rlinfluence\[repro\]\"\n", cli.stderr)

    pip_install(python, f"{wheel}[sb3]", OLDEST_SB3, *CLEANRL_PINS)
    ran = run_files(python, [*api_examples(), CALLBACK_ALONE], tmp_path)
    assert re.search(r"^dropped \[[1-9]\d*, [1-9]\d*\]$", ran, re.MULTILINE), ran


@pytest.mark.long
def test_rl_zoo_trains_iif_from_the_callback_key_of_its_yaml(library_venv, tmp_path):
    """rl_zoo3's own `python -m rl_zoo3.train` with its CartPole-v1 hyperparameters and the YAML's `callback:`
    key naming InfluenceFilter, which swaps in the IIF buffer (the YAML cannot name a buffer class). Opt-in:
    installing rl_zoo3 and what it needs (optuna, moviepy, ...) adds a minute to the venv's two."""
    python, wheel = library_venv
    pip_install(python, f"{wheel}[sb3]", *RL_ZOO)
    run_example(python, ZOO_CONFIG, tmp_path)
    zoo = ["-m", "rl_zoo3.train", "--algo", "ppo", "--env", "CartPole-v1", "-conf", "zoo.yml", "-n", "512"]
    trained = run_succeeding([str(python), *zoo, "--seed", "0"], tmp_path)
    dropped = [int(n) for n in re.findall(r"\|\s+n_dropped\s+\|\s+(\d+)", trained)]  # SB3's logger, influence/
    assert len(dropped) == 2 and all(dropped), trained[-3000:]  # the zoo's 8 envs x 32 steps: 2 rounds


@pytest.fixture(scope="module")
def reproduction_python(wheel, tmp_path_factory) -> Path:
    """The python of a venv holding the same wheel, non-editable and without its dependencies, which it reads from
    this (the dev) venv's site-packages, appended to its path by a .pth file: what the wheel ships (its config,
    no paper_figures/) is what is tested, in seconds, not pip's resolution (the library venv checks that). The
    dev venv's own .pth files are not read from there, so its editable install of the checkout stays out."""
    root = tmp_path_factory.mktemp("reproduction")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    (site,) = root.glob("lib/python*/site-packages")
    dev_site = next(Path(path) for path in sys.path if path.endswith("site-packages") and Path(path, "torch").is_dir())
    (site / "dev-venv.pth").write_text(f"{dev_site}\n")
    install = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "--python", str(python)]
    run_succeeding([*install, "install", "--no-deps", str(wheel)], root)
    return python


def test_the_wheel_draws_ones_own_experiment_and_refuses_a_replay_in_one_line(reproduction_python, tmp_path):
    """Figures for one's own experiment from a pip install, which holds no paper_figures/ (issue 55): drawn, as
    nothing under it is read; task=replay needs the committed results, which only a checkout has."""
    where = run_example(reproduction_python, "import rlinfluence; print(rlinfluence.__file__)", tmp_path)
    assert where.startswith(str(reproduction_python.parents[1])), where

    def cli(*overrides: str) -> subprocess.CompletedProcess:
        command = [str(reproduction_python.with_name("rlinfluence")), *overrides, "logger=disabled", "progress=false"]
        return run_outside_the_checkout(command, tmp_path)

    trained = cli("debug=smoke", "experiment_name=mine")
    assert trained.returncode == 0, trained.stderr[-3000:]
    drawn = cli("task=figures", "figures.runs_root=runs", "figures.experiment=mine")
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    drew = "rlinfluence: mine: curves and table of frozenlake (1 arm(s), 1 seed(s)), written to runs/mine/figures"
    assert drew in drawn.stdout
    assert (tmp_path / "runs" / "mine" / "figures" / "frozenlake_curves.png").is_file()
    line = cli_refusal(cli("task=replay", "replay.run=main/frozenlake/sgd/iif-p50/seed0"))
    assert line.startswith("rlinfluence: config error: figures.data_dir=paper_figures/data holds no committed run")
    assert line.endswith(
        "task=replay needs a checkout's paper_figures/data, which a pip install lacks: run it in a checkout, "
        "or point figures.data_dir there"
    )
