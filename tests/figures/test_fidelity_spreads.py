"""figures/fidelity.reported_spreads: the statistics a paper might have reported as SE_ave's "±" (issue 42),
on two seeds whose values can be worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlinfluence.figures.arms import IIF, STANDARD
from rlinfluence.figures.fidelity import AUTHORS, reported_spreads

# Standard PPO sets levels 1, 2, 3 at rounds 1, 2, 3 on both seeds. Seed 0's IIF reaches them at rounds
# 1, 1, 2 (reductions 0, 50, 33.3 %: SE_ave 27.8); seed 1's IIF is standard PPO (SE_ave 0). The seed-mean
# IIF curve, 0, 1.5, 2.5, 3, reaches each level when standard PPO does: SE_ave 0.
CURVES = {
    (STANDARD.label, 0): [0.0, 1.0, 2.0, 3.0],
    (IIF.label, 0): [0.0, 2.0, 3.0, 3.0],
    (STANDARD.label, 1): [0.0, 1.0, 2.0, 3.0],
    (IIF.label, 1): [0.0, 1.0, 2.0, 3.0],
}


def rows() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"arm": arm, "seed": seed, "round": k, "test_return": value, "protocol": AUTHORS}
            for (arm, seed), values in CURVES.items()
            for k, value in enumerate(values)
        ]
        # another protocol's runs of the same seeds, which must not count
        + [{"arm": IIF.label, "seed": 0, "round": k, "test_return": 9.0, "protocol": "other"} for k in range(4)]
    )


def test_each_statistic_as_worked_out_by_hand():
    spreads = reported_spreads(rows(), IIF.label, AUTHORS)
    per_seed = np.array([(0 + 50 + 100 / 3) / 3, 0.0])
    assert spreads.per_seed_mean == pytest.approx(per_seed.mean())
    assert spreads.per_seed_std == pytest.approx(per_seed.std(ddof=1))
    assert spreads.standard_error == pytest.approx(per_seed.std(ddof=1) / np.sqrt(2))
    # The seed-mean curves' SE_ave is no mean of the seeds' values; resampling seed 0 twice gives its 27.8.
    assert spreads.mean_curves.mean == 0.0
    assert (spreads.mean_curves.low, spreads.mean_curves.high) == pytest.approx((0.0, per_seed[0]))
