"""Sweep manifests: one process per line, for ``sbatch --array`` with sbatch/run_array.sbatch.

A manifest lists the jobs of a sweep, one line of Hydra overrides (shell words) each,
with the run directory as a trailing comment (engine=stacked: a block of seeds, their
run directories as shell words), after a header that records where it came from::

    # rlinfluence manifest: one run per line (Hydra overrides, shell words)
    # commit: 3f2c9e1d... (uncommitted changes)
    # created: 2025-06-01T12:00:00+00:00
    # command: rlinfluence-manifest make +experiment=main -o manifests/main.txt
    # workdir: /home/me/rlinfluence
    # runs: 90
    +experiment=main env=frozenlake method=iif seed=0  # runs/main/frozenlake/sgd/iif-p50/seed0
    ...

Commands (``rlinfluence-manifest ...`` or ``python -m rlinfluence.launch ...``; launch/slurm.py)::

    make +experiment=main [overrides...] -o manifests/main.txt [--seeds-per-task N]
        Expand the sweep exactly as ``rlinfluence -m`` would (the overlay's
        ``hydra.sweeper.params`` together with sweeps on the command line: cartesian
        product, Hydra's override grammar), one line per job; an engine=stacked seed
        sweep is packed into seeds=[...] per config, or into blocks of N seeds.
    submit manifests/main.txt [--parallel K] [--dry-run] [-- sbatch options]
        sbatch the runs that are neither finished (``DONE`` in the run dir) nor queued,
        as arrays of at most MaxArraySize tasks, and print the job ids. Partition,
        account, time and memory come from ``launcher=slurm``'s config (including the
        site file conf/local/launcher/slurm.yaml); options after ``--`` win.
    status manifests/main.txt [--list]
        Count finished, queued or running, and remaining runs (each seed of a block;
        a block is finished when all its seeds are).

Run directories are relative to the ``workdir`` (where ``make`` ran, normally the
repository root); the jobs run there as well.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from rlinfluence.config.paths import CONFIG_DIR, REPO_ROOT
from rlinfluence.run.provenance import describe_code_version

DEFAULT_CONFIG_DIR = Path(CONFIG_DIR)
DEFAULT_SCRIPT = REPO_ROOT / "sbatch" / "run_array.sbatch"
CONFIG_NAME = "config"
TITLE = "rlinfluence manifest: one run per line (Hydra overrides, shell words)"

# ----------------------------------------------------------------------------- sweep expansion


def expand_sweep(params: Mapping[str, object] | None, overrides: Sequence[str]) -> list[list[str]]:
    """The runs of ``rlinfluence -m <overrides>``, each a list of override strings.

    ``params`` is the overlay's ``hydra.sweeper.params`` (key -> "a,b,c"). As in Hydra's
    basic sweeper, a command-line override replaces the sweep of the same key, every
    key contributes its list of values (a plain override: one), and the runs are the
    cartesian product. Keys given only on the command line come first in each line
    ("what you asked for, then what the sweep varies"); the values do not depend on it.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    swept = parser.parse_overrides([f"{key}={value}" for key, value in (params or {}).items()])
    given = parser.parse_overrides([o for o in overrides if o not in ("-m", "--multirun")])

    final = {ov.get_key_element(): ov for ov in [*swept, *given]}  # the command line wins
    swept_keys = [ov.get_key_element() for ov in swept]
    order = [ov.get_key_element() for ov in given if ov.get_key_element() not in swept_keys]
    order = list(dict.fromkeys(order + swept_keys))

    runs: list[list[str]] = [[]]
    for key in order:
        ov = final[key]
        if not ov.is_sweep_override():
            assert ov.input_line is not None  # parsed from a line
            values = [ov.input_line]
        elif ov.is_hydra_override():
            raise ValueError(f"sweeping over Hydra's own configuration is not supported: {ov.input_line!r}")
        elif not ov.is_discrete_sweep():
            raise ValueError(f"cannot enumerate {ov.input_line!r}: only choice and range sweeps are")
        else:
            values = [f"{key}={value}" for value in ov.sweep_string_iterator()]
        runs = [run + [value] for run in runs for value in values]
    return runs


def pack_seed_sweep(overrides: Sequence[str], seeds_per_job: int | None = None) -> dict[str, list[str]]:
    """`-m ... engine=stacked seed=<choice or range>`: each config's seeds in one process, as one job with
    seeds=[...] instead of a job per seed; with `seeds_per_job`, a job per block of that many seeds (the sweep
    seeds=[0,1],[2,3]). Returns {the seed sweep: the overrides that replace it} (`replaced`), empty when there is
    none to pack; ConfigError for one it cannot pack. The replacement pins seed to the first seed, so that an
    overlay's own seed sweep does not run each job again per seed. A seed swept by an overlay's
    hydra.sweeper.params alone is left as it is (one stacked job per seed), and so is an analysis's (a job per
    seed)."""
    from rlinfluence.choices import ConfigError
    from rlinfluence.config.engines import STACKED
    from rlinfluence.config.seeds import overrides_by_key

    parsed = overrides_by_key(overrides)
    if parsed is None:
        return {}  # Hydra says what is wrong with it
    engine, seed, task = parsed.get("engine"), parsed.get("seed"), parsed.get("task")
    if engine is None or engine.is_sweep_override() or engine.value() != STACKED or seed is None:
        return {}
    if task is not None and task.value() != "train":  # an analysis looks into one seed: a job per seed
        return {}
    if not seed.is_sweep_override():
        return {}
    if "seeds" in parsed or not seed.is_discrete_sweep():
        raise ConfigError(
            f"engine=stacked packs {seed.input_line} into seeds=[...]: give the seeds as a choice (seed=0,1,2) or "
            "range (seed='range(8)'), and not with seeds="
        )
    assert seed.input_line is not None  # parsed from a line
    seeds = list(seed.sweep_string_iterator())
    size = seeds_per_job or len(seeds)
    blocks = ",".join(f"[{','.join(seeds[i : i + size])}]" for i in range(0, len(seeds), size))
    return {seed.input_line: [f"seeds={blocks}", f"seed={seeds[0]}"]}


def overlay_seed_sweep(composer: Composer, overrides: Sequence[str]) -> list[str]:
    """`engine=stacked` with an overlay that sweeps `seed` and no `seed=` on the command line: the overlay's seed
    sweep spelt as a command-line word (`['seed=range(0,5)']`), so that it is packed as one given there is;
    else nothing."""
    from rlinfluence.config.engines import STACKED
    from rlinfluence.config.seeds import overrides_by_key

    parsed = overrides_by_key(overrides)
    if parsed is None or "seed" in parsed or "seeds" in parsed:
        return []  # Hydra says what is wrong with a line it refuses; a seed given on the line is the line's
    engine = parsed.get("engine")
    if engine is None or engine.is_sweep_override() or engine.value() != STACKED:
        return []
    seed_sweep = composer.sweep_params(overrides).get("seed")
    return [] if seed_sweep is None else [f"seed={seed_sweep}"]


def single_command(job: list[str]) -> list[str]:
    """A packed sweep job as a command of its own: its seeds= names the seeds, and the seed= that pinned an
    overlay's seed sweep for the expansion would be refused beside it (config/seeds.py)."""
    return [o for o in job if not o.startswith("seed=")] if any(o.startswith("seeds=") for o in job) else job


def replaced(words: Sequence[str], replacements: dict[str, list[str]]) -> list[str]:
    """`words` with each word that `replacements` names replaced by its words."""
    return [new for word in words for new in replacements.get(word, [word])]


# ----------------------------------------------------------------------------- manifest files


@dataclass
class Run:
    """A manifest line: one process's overrides, and the run dirs it trains (engine=stacked: a seed block's,
    one per seed; otherwise one), relative to the manifest's workdir unless absolute; none for a line written
    by hand (composed when needed)."""

    overrides: list[str]
    run_dirs: list[Path] = field(default_factory=list)

    def line(self) -> str:
        text = shlex.join(self.overrides)
        return f"{text}  # {shlex.join(str(d) for d in self.run_dirs)}" if self.run_dirs else text

    @classmethod
    def parse(cls, line: str) -> Run:
        overrides = shlex.split(line, comments=True)
        # The comment starts at the first '#' (after a blank) outside quotes: the first
        # cut whose left part parses to the same words.
        for match in re.finditer(r"\s#", line):
            try:
                if shlex.split(line[: match.start()]) == overrides:
                    return cls(overrides, [Path(d) for d in shlex.split(line[match.end() :])])
            except ValueError:  # the cut is inside quotes
                continue
        return cls(overrides)


@dataclass
class Manifest:
    runs: list[Run]
    header: dict[str, str] = field(default_factory=dict)

    @property
    def commit(self) -> str | None:
        value = self.header.get("commit", "")
        return value.split()[0] if re.match(r"[0-9a-f]{7,40}\b", value) else None

    @property
    def workdir(self) -> Path | None:
        return Path(self.header["workdir"]) if self.header.get("workdir") else None

    def dump(self) -> str:
        lines = [f"# {TITLE}"] + [f"# {key}: {value}" for key, value in self.header.items()]
        return "\n".join(lines + [run.line() for run in self.runs]) + "\n"

    def write(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.dump())
        tmp.replace(path)

    @classmethod
    def parse(cls, text: str) -> Manifest:
        """``# key: value`` comments before the first run form the header; other comments
        and blank lines are skipped; every other line is a run, counted from 0 (the same
        rule as sbatch/run_array.sbatch)."""
        header: dict[str, str] = {}
        runs: list[Run] = []
        for raw in text.splitlines():
            line = raw.strip()
            if line.startswith("#"):
                entry = re.match(r"#\s*([\w-]+):\s*(.*)$", line)
                if entry and not runs:
                    header[entry.group(1)] = entry.group(2)
            elif line:
                runs.append(Run.parse(line))
        return cls(runs, header)

    @classmethod
    def read(cls, path: Path) -> Manifest:
        return cls.parse(Path(path).read_text())


# ----------------------------------------------------------------------------- composing configs


class Composer:
    """Composes configs from conf/ the way ``rlinfluence`` does (use as a context manager)."""

    def __init__(self, config_dir: Path = DEFAULT_CONFIG_DIR, config_name: str = CONFIG_NAME):
        self.config_dir = Path(config_dir).resolve()
        self.config_name = config_name
        self._initialized = ExitStack()  # Hydra initialized with config_dir while the composer is in use

    def __enter__(self) -> Composer:
        from rlinfluence.config.compose import initialized

        self._initialized.enter_context(initialized(str(self.config_dir)))
        return self

    def __exit__(self, *exc) -> None:
        self._initialized.__exit__(*exc)

    def compose(self, overrides: Sequence[str], multirun: bool = False):
        """The full config (``hydra`` node included); HydraConfig is set to it for runs."""
        from hydra.core.global_hydra import GlobalHydra
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hydra = GlobalHydra.instance().hydra
        assert hydra is not None, "compose inside `with Composer(...)`"
        cfg = hydra.compose_config(
            config_name=self.config_name,
            overrides=list(overrides),
            run_mode=RunMode.MULTIRUN if multirun else RunMode.RUN,
            with_log_configuration=False,
        )
        if not multirun:
            HydraConfig.instance().set_config(cfg)
        return cfg

    def sweep_params(self, overrides: Sequence[str]) -> dict[str, object]:
        """``hydra.sweeper.params`` as ``rlinfluence -m <overrides>`` sees it."""
        from omegaconf import OmegaConf

        params = OmegaConf.select(self.compose(overrides, multirun=True), "hydra.sweeper.params")
        return cast(dict[str, object], OmegaConf.to_container(params)) if params is not None else {}

    def run_dirs(self, overrides: Sequence[str]) -> list[Path]:
        """The run dirs a job trains: engine=stacked's, one per seed; otherwise its one."""
        from rlinfluence.run.rundir import run_dir
        from rlinfluence.run.stacked import seed_configs

        return [Path(run_dir(cfg)) for cfg in seed_configs(self.compose(overrides))]


def _run_dirs_serial(config_dir: Path, config_name: str, runs: Sequence[Sequence[str]]) -> list[list[Path]]:
    with Composer(config_dir, config_name) as composer:
        return [composer.run_dirs(run) for run in runs]


def resolve_run_dirs(
    runs: Sequence[Sequence[str]],
    config_dir: Path = DEFAULT_CONFIG_DIR,
    config_name: str = CONFIG_NAME,
    jobs: int | None = None,
) -> list[list[Path]]:
    """Compose every run (which also checks it) and return its run dirs. Hydra needs
    ~0.1 s per composition, so large sweeps are spread over worker processes."""
    jobs = jobs or min(os.cpu_count() or 1, 8)
    if jobs <= 1 or len(runs) < 64:
        return _run_dirs_serial(config_dir, config_name, runs)
    size = -(-len(runs) // jobs)
    chunks = [runs[i : i + size] for i in range(0, len(runs), size)]
    with multiprocessing.get_context("fork").Pool(len(chunks)) as pool:
        parts = pool.starmap(_run_dirs_serial, [(config_dir, config_name, chunk) for chunk in chunks])
    return [d for part in parts for d in part]


def make_manifest(
    overrides: Sequence[str],
    config_dir: Path = DEFAULT_CONFIG_DIR,
    config_name: str = CONFIG_NAME,
    command: str | None = None,
    seeds_per_task: int | None = None,
) -> Manifest:
    """The manifest of ``rlinfluence -m <overrides>``, a line per job: an engine=stacked seed sweep is packed
    as ``rlinfluence -m`` packs it (`pack_seed_sweep`), with `seeds_per_task` into blocks of that many seeds.
    Jobs that share their run dirs are one job to ``rlinfluence`` (it resumes or skips by run dir): only the
    first is kept."""
    from rlinfluence.choices import require

    overrides = [o for o in overrides if o not in ("-m", "--multirun")]
    with Composer(config_dir, config_name) as composer:
        overrides = [*overrides, *overlay_seed_sweep(composer, overrides)]
    packing = pack_seed_sweep(overrides, seeds_per_task)
    require(
        seeds_per_task is None or (bool(packing) and seeds_per_task >= 1),
        f"--seeds-per-task={seeds_per_task} packs a seed sweep of engine=stacked into blocks of that many seeds "
        "(>= 1): give one, e.g. engine=stacked seed='range(20)' --seeds-per-task 10",
    )
    packed = replaced(overrides, packing)
    with Composer(config_dir, config_name) as composer:
        params = composer.sweep_params(packed)
    expanded = [single_command(job) for job in expand_sweep(params, packed)]
    dirs = resolve_run_dirs(expanded, config_dir, config_name)

    runs: list[Run] = []
    first: dict[tuple[Path, ...], Run] = {}
    for overrides_, run_dirs in zip(expanded, dirs):
        key = tuple(run_dirs)
        if key in first:
            print(
                f"warning: dropped {shlex.join(overrides_)!r}: same run dir ({shlex.join(map(str, key))}) as "
                f"{shlex.join(first[key].overrides)!r}",
                file=sys.stderr,
            )
            continue
        first[key] = Run(overrides_, run_dirs)
        runs.append(first[key])

    header = {
        "commit": describe_code_version(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command or shlex.join(["rlinfluence-manifest", "make", *overrides]),
        "workdir": os.getcwd(),
        "runs": str(sum(len(run.run_dirs) for run in runs)),
    }
    if len(runs) != int(header["runs"]):
        header["tasks"] = str(len(runs))
    return Manifest(runs, header)


# ----------------------------------------------------------------------------- arrays


def compress_ranges(indices: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2,5,7-8" (the ``sbatch --array`` syntax)."""
    values = sorted(set(indices))
    parts: list[str] = []
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            low, high = values[start], values[i - 1]
            parts.append(str(low) if low == high else f"{low}-{high}")
            start = i
    return ",".join(parts)


@dataclass(frozen=True)
class ArrayChunk:
    """One ``sbatch --array``: manifest run = ``offset`` + array index."""

    offset: int
    indices: tuple[int, ...]

    @property
    def spec(self) -> str:
        return compress_ranges(self.indices)

    @property
    def runs(self) -> list[int]:
        return [self.offset + i for i in self.indices]


def split_into_arrays(runs: Iterable[int], max_array_size: int) -> list[ArrayChunk]:
    """Group run numbers into arrays whose indices stay below MaxArraySize (SLURM bounds
    the largest index, not just the count): run r goes to the array with offset
    ``r - r % max_array_size``."""
    if max_array_size < 1:
        raise ValueError(f"max_array_size must be >= 1, not {max_array_size}")
    chunks: dict[int, list[int]] = {}
    for run in sorted(set(runs)):
        offset = run - run % max_array_size
        chunks.setdefault(offset, []).append(run - offset)
    return [ArrayChunk(offset, tuple(indices)) for offset, indices in sorted(chunks.items())]
