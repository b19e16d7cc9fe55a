"""A command this machine lacks something for (an extra's library, SLURM, the committed results) is refused in
one line naming what to install or what is missing, before anything trains (issue 55), not by a traceback. The
missing library is made missing for one fresh interpreter: its entry in sys.modules is None, so importing it
raises ModuleNotFoundError as where it is not installed."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import cli_refusal, cli_run


def without(module: str, code: str, *args: str, **run) -> subprocess.CompletedProcess:
    """`code` with `args` in a fresh interpreter in which `module` cannot be imported."""
    blocked = f"import sys; sys.modules[{module!r}] = None; {code}"
    return subprocess.run([sys.executable, "-c", blocked, *args], capture_output=True, text=True, timeout=300, **run)


def test_a_language_model_env_without_the_rlhf_extra_is_one_line_naming_it(tmp_path):
    cli = "from rlinfluence.console import main; main()"
    args = ("env=toxicity_tiny", f"runs_root={tmp_path}", "logger=disabled", "progress=false")
    assert cli_refusal(without("transformers", cli, *args)) == (
        "rlinfluence: config error: env.agent=lm needs the rlhf extra, which is not installed here (transformers "
        "is missing): pip install 'rlinfluence[rlhf]' (in a checkout: pip install -e '.[rlhf]')"
    )
    assert not any(tmp_path.iterdir())


def test_the_sb3_dropin_without_stable_baselines3_says_which_extra_to_install():
    result = without("stable_baselines3", "import rlinfluence.sb3")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: rlinfluence.sb3 needs stable-baselines3, which is not installed here: "
        "pip install 'rlinfluence[sb3]'"
    )


def test_a_slurm_sweep_without_slurm_is_one_line_before_any_job(tmp_path):
    """PATH has no sbatch or srun (the CLI is started by its absolute path): no job, no sweep summary."""
    result = cli_run(tmp_path, "-m", "debug=smoke", "seed=0,1", "launcher=slurm", prefix=("env", f"PATH={tmp_path}"))
    assert cli_refusal(result) == (
        "rlinfluence: config error: launcher=slurm needs SLURM's sbatch and srun on PATH, not found here; "
        "without SLURM, use launcher=local or launcher=joblib"
    )
    assert not any(tmp_path.iterdir())


def test_a_replay_of_a_data_dir_without_the_committed_results_is_one_line(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    result = cli_run(tmp_path, "task=replay", "replay.run=main/*/*/*/seed0", f"figures.data_dir={data_dir}")
    assert cli_refusal(result) == (
        f"rlinfluence: config error: figures.data_dir={data_dir} holds no committed run to replay (no tidy CSV of "
        f"ours in {data_dir}); task=replay needs a checkout's paper_figures/data, which a pip install lacks: run it "
        "in a checkout, or point figures.data_dir there"
    )
    assert os.listdir(tmp_path) == ["data"]
