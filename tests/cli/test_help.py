"""What the CLI shows (cli.py): `--help` names every task and option, and library notices meant for
developers are not shown."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import warnings
from pathlib import Path

from rlinfluence.cli import quiet_libraries
from rlinfluence.config.paths import CONFIG_DIR
from rlinfluence.run.tasks import task_names


def test_help_names_every_task_and_every_option_of_every_group():
    result = subprocess.run(
        [sys.executable, "-m", "rlinfluence", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and "README.md" in result.stdout and "--cfg job" in result.stdout
    assert "ppo:" not in result.stdout  # the config dump stays behind --cfg
    assert not re.search(r"issues? \d", result.stdout)  # our issue tracker's numbers mean nothing to a user (issue 55)
    for task in task_names():
        assert f"\n  {task} " in result.stdout, task
    for group in Path(CONFIG_DIR).iterdir():
        if group.is_dir() and group.name != "local":  # site settings, gitignored
            assert f"\n  {group.name} " in result.stdout, group.name
            for option in group.glob("*.yaml"):
                assert option.stem in result.stdout, f"{group.name}={option.stem}"


def test_help_is_answered_without_importing_torch():
    """Hydra answers --help before any command runs, so the seconds torch takes to import are not spent on it
    (issue 55: --help took 7 s)."""
    answer = (
        "import sys\nfrom rlinfluence.console import main\ntry:\n    main()\nfinally:\n    print(sorted(sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", answer, "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Usage" in result.stdout, result.stderr
    assert "'torch'" not in result.stdout.splitlines()[-1]


def shown_notices(caplog, quiet: bool) -> tuple[list[str], str]:
    """The warnings and the log of a transformers-style FutureWarning and a bar chart that draws matplotlib's
    categorical-units note, with or without quiet_libraries()."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    caplog.clear()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")  # each time, not once per line of code: the two calls warn alike
        if quiet:
            quiet_libraries()
        warnings.warn("transformers: `x` is deprecated", FutureWarning, stacklevel=1)
        figure, axes = pyplot.subplots()
        axes.bar(["1", "2"], [1, 2])  # strings that parse as numbers: matplotlib's categorical-units note
        pyplot.close(figure)
    return [str(warning.message) for warning in caught], caplog.text


def test_library_notices_are_not_shown(caplog):
    category = logging.getLogger("matplotlib.category")
    level = category.level
    category.setLevel(logging.NOTSET)  # as before quiet_libraries(), which a CLI call in this process may have made
    try:
        # Shown without quiet_libraries(): if a library stops giving its notice, this fails rather than the
        # check below passing with nothing to hide.
        caught, log = shown_notices(caplog, quiet=False)
        assert "transformers: `x` is deprecated" in caught and "categorical units" in log
        caught, log = shown_notices(caplog, quiet=True)
        assert not caught and "categorical units" not in log
    finally:
        category.setLevel(level)
