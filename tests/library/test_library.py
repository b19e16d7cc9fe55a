"""The library layer as a user outside this repo gets it: light imports, docs/api.md's examples running, and a
wheel that installs (non-editable, with the `sb3` extra) into a fresh venv and runs those examples there, and the
CLI's commands that need no checkout."""

from __future__ import annotations

import importlib.util
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
HAS_SB3 = importlib.util.find_spec("stable_baselines3") is not None


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


def outside_the_checkout() -> dict[str, str]:
    """The environment less PYTHONPATH, which may point into the checkout."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def run_example(python: Path | str, code: str, cwd: Path) -> str:
    result = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd=cwd, env=outside_the_checkout(), timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


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


@pytest.fixture(scope="module")
def wheel_python(tmp_path_factory) -> Path:
    """The python of a new venv into which the checkout, built as a wheel, is installed non-editable, with the
    `sb3` extra where this environment has SB3 (pip's cache makes the dependencies a copy, not a download,
    after the checkout's own install)."""
    root = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", str(ROOT), "--no-deps", "-w", str(root / "dist")], check=True, capture_output=True)
    (wheel,) = (root / "dist").glob(f"rlinfluence-{rlinfluence.__version__}-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    extra = "[sb3]" if HAS_SB3 else ""
    install = [str(python), "-m", "pip", "-q", "--disable-pip-version-check", "install", f"{wheel}{extra}"]
    subprocess.run(install, check=True, capture_output=True, timeout=1200, env=outside_the_checkout())
    return python


@pytest.mark.skipif(not HAS_SB3, reason="the second example runs stable-baselines3 (the sb3 extra)")
def test_the_wheel_installs_outside_the_checkout_and_runs_both_examples(wheel_python, tmp_path):
    """Run from a folder outside the checkout."""
    where = run_example(
        wheel_python, "import rlinfluence; print(rlinfluence.__file__, rlinfluence.__version__)", tmp_path
    )
    assert where.startswith(str(wheel_python.parents[1])) and where.split()[1] == rlinfluence.__version__
    for example in api_examples():
        assert "dropped" in run_example(wheel_python, example, tmp_path)


def test_the_wheel_draws_ones_own_experiment_and_refuses_a_replay_in_one_line(wheel_python, tmp_path):
    """README "Figures for your own experiment" from a pip install, which holds no paper_figures/ (issue 55):
    drawn, as nothing under it is read; task=replay needs the committed results, which only a checkout has."""

    def cli(*overrides: str) -> subprocess.CompletedProcess:
        command = [str(wheel_python.with_name("rlinfluence")), *overrides, "logger=disabled", "progress=false"]
        return subprocess.run(
            command, capture_output=True, text=True, cwd=tmp_path, env=outside_the_checkout(), timeout=600
        )

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
