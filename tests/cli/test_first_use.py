"""What a new user hit on a fresh clone (issue 43), one test per edge, each failing without its fix: output
paths no directory can be made in, Ctrl-C while the CLI imports, duplicate runs of an experiment no figure
reads, env=gym without env.id, an out-of-date env id, a replay that matches nothing, where each task's output
went, the README's word on the test suite's duration, and the README as a first visit's page."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import cli_refusal, compose_config, config_refusal, start_as_from_a_terminal
from rlinfluence.cli import run_task
from rlinfluence.config.paths import REPO_ROOT
from rlinfluence.figures.regenerate import refresh_from_runs
from rlinfluence.validation import validate

README = (REPO_ROOT / "README.md").read_text()
CONFIGURATION = (REPO_ROOT / "docs" / "reproduction" / "configuration.md").read_text()
RESULTS = (REPO_ROOT / "docs" / "results" / "index.md").read_text()
UNMAKEABLE = "/proc/rlinfluence/out"  # /proc takes no new directory, not even from root


def cli(*overrides: str, **run) -> subprocess.CompletedProcess:
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} | run
    command = [sys.executable, "-m", "rlinfluence", *overrides, "logger=disabled", "progress=false"]
    return subprocess.run(command, text=True, timeout=300, **streams)


# ----------------------------------------------------------------------------- 1. output paths


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["task=figures", f"figures.out_dir={UNMAKEABLE}"], "figures.out_dir"),
        (["task=figures", "figures.runs_root=.", "figures.data_dir=/proc"], "figures.data_dir"),
        ([f"runs_root={UNMAKEABLE}"], "runs_root"),
    ],
)
def test_an_output_path_no_directory_can_be_made_in_is_refused_naming_its_key(overrides, key):
    path = dict(o.split("=", 1) for o in overrides)[key]
    assert config_refusal(*overrides).startswith(f"{key}={path} is not writable: /proc ")


def test_figures_into_an_unmakeable_out_dir_is_one_line_exit_2(tmp_path):
    line = cli_refusal(cli("task=figures", f"figures.out_dir={UNMAKEABLE}", cwd=tmp_path))
    assert line.startswith(f"rlinfluence: config error: figures.out_dir={UNMAKEABLE} is not writable")


# ----------------------------------------------------------------------------- 2. Ctrl-C while importing


def _has_loaded(pid: int, library: str) -> bool:
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def test_ctrl_c_while_the_cli_imports_is_one_line_exit_130(tmp_path):
    process = start_as_from_a_terminal(
        [sys.executable, "-m", "rlinfluence", "debug=smoke", f"runs_root={tmp_path}"], stderr=subprocess.PIPE, text=True
    )
    while process.poll() is None and not _has_loaded(process.pid, "libtorch"):
        time.sleep(0.005)  # torch's shared library is mapped: the CLI is importing torch, seconds from training
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert (process.returncode, stderr) == (130, "rlinfluence: interrupted\n")
    assert not any(tmp_path.iterdir())


# ----------------------------------------------------------------------------- 3. duplicates block what they feed


def test_two_runs_sharing_a_key_in_an_experiment_no_figure_reads_block_no_refresh(tmp_path):
    runs = tmp_path / "runs"
    for rounds in (2, 3):  # experiment_name=default: the same key default/frozenlake/iif-p50/clean/0 twice
        run_task(compose_config(["debug=smoke", f"env.rounds={rounds}", f"runs_root={runs}"]))
    refresh = refresh_from_runs(runs, tmp_path / "data", set())
    assert not refresh.files and not refresh.replaced


# ----------------------------------------------------------------------------- 4, 5. env=gym's env.id


def test_env_gym_without_an_env_id_is_refused_naming_the_key_and_two_ids():
    assert config_refusal("env=gym") == (
        "env=gym needs env.id=<a registered Gymnasium id>, e.g. env.id=CartPole-v1 or env.id=MountainCar-v0 (a "
        "third-party env as module:Id)"
    )


def test_an_out_of_date_env_id_is_one_line_naming_the_current_one_and_no_library_warning(tmp_path):
    result = cli("env=gym", "env.id=Taxi-v3", f"runs_root={tmp_path}")
    assert cli_refusal(result) == (
        "rlinfluence: config error: env.id=Taxi-v3 is an out-of-date version that gymnasium no longer makes; "
        "use env.id=Taxi-v4"
    )
    assert "\x1b[" not in result.stderr and not any(tmp_path.iterdir())


def test_every_env_id_the_docs_give_env_gym_is_one_it_trains():
    section = CONFIGURATION.split("## Any Gymnasium env")[1].split("\n## ")[0]
    ids = set(re.findall(r"`((?:[\w.]+:)?[\w-]+-v\d+)`", section))
    assert {"CartPole-v1", "Pendulum-v1", "minigrid:MiniGrid-Empty-5x5-v0"} <= ids, ids
    for env_id in sorted(ids - {"NoSuchEnv-v0"}):  # the docs' example of a refusal
        validate(compose_config(["env=gym", f"env.id={env_id}"]))


# ----------------------------------------------------------------------------- 6. replay: the nearest runs


def test_a_replay_that_matches_nothing_names_the_nearest_committed_runs():
    message = config_refusal("task=replay", "replay.run=main/acrobot/sgd/iif-p50/seed0")
    assert "(the nearest: main/acrobot/sgd/iif-p50-92a12d/seed0, " in message


# ----------------------------------------------------------------------------- 7. where the output went


def test_an_analysis_ends_saying_where_its_rows_went(tmp_path):
    overrides = ["task=intervene", "debug=smoke", "env.rounds=3", f"runs_root={tmp_path}"]
    result = cli(*overrides, stderr=subprocess.STDOUT)
    assert result.returncode == 0, result.stdout
    [rows] = tmp_path.rglob("intervene-*.csv")  # in <standard run dir>/analyses/
    assert result.stdout.strip().splitlines()[-1].startswith(f"rlinfluence: wrote {rows}; ")


def test_a_run_without_wandb_names_its_run_dir_as_it_starts(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "rlinfluence", "debug=smoke", f"runs_root={tmp_path}", "logger=disabled"],
        stderr=subprocess.PIPE,
        text=True,
    )
    first = process.stderr.readline() if process.stderr else ""
    process.communicate(timeout=300)
    [path] = [done.parent for done in tmp_path.rglob("DONE")]
    assert first == f"rlinfluence: training {path} (env.rounds=2)\n"


def test_help_says_analyses_write_into_their_run_dir():
    result = subprocess.run([sys.executable, "-m", "rlinfluence", "--help"], capture_output=True, text=True)
    assert "its rows in <run dir>/analyses/" in result.stdout
    assert "analyses: their rows under figures.data_dir" not in result.stdout


# ----------------------------------------------------------------------------- 11. the README


def test_the_readme_says_how_long_the_test_suite_takes():
    tests = README.split("Install and run the tests")[1].split("\n## ")[0]
    assert re.search(r"\d+ min", tests), tests


# ----------------------------------------------------------------------------- what a reader sees first


def test_the_citation_file_is_valid_cff_and_cites_the_paper():
    from cffconvert import Citation

    citation = Citation((REPO_ROOT / "CITATION.cff").read_text())
    citation.validate()  # jsonschema against the CFF 1.2.0 schema; raises on the first violation
    [paper] = citation.cffobj["references"]
    assert "A Snapshot of Influence" in paper["title"] and "10.48550/arXiv.2505.19281" in str(paper["identifiers"])
    assert (REPO_ROOT / "LICENSE").read_text().startswith("MIT License")


@pytest.mark.parametrize(
    "markdown",
    ["README.md", "paper_figures/README.md", "docs/README.md", "docs/results/index.md", "docs/results/engines.md"],
)
def test_every_image_the_readmes_and_docs_embed_is_committed(markdown):
    path = REPO_ROOT / markdown
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", path.read_text())
    assert images and all((path.parent / image).is_file() for image in images), images


def test_the_readmes_results_at_a_glance_quote_the_committed_tables():
    glance = README.split("## Results at a glance")[1].split("\n## ")[0]
    three_way = (REPO_ROOT / "paper_figures" / "fidelity_three_way.md").read_text()
    aggregates = (REPO_ROOT / "paper_figures" / "aggregates_improvement.md").read_text()
    rows = re.findall(r"^\| (MiniGrid|LunarLander) \((\d+–\d+)\) \| (.+) \| (.+) \| (.+) \|$", glance, re.M)
    assert len(rows) == 2, glance
    for env, rounds, paper, authors, ours in rows:
        assert f"| {env} | paper | — | 5 | {paper} |" in three_way
        assert f"| {env} | authors' code | {rounds} | 5 | {authors} |" in three_way
        assert f"| {env} | ours, clean protocol | {rounds} | 5 | {ours} |" in three_way
    assert "| All envs (mean) | 5 | 0.70 [0.57, 0.83] | 0.23 [0.12, 0.37] |" in aggregates
    assert "**0.70**\n[0.57, 0.83]" in glance and "0.23 [0.12, 0.37]" in glance


def test_the_engine_equivalence_page_quotes_the_committed_table():
    reading = (REPO_ROOT / "docs" / "results" / "engines.md").read_text().split("## What it says")[1]
    table = (REPO_ROOT / "paper_figures" / "engine_equivalence.md").read_text().splitlines()
    quoted = re.findall(r"([−+][\d.]+ \[[−+][\d.]+, [−+][\d.]+\])(?: points)?\s+\(p = (\d\.\d{3})\)", reading)
    rows = [row for row in table if row.startswith("| ") and "[" in row][1:]  # below the header, in its order
    assert len(quoted) == len(rows) == 3
    for (difference, p), row in zip(quoted, rows):
        assert f"| {difference.replace('−', '-')} |" in row and row.endswith(f"| {p} |"), row


def test_the_docs_which_filter_table_quotes_the_committed_leaderboard():
    section = RESULTS.split("## Which filter?")[1].split("\n## ")[0]
    leaderboard = {
        (cells[0], cells[1]): cells[5]
        for line in (REPO_ROOT / "paper_figures" / "filters_leaderboard.md").read_text().splitlines()
        if line.startswith("| ") and not line.startswith("| Env ")
        for cells in [[cell.strip() for cell in line.strip("|").split("|")]]
    }
    header, _, *rows = [line for line in section.splitlines() if line.startswith("|")]
    methods = [cell.strip() for cell in header.strip("|").split("|")][1:]
    quoted = {}
    for row in rows:
        env, *cells = [cell.strip() for cell in row.strip("|").split("|")]
        quoted.update({(env, method): cell for method, cell in zip(methods, cells, strict=True)})
    assert len(quoted) == 6 * 6
    for (env, method), cell in quoted.items():
        # Per env the point estimate, over all envs with its interval.
        assert leaderboard[(env, method)] == cell or leaderboard[(env, method)].startswith(f"{cell} ["), (env, method)


def test_the_readme_is_a_first_visits_page_that_links_the_docs():
    lines = README.splitlines()
    assert len(lines) <= 150 and lines[0] == "# rlinfluence" and "bin/rlinfluence" in lines[3], lines[:4]
    assert "](docs/reliability.md)" in README and "](docs/quickstart.md)" in README


MARKDOWN = [
    "README.md",
    "paper_figures/README.md",
    *sorted(str(page.relative_to(REPO_ROOT)) for page in (REPO_ROOT / "docs").rglob("*.md")),
]


@pytest.mark.parametrize("markdown", MARKDOWN)
def test_every_relative_link_resolves_on_disk_as_github_shows_it(markdown):
    # The docs site serves paper_figures/ at another path (docs/hooks.py); a link must work in both places.
    path = REPO_ROOT / markdown
    targets = re.findall(r"\]\(([^)\s#]+)[^)]*\)", path.read_text())
    assert [target for target in targets if "://" not in target and not (path.parent / target).exists()] == []
