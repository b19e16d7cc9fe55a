"""The library layer as a user outside this repo gets it: light imports, docs/api.md's examples running, and a
wheel that installs (non-editable, with the `sb3` extra) into a fresh venv and runs those examples there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import rlinfluence

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


def run_example(python: Path | str, code: str, cwd: Path) -> str:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
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


def test_the_wheel_installs_outside_the_checkout_and_runs_both_examples(tmp_path):
    """Built from the checkout, installed non-editable with the `sb3` extra into a new venv (pip's cache makes
    the dependencies a copy, not a download, after the checkout's own install), run from a folder outside it."""
    pytest.importorskip("stable_baselines3")
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", str(ROOT), "--no-deps", "-w", str(dist)], check=True, capture_output=True)
    (wheel,) = dist.glob(f"rlinfluence-{rlinfluence.__version__}-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "-q", "--disable-pip-version-check", "install", f"{wheel}[sb3]"]
    subprocess.run(install, check=True, capture_output=True, timeout=1200)
    where = run_example(python, "import rlinfluence; print(rlinfluence.__file__, rlinfluence.__version__)", tmp_path)
    assert where.startswith(str(venv)) and where.split()[1] == rlinfluence.__version__
    for example in api_examples():
        assert "dropped" in run_example(python, example, tmp_path)
