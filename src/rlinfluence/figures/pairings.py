"""Each filtering arm against standard PPO of the same seed, per protocol pairing, with robust summaries:
our protocol against the authors', and the tables that need more than the paper's mean ± std."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rlinfluence import metrics
from rlinfluence.figures import paper
from rlinfluence.figures.arms import IIF, STANDARD, Arm
from rlinfluence.figures.control_runs import Runs
from rlinfluence.figures.formatting import MISSING_CELL, pm, pm_over_seeds
from rlinfluence.figures.quantities import efficiency
from rlinfluence.figures.requirements import Output
from rlinfluence.run.identity import CLEAN


@dataclass(frozen=True)
class Pairing:
    """A method's runs under one protocol against standard PPO's runs under another."""

    protocol: str
    std_protocol: str

    @property
    def label(self) -> str:
        return f"{self.protocol} vs PPO {self.std_protocol}"


def pairings(protocols: tuple[str, ...]) -> tuple[Pairing, ...]:
    """Each protocol against standard PPO under the same protocol; each other protocol also against
    clean standard PPO: the authors' pairing (their IIF rounds restarted, their baseline was one
    continuous SB3 run), which credits IIF with whatever the protocol itself changes."""
    same = tuple(Pairing(protocol, protocol) for protocol in protocols)
    return same + tuple(Pairing(protocol, CLEAN) for protocol in protocols if protocol != CLEAN)


def pick(runs: pd.DataFrame, arm: Arm, protocol: str) -> pd.DataFrame:
    return runs[(runs["arm"] == arm.label) & (runs["protocol"] == protocol)]


def paired_efficiency(rows: pd.DataFrame, arm: Arm, pairing: Pairing) -> pd.DataFrame:
    """Per (env, seed): SE_ave, SE_peak, RT_peak of `arm` under pairing.protocol against standard PPO
    of the same seed under pairing.std_protocol."""
    return pd.DataFrame(
        [
            {
                "env": env,
                "seed": seed,
                **efficiency(pick(runs, STANDARD, pairing.std_protocol), pick(runs, arm, pairing.protocol)),
            }
            for (env, seed), runs in rows.groupby(["env", "seed"], sort=True)
        ]
    )


def seed_mean_curve(runs: pd.DataFrame) -> np.ndarray:
    return runs.groupby("round")["test_return"].mean().sort_index().to_numpy(dtype=float)


def protocol_table(output: Output[Runs], rows: pd.DataFrame) -> pd.DataFrame:
    """SE_ave and SE_peak of each filtering arm, per env and protocol pairing: the paper's mean ± std
    over seeds, then robust summaries (median, IQM with a bootstrap CI, the mean without the worst
    seed) and SE_ave computed once on the seed-mean curves."""
    table = []
    for env in output.runs.envs:
        env_rows = rows[rows["env"] == env]
        for pairing in pairings(output.runs.protocols):
            for arm in output.runs.arms:
                if arm.label == STANDARD.label:  # the reference (possibly shared from another experiment)
                    continue
                per_seed = paired_efficiency(env_rows, arm, pairing)
                se_ave = per_seed["SE_ave"]
                ci = metrics.bootstrap_ci(se_ave)
                pooled = metrics.se_ave(
                    seed_mean_curve(pick(env_rows, STANDARD, pairing.std_protocol)),
                    seed_mean_curve(pick(env_rows, arm, pairing.protocol)),
                )
                reported = paper.FIG6B.get(env, {}).get("SE_ave") if arm == IIF else None
                table.append(
                    {
                        "Env": paper.ENV_TITLES[env],
                        "Protocol": pairing.label,
                        "Arm": arm.label,
                        "Seeds": str(len(per_seed)),
                        "SE_ave mean ± std": pm_over_seeds(se_ave, 1),
                        "SE_ave median": f"{se_ave.median():.1f}",
                        "SE_ave IQM [95 % CI]": f"{ci.mean:.1f} [{ci.low:.1f}, {ci.high:.1f}]",
                        "SE_ave without worst seed": f"{metrics.mean_without_worst(se_ave):.1f}",
                        "SE_ave of seed-mean curves": f"{pooled:.1f}",
                        "SE_peak mean ± std": pm_over_seeds(per_seed["SE_peak"], 1),
                        "SE_peak median": f"{per_seed['SE_peak'].median():.1f}",
                        "SE_ave even levels mean ± std (median)": (
                            f"{pm_over_seeds(per_seed['SE_ave_even'], 1)} ({per_seed['SE_ave_even'].median():.1f})"
                        ),
                        "Paper SE_ave": pm(*reported, 1) if reported else MISSING_CELL,
                    }
                )
    return pd.DataFrame(table)
