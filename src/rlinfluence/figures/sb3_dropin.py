"""IIF dropped into stock stable-baselines3 PPO (rlinfluence.sb3) beside our own IIF and the paper.

The stock SB3 runs come from `benchmarks/sb3_iif_study.py` (SB3's PPO at the paper's FrozenLake and
LunarLander settings, with and without IIF, tidy rows of experiment `sb3`, protocol `sb3`): round k is the
test after k updates, round 0 the initial policy, as in our runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from rlinfluence.figures.arms import IIF, STANDARD
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.fidelity import ExternalRuns, Sources, paper_row, se_per_seed, source_row
from rlinfluence.figures.formatting import MISSING_CELL
from rlinfluence.figures.requirements import Output
from rlinfluence.figures.runs import SB3_EXPERIMENT
from rlinfluence.run.identity import CLEAN

SB3 = SB3_EXPERIMENT  # experiment and protocol of paper_figures/data/sb3.csv
# The protocol of its runs without gradient clipping (max_grad_norm = inf, as the authors' patched SB3;
# fidelity_leads.py, lead 3)
SB3_NO_CLIPPING = "sb3-noclip"
SB3_ENVS = ("frozenlake", "lunarlander")


@dataclass(frozen=True)
class SB3Runs(ExternalRuns):
    """Stock SB3 PPO and SB3 PPO + IIF, made by benchmarks/sb3_iif_study.py, not by rlinfluence's loop."""

    flags: str = ""  # the study's variant, e.g. " --no-grad-clipping"

    def command_for(self, env: str) -> str:
        return f"python benchmarks/sb3_iif_study.py --env {env}{self.flags}"


SB3_SOURCE, OURS_SOURCE = "stock SB3 + IIF vs stock SB3", "ours: IIF vs standard PPO"
SB3_RUNS = SB3Runs(SB3, SB3_ENVS, (STANDARD, IIF), seeds=5, protocols=(SB3,))
SB3_NO_CLIPPING_RUNS = replace(SB3_RUNS, protocols=(SB3_NO_CLIPPING,), all_seeds=True, flags=" --no-grad-clipping")
DROPIN_RUNS = Sources(((SB3_SOURCE, SB3_RUNS), (OURS_SOURCE, Runs("main", (STANDARD, IIF), envs_needed=SB3_ENVS))))


def dropin_table(output: Output[Sources], rows: pd.DataFrame) -> pd.DataFrame:
    table = []
    for env in output.runs.envs:
        table.append(paper_row(env))
        for source, protocol in ((SB3_SOURCE, SB3), (OURS_SOURCE, CLEAN)):
            source_rows = rows[(rows["env"] == env) & (rows["source"] == source)]
            per_seed = se_per_seed(source_rows, IIF.label, protocol, None)
            table.append(source_row(env, source, f"0–{int(source_rows['round'].max())}", per_seed))
    return pd.DataFrame(table).fillna(MISSING_CELL)


OUTPUTS: tuple[Output, ...] = (
    Output(
        "sb3_dropin",
        "IIF in stock SB3",
        "IIF dropped into stock stable-baselines3 PPO (rlinfluence.sb3; benchmarks/sb3_iif_study.py: SB3 "
        "2.9.2's PPO at the paper's settings, SGD 5e-3, SB3's other defaults incl. gradient clipping at 0.5; "
        "FrozenLake p = 50 %, 100 test episodes of the stochastic policy a round; LunarLander p = 12.5 %, 50) "
        "against stock SB3 PPO of the same seed, beside our IIF against our standard "
        "PPO (Fig. 6b's runs, clean protocol) and the paper's Fig. 6b. Mean ± std over seeds (the paper's "
        "statistic), median, IQM with a 95 % percentile-bootstrap CI (scipy, 10,000 resamples), per-seed values "
        "in seed order; final return: the last round's test return.",
        DROPIN_RUNS,
        dropin_table,
    ),
)
