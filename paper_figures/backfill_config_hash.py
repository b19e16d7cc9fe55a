"""Give the committed tidy rows made before the tidy CSVs carried `config_hash` their run's fingerprint, and
the committed analyses made before analyses carried an identity theirs.

The run dirs behind those rows are gone, but each row names what made it: the experiment overlay, env,
method tag, protocol and seed; its evaluation is the committed runs' (`control_runs.CPU_EVALUATION`,
reproduce_cpu.sh). Each run's command is composed from those, exactly as `rlinfluence` composes a fresh
run of it, and its `config_hash` taken as the run dir's (config_hash). The script first
recomputes the hash of every committed run that carries one and stops unless all of them come out
equal; then it fills in the empty ones and checks that no other value of any row changed.
The language-model rows (data/lm/runs.csv) are not filled: their arms differ by `target`, which is in
their hash, so their env's runs would no longer share one.

Each committed analysis CSV (data/analyses/<analysis>/<env>-seed<k>[<variant>].csv) was made by the command
its figure documents (reproduce_section4.sh, reproduce_beyond.sh): it gets that command's identity in the
.json beside it (analysis_data.documented_identities), after a check that its rows are that command's (its env,
seed and rounds).

    python paper_figures/backfill_config_hash.py          # check, fill, write
    python paper_figures/backfill_config_hash.py --check  # check only: exit 1 if a hash is missing or differs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
from hydra import compose, initialize_config_dir

from rlinfluence.analyses.standard_run import analysis_identity
from rlinfluence.config.paths import CONFIG_DIR
from rlinfluence.figures import catalogue, runs
from rlinfluence.figures.analysis_data import documented_identities
from rlinfluence.figures.committed import Refresh
from rlinfluence.figures.control_runs import CPU_EVALUATION
from rlinfluence.figures.gather import identity_path
from rlinfluence.run import rundir
from rlinfluence.run.identity import PROTOCOL_SWITCHES, config_hash, non_default_settings

DATA_DIR = Path(__file__).resolve().parent / "data"
SWITCHES = {name: key for key, _, name in PROTOCOL_SWITCHES}
RUN_KEY = runs.RUN_KEY + ["optimizer"]
OVERLAYS = {path.stem for path in (Path(CONFIG_DIR) / "experiment").glob("*.yaml")}


def control_overrides(run) -> list[str]:
    """The overrides of the command that made a control run's rows (one row of the run's tidy rows)."""
    overrides = [f"env={run.env}", f"method={run.method}", f"seed={run.seed}", *CPU_EVALUATION.get(run.env, "").split()]
    overrides.insert(
        0, f"+experiment={run.experiment}" if run.experiment in OVERLAYS else f"experiment_name={run.experiment}"
    )
    if run.optimizer != "sgd" or run.env in ("bipedalwalker", "pong"):  # those envs switch to Adam themselves
        overrides.append(f"optimizer={run.optimizer}")
    if run.method_tag.endswith("-pauto"):
        overrides.append("method.p=auto")
    elif pd.notna(run.p):
        overrides.append(f"method.p={run.p:g}")
    if run.method == "advantage":
        overrides.append(f"method.variant={run.method_tag.split('-')[1]}")
    if run.protocol in ("clean", "paper"):
        overrides.append(f"protocol={run.protocol}")
    else:
        overrides += [f"{SWITCHES[name]}=true" for name in run.protocol.split("-")]
    return overrides


def composed_hash(overrides: list[str], run) -> tuple[str, dict]:
    """The run's config_hash as its tidy rows store it, and its non-default settings; refuses a command
    whose run dir would not be the row's (another method tag or protocol)."""
    cfg = compose("config", overrides=overrides)
    tag = rundir.method_tag(cfg.method)
    protocol = rundir.protocol_tag(cfg)
    if tag != run.method_tag or protocol != run.protocol:
        raise SystemExit(f"{' '.join(overrides)} makes {tag}/{protocol}, the rows are {run.method_tag}/{run.protocol}")
    return runs.settings_hash({"config_hash": config_hash(cfg)}), non_default_settings(cfg)


def backfill(path: Path, settings: dict) -> tuple[pd.DataFrame, int]:
    """The CSV's rows with every run's config_hash checked or filled in; how many runs were filled."""
    rows = runs.read_tidy_csv(path)
    filled = 0
    for key, run_rows in rows.groupby(RUN_KEY, sort=False):
        run = next(run_rows.itertuples())
        digest, non_default = composed_hash(control_overrides(run), run)
        settings[digest] = non_default
        stored = set(run_rows["config_hash"].dropna())
        if stored and stored != {digest}:
            raise SystemExit(
                f"{path}: {'/'.join(map(str, key))} carries config_hash {stored}, its command "
                f"({' '.join(control_overrides(run))}) gives {digest}"
            )
        if not stored:
            rows.loc[run_rows.index, "config_hash"] = digest
            filled += 1
    return rows, filled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if a hash is missing or differs")
    args = parser.parse_args()
    refresh = Refresh(DATA_DIR)
    missing = 0
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        for path in sorted(DATA_DIR.glob("*.csv")):
            before = runs.read_tidy_csv(path)
            after, filled = backfill(path, refresh.settings)
            others = [column for column in before.columns if column != "config_hash"]
            assert after[others].equals(before[others]), f"{path}: a value besides config_hash changed"
            print(
                f"{path.relative_to(DATA_DIR.parent)}: {filled} runs filled, "
                f"{before.drop_duplicates(RUN_KEY)['config_hash'].notna().sum()} checked"
            )
            missing += filled
            if filled:
                refresh.files[path] = with_hashes(path, before, after)
        for path, identity in documented_identities(DATA_DIR, catalogue.OUTPUTS).items():
            check_analysis_rows(path, identity)
            if not identity_path(path).exists():
                refresh.files[identity_path(path)] = json.dumps(identity, indent=2, sort_keys=True).encode()
                missing += 1
    print(f"{missing} runs and analyses without a fingerprint")
    if not args.check:
        refresh.write()
    return 1 if args.check and missing else 0


def check_analysis_rows(path: Path, identity: dict) -> None:
    """The CSV's rows are those of the identity's command: its env, seed, and the rounds it analyses."""
    overrides = [
        f"task={identity['analysis']}",
        f"env={identity['env']}",
        f"seed={identity['seed']}",
        *(
            f"{key}={json.dumps(value, separators=(',', ':'))}"
            for key, value in identity["non_default"].items()
            if key != "protocol"
        ),
    ]
    cfg = compose("config", overrides=overrides)
    if analysis_identity(cfg, identity["analysis"], identity["variant"]) != identity:
        raise SystemExit(f"{path}: {' '.join(overrides)} does not give back its identity")
    rows = pd.read_csv(path)
    rounds = list(cfg.analysis[identity["analysis"]].rounds) or list(range(1, cfg.env.rounds + 1))
    found = (set(rows["env"]), set(rows["seed"]), sorted(set(rows["round"])))
    if found != ({identity["env"]}, {identity["seed"]}, rounds):
        raise SystemExit(
            f"{path}: rows of env/seed/rounds {found}, its command's are {identity['env']}/{identity['seed']}/{rounds}"
        )


def with_hashes(path: Path, before: pd.DataFrame, after: pd.DataFrame) -> bytes:
    """The CSV with only the config_hash field of each line rewritten: every other byte stays as committed."""
    lines = path.read_text().splitlines(keepends=True)
    column = before.columns.get_loc("config_hash")
    out = [lines[0]]
    for line, digest in zip(lines[1:], after["config_hash"]):
        fields = line.rstrip("\n").split(",")
        fields[column] = digest
        out.append(",".join(fields) + "\n")
    return "".join(out).encode()


if __name__ == "__main__":
    sys.exit(main())
