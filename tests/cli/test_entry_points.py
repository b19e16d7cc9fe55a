"""Every command the README and docs name, run as a user runs it: a subprocess from a fresh interpreter, with
its documented arguments. In-process calls hid that `rlinfluence-manifest make` failed from every shell
(issue 55): tests/conftest.py had imported the config schema that the command itself never registered."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import cli_refusal

ROOT = Path(__file__).resolve().parents[2]  # tests/cli/ is two levels below the repo root
DOCS = [ROOT / "README.md", ROOT / "sbatch" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
# Each command the docs name, with the test below that runs it.
RUN_HERE = {"rlinfluence", "rlinfluence-manifest", "python -m rlinfluence", "python -m rlinfluence.launch"}


def named_commands() -> set[str]:
    """The console scripts a doc's command line starts with, and every `python -m rlinfluence...` it names."""
    text = "\n".join(path.read_text() for path in DOCS)
    scripts = {name for name in SCRIPTS if re.search(rf"(?m)^\s*{re.escape(name)} ", text)}
    return scripts | {f"python -m {module}" for module in re.findall(r"python -m (rlinfluence[\w.]*)", text)}


def installed(script: str) -> str:
    """A console script as the shell finds it: beside this interpreter, where pip installed the package."""
    path = Path(sys.executable).with_name(script)
    assert path.is_file(), f"{script} is not installed beside {sys.executable} (pip install -e .)"
    return str(path)


def run(*command: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=os.environ | env, capture_output=True, text=True, timeout=600)


def test_every_command_the_docs_name_is_run_here():
    assert named_commands() == RUN_HERE


def test_the_console_script_shows_its_help(tmp_path):
    result = run(installed("rlinfluence"), "--help", cwd=tmp_path)  # README, "Configuration"
    assert result.returncode == 0 and result.stdout.startswith("rlinfluence: "), result.stderr[-2000:]


def test_python_m_rlinfluence_refuses_an_unknown_option_in_one_line(tmp_path):
    line = cli_refusal(run(sys.executable, "-m", "rlinfluence", "env=frozen_lake", cwd=tmp_path))
    assert line.startswith("rlinfluence: config error: In 'config': Could not find 'env/frozen_lake' (options: ")
    assert not any(tmp_path.iterdir())


def test_the_readmes_manifest_commands_run_from_a_shell(tmp_path):
    """README "Sweeps: three ways", 3., verbatim: make, status, submit (here with no SLURM on PATH: one line;
    `python -m rlinfluence.launch` prints what it would sbatch)."""
    manifest = installed("rlinfluence-manifest")
    made = run(manifest, "make", "+experiment=main", "-o", "manifests/main.txt", cwd=tmp_path)
    assert made.returncode == 0 and made.stdout.startswith("manifests/main.txt: 90 runs (commit "), made.stderr[-2000:]
    lines = (tmp_path / "manifests" / "main.txt").read_text().splitlines()
    assert sum(not line.startswith("#") for line in lines) == 90

    status = run(manifest, "status", "manifests/main.txt", cwd=tmp_path)
    assert status.returncode == 0 and "90 runs: 0 done, 0 queued or running, 90 to do" in status.stdout

    no_slurm = run(manifest, "submit", "manifests/main.txt", "--parallel", "16", cwd=tmp_path, PATH=str(tmp_path))
    assert cli_refusal(no_slurm) == (
        "rlinfluence-manifest: submit needs SLURM's sbatch and scontrol on PATH, not found here; "
        "--dry-run --max-array-size N prints the sbatch commands without them"
    )
    dry = run(
        *(sys.executable, "-m", "rlinfluence.launch", "submit", "manifests/main.txt", "--parallel", "16"),
        *("--dry-run", "--max-array-size", "1001"),
        cwd=tmp_path,
    )
    assert dry.returncode == 0 and "--array=0-89%16" in dry.stdout, dry.stderr[-2000:]
    assert not (tmp_path / "manifests" / "logs").exists()  # a dry run writes nothing


def test_a_manifest_command_that_cannot_run_is_one_line_exit_2(tmp_path):
    manifest = installed("rlinfluence-manifest")
    assert cli_refusal(run(manifest, "status", "missing.txt", cwd=tmp_path)) == (
        "rlinfluence-manifest: missing.txt: no manifest to read (No such file or directory); "
        "`rlinfluence-manifest make <overrides> -o missing.txt` writes one"
    )
    typo = run(manifest, "make", "ppo.batchsize=32", "-o", "m.txt", cwd=tmp_path)
    assert cli_refusal(typo) == (
        "rlinfluence-manifest: config error: ppo.batchsize is not a setting (did you mean ppo.batch_size?)"
    )
    interval = run(manifest, "make", "optimizer.lr=interval(0.1,0.2)", "-o", "m.txt", cwd=tmp_path)
    assert cli_refusal(interval) == (
        "rlinfluence-manifest: cannot enumerate 'optimizer.lr=interval(0.1,0.2)': only choice and range sweeps are"
    )
    (tmp_path / "m.txt").write_text("seed=0\n")  # a line written by hand
    assert cli_refusal(run(manifest, "submit", "m.txt", "--script", "no.sbatch", cwd=tmp_path)) == (
        "rlinfluence-manifest: --script=no.sbatch is not a file (the default is a checkout's "
        "sbatch/run_array.sbatch; a pip install has none)"
    )
    assert os.listdir(tmp_path) == ["m.txt"]
