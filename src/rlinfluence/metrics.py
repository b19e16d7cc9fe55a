"""Training-efficiency metrics of the paper (§5.2, App. B.8–B.9), as pure functions on curves.

A *curve* is a 1-D array indexed by round: entry k is the mean test return of the policy after k
completed PPO updates, so entry 0 evaluates the initial policy that both arms share. NaN marks a
round that was not evaluated (eval cadence > 1); such rounds never reach a level and never set one.

Speed-ups compare a method (IIF, or a baseline) with standard PPO run with the same seed. The paper
leaves several details open; docs/metrics.md states the choices made here, and each function's
docstring says which it makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

# Wall-clock time that counts towards RT_peak: everything a training round does except evaluation
# (which both arms pay equally and which the paper's runtime table leaves out). Selection time is
# not in the tidy results and is negligible next to influence (a sort of the scores).
TRAINING_TIME_COLUMNS = ("time_collect", "time_influence", "time_update")


def first_round_reaching(curve, level: float, start: int = 1) -> int | None:
    """m(v): the earliest round k >= `start` whose test return is >= `level`; None if none is.

    Reaching is inclusive (a tie counts), as in the paper's "test return ≥ v". By default round 0
    is not searched: it evaluates the shared initial policy, so rounds count completed updates.
    """
    curve = np.asarray(curve, dtype=float)
    reached = np.flatnonzero(curve[start:] >= level)  # NaN compares False: unevaluated rounds skip
    return int(reached[0]) + start if reached.size else None


def se_levels(std_curve) -> tuple[np.ndarray, np.ndarray]:
    """The performance levels of SE_ave: the running-maximum records of the standard curve.

    A round k >= 1 is a record when its return is strictly above every earlier return, round 0
    included, so every level is an improvement over the shared initial policy. Returns the levels v
    and the rounds m_std(v) = k where standard PPO first reached them (both strictly increasing).
    A plateau (a tie with the running maximum) sets no new level.
    """
    curve = np.asarray(std_curve, dtype=float)
    filled = np.where(np.isnan(curve), -np.inf, curve)
    best_before = np.maximum.accumulate(filled)[:-1]
    rounds = np.flatnonzero(filled[1:] > best_before) + 1
    return curve[rounds], rounds


@dataclass(frozen=True)
class LevelReductions:
    """For each level v of the standard curve: m_std(v), m_method(v) and the round reduction."""

    levels: np.ndarray
    std_rounds: np.ndarray
    method_rounds: np.ndarray  # float; NaN where the method never reaches the level

    @property
    def reached(self) -> np.ndarray:
        return ~np.isnan(self.method_rounds)

    @property
    def n_unreached(self) -> int:
        return int((~self.reached).sum())

    @property
    def reductions(self) -> np.ndarray:
        """(1 − m_method(v) / m_std(v)) · 100 %; negative when the method is slower.

        A level the method never reaches counts as 0 % (docs/metrics.md#sample-efficiency), so an unreached
        level neither rewards nor punishes the method; `n_unreached` says how often that happened.
        """
        return np.where(self.reached, (1.0 - self.method_rounds / self.std_rounds) * 100.0, 0.0)


def even_levels(std_curve, n_levels: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """A sensitivity variant of `se_levels`: n levels evenly spaced over standard PPO's improvement,
    v_j = R_0 + j/n · (R_peak − R_0), j = 1..n, with the rounds where it first reaches them.

    Running-maximum records crowd near a noisy plateau (many of FrozenLake's levels lie within 1 % of
    the peak); even levels weigh every part of the learning curve alike. Empty when PPO never improves."""
    curve = np.asarray(std_curve, dtype=float)
    peak = standard_peak(curve)
    if np.isnan(peak):
        return np.array([]), np.array([], dtype=int)
    # min(): rounding must not lift the top level above the peak it stands for.
    levels = np.minimum(curve[0] + (peak - curve[0]) * np.arange(1, n_levels + 1) / n_levels, peak)
    return levels, np.array([first_round_reaching(curve, v) for v in levels])


def level_reductions(std_curve, method_curve, levels=se_levels) -> LevelReductions:
    """Round reductions at every level of `levels(std_curve)` (the paper's: `se_levels`).

    The two curves may have different lengths (e.g. a shorter IIF run): the levels come from the
    whole standard curve, and the method is searched over the whole of its own curve.
    """
    levels, std_rounds = levels(std_curve)
    method_rounds = [first_round_reaching(method_curve, v) for v in levels]
    return LevelReductions(
        levels=levels,
        std_rounds=std_rounds,
        method_rounds=np.array([np.nan if m is None else m for m in method_rounds], dtype=float),
    )


def se_ave(std_curve, method_curve, levels=se_levels) -> float:
    """SE_ave in %: the mean round reduction over all levels of the standard curve (`levels`: the
    paper's running-maximum records, or `even_levels` for the sensitivity check).

    NaN when standard PPO never improves on its initial policy (there is no level to average).
    """
    reductions = level_reductions(std_curve, method_curve, levels).reductions
    return float(reductions.mean()) if reductions.size else float("nan")


def se_peak(std_curve, method_curve) -> float:
    """SE_peak in %: the round reduction at the peak of standard training (its last level).

    0 % when the method never reaches the peak; NaN when standard PPO has no level.
    """
    reductions = level_reductions(std_curve, method_curve).reductions
    return float(reductions[-1]) if reductions.size else float("nan")


def training_time(frame: pd.DataFrame) -> np.ndarray:
    """Per-round training wall-clock seconds of one run: collection + influence + update.

    Evaluation is excluded (docs/metrics.md#runtime). Round 0 has no training, so its entry is 0.
    """
    return frame[list(TRAINING_TIME_COLUMNS)].sum(axis=1).to_numpy(dtype=float)


def time_to_reach(curve, round_times, level: float) -> float:
    """T(m(v)): cumulative training seconds up to and including the round that first reaches v.

    NaN when the curve never reaches v. `round_times[k]` is the time spent in round k.
    """
    curve, round_times = np.asarray(curve, dtype=float), np.asarray(round_times, dtype=float)
    if curve.shape != round_times.shape:
        raise ValueError(f"curve has {curve.size} rounds but round_times has {round_times.size}")
    m = first_round_reaching(curve, level)
    return float("nan") if m is None else float(round_times[: m + 1].sum())


def standard_peak(std_curve) -> float:
    """v_peak: the best return standard PPO reached after round 0 (its last level); NaN if none."""
    levels, _ = se_levels(std_curve)
    return float(levels[-1]) if levels.size else float("nan")


def rt_peak(std_curve, std_round_times, method_curve, method_round_times) -> float:
    """RT_peak in %: 1 − T_method(m_method(v_peak)) / T_std(m_std(v_peak)), v_peak the std peak.

    T is cumulative training time (see `training_time`). This is the paper's §5.2 definition; its
    Table 5 numbers instead divide by the standard run's *whole* runtime, which equals this when the
    standard peak is the last round. As for SE, a peak the method never reaches counts as 0 % and
    no level at all gives NaN.
    """
    peak = standard_peak(std_curve)
    if np.isnan(peak):
        return float("nan")
    method_time = time_to_reach(method_curve, method_round_times, peak)
    if np.isnan(method_time):
        return 0.0
    return (1.0 - method_time / time_to_reach(std_curve, std_round_times, peak)) * 100.0


class ConfidenceInterval(NamedTuple):
    mean: float
    low: float
    high: float
    n: int


def t_interval(samples, confidence: float = 0.95) -> ConfidenceInterval:
    """Student-t confidence interval of the mean of `samples` (e.g. one value per seed).

    Half-width = t_{(1+confidence)/2, n−1} × s/√n with s the sample standard deviation. It suits the
    paired gains of the paper's 3–5 seeds (Table 4) better than a bootstrap, which is too narrow with so
    few; a bounded return's curve takes `mean_band`, since this interval can pass the bounds. With fewer
    than 2 samples the bounds are NaN.
    """
    samples = np.asarray(samples, dtype=float)
    n, mean = samples.size, float(samples.mean())
    if n < 2:
        return ConfidenceInterval(mean, float("nan"), float("nan"), n)
    half_width = stats.t.ppf((1 + confidence) / 2, n - 1) * samples.std(ddof=1) / np.sqrt(n)
    return ConfidenceInterval(mean, mean - half_width, mean + half_width, n)


def final_return_ci(method_final, std_final, confidence: float = 0.95) -> ConfidenceInterval:
    """Table 4: t-interval of the paired final-return gain (method − standard PPO) over seeds.

    `method_final[i]` and `std_final[i]` must come from the same seed; with the paper's 5 seeds the
    half-width is t_{0.975,4} (2.776) × the standard error of the gains.
    """
    method_final, std_final = np.asarray(method_final, dtype=float), np.asarray(std_final, dtype=float)
    if method_final.shape != std_final.shape:
        raise ValueError(f"paired finals differ in length: {method_final.size} vs {std_final.size}")
    return t_interval(method_final - std_final, confidence)


# ---------------------------------------------------------------- robust statistics over seeds
# A few seeds that stall dominate a mean over 5–10 seeds. These summaries sit beside the paper's
# mean ± std (which stays the headline), following Agarwal et al. (2021): the median, the
# interquartile mean and a bootstrap CI over seeds, with a fixed resampling seed so that
# regenerated tables are byte-identical.

BOOTSTRAP_RESAMPLES = 10_000


def percentile_bootstrap(samples, statistic, confidence: float, seed: int, axis: int = 0):
    """scipy's percentile bootstrap as every CI here takes it: `BOOTSTRAP_RESAMPLES` resamples drawn from
    `seed` (so a regenerated table is byte-identical), each sample in `samples` resampled on its own (one
    stratum each). Returns the interval's (low, high)."""
    result = stats.bootstrap(
        samples,
        statistic,
        axis=axis,
        confidence_level=confidence,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return result.confidence_interval.low, result.confidence_interval.high


def iqm(samples, axis: int | None = None):
    """Interquartile mean: the mean of the middle 50 % of the values (25 % trimmed from each end).
    `axis` lets scipy's bootstrap evaluate all resamples in one call."""
    return stats.trim_mean(np.asarray(samples, dtype=float), 0.25, axis=axis)


def bootstrap_ci(samples, statistic=iqm, confidence: float = 0.95, seed: int = 0) -> ConfidenceInterval:
    """Percentile-bootstrap CI of `statistic` over the seeds of one environment (one stratum).

    scipy's `stats.bootstrap`, `BOOTSTRAP_RESAMPLES` resamples drawn from `seed`. NaN bounds with
    fewer than 2 samples or when every sample is equal (nothing to resample)."""
    samples = np.asarray(samples, dtype=float)
    point = float(statistic(samples))
    if samples.size < 2 or np.all(samples == samples[0]):
        return ConfidenceInterval(point, float("nan"), float("nan"), samples.size)
    low, high = percentile_bootstrap((samples,), statistic, confidence, seed)
    return ConfidenceInterval(point, float(low), float(high), samples.size)


def mean_band(samples, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """A learning curve's band at one round: the percentile-bootstrap CI of the mean over seeds (`bootstrap_ci`),
    which stays within the seeds' range, where a t-interval of 5 seeds with one collapsed spills past a
    return's bounds. A point when every seed agrees (nothing to resample); NaN with fewer than 2 seeds."""
    samples = np.asarray(samples, dtype=float)
    if samples.size > 1 and np.all(samples == samples[0]):
        return float(samples[0]), float(samples[0])
    interval = bootstrap_ci(samples, np.mean, confidence, seed)
    return interval.low, interval.high


def _difference_of_means(x, y, axis: int = -1):
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def difference_of_means_ci(x, y, confidence: float = 0.95, seed: int = 0) -> ConfidenceInterval:
    """mean(x) − mean(y) of two independent samples (e.g. the seeds of two engines) with its percentile-bootstrap
    CI, each sample resampled on its own (`percentile_bootstrap`); `n` is the smaller sample's size. A point when
    each sample is constant (nothing to resample); NaN bounds when either has fewer than 2 values."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    point = float(_difference_of_means(x, y))
    n = min(x.size, y.size)
    if n < 2:
        return ConfidenceInterval(point, float("nan"), float("nan"), n)
    if np.all(x == x[0]) and np.all(y == y[0]):
        return ConfidenceInterval(point, point, point, n)
    low, high = percentile_bootstrap((x, y), _difference_of_means, confidence, seed)
    return ConfidenceInterval(point, float(low), float(high), n)


class RankTest(NamedTuple):
    u: float  # Mann–Whitney U of the first sample
    p: float  # two-sided


def rank_test(x, y) -> RankTest:
    """Mann–Whitney U test (scipy) of two independent samples, two-sided: whether one tends to be larger. p = 1
    when every value of both is the same (no ranks to compare)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.all(np.concatenate([x, y]) == x[0]):
        return RankTest(x.size * y.size / 2, 1.0)
    result = stats.mannwhitneyu(x, y, alternative="two-sided")
    return RankTest(float(result.statistic), float(result.pvalue))


def mean_without_worst(samples) -> float:
    """The mean once the single lowest value is left out: how much one stuck seed moves the mean."""
    samples = np.sort(np.asarray(samples, dtype=float))
    return float(samples[1:].mean()) if samples.size > 1 else float("nan")


def rate_ci(events: int, trials: int, confidence: float = 0.95) -> ConfidenceInterval:
    """A rate (e.g. of collapsed seeds) with its Wilson score interval (scipy's binomtest)."""
    interval = stats.binomtest(events, trials).proportion_ci(confidence_level=confidence, method="wilson")
    return ConfidenceInterval(events / trials, float(interval.low), float(interval.high), trials)


# ---------------------------------------------------------------- paired seeds (the twenty-seed study)
# Two arms run on the same seeds share each seed's initial policy, so a comparison pairs them by seed: x[i] and y[i]
# are the two arms' scores on seed i. Two questions, each with its exact test and a CI: does the typical seed do
# better (P(x > y) over seeds, Wilcoxon signed-rank), and is the expected outcome better (the mean difference,
# sign-flip permutation test)?

SIGN_FLIPS_EXACT_UP_TO = 20  # seeds: every one of the 2^n sign flips is enumerated (2^20 ≈ 1M sums)
SIGN_FLIP_SAMPLES = 100_000  # beyond that, random sign flips drawn from a fixed seed


def _paired(x, y) -> np.ndarray:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    return x - y


def paired_superiority(x, y, confidence: float = 0.95, seed: int = 0) -> ConfidenceInterval:
    """P(x > y) over paired seeds: the share of seeds where x is larger, a tie counting ½, with the percentile-bootstrap
    CI of that share over seeds (`mean_band`: a point when every seed scores the same)."""
    differences = _paired(x, y)
    scores = (differences > 0) + 0.5 * (differences == 0)
    low, high = mean_band(scores, confidence, seed)
    return ConfidenceInterval(float(scores.mean()), low, high, scores.size)


def wilcoxon_exact(differences) -> float:
    """Two-sided exact Wilcoxon signed-rank p of paired differences (scipy, method="exact", zero_method="wilcox":
    zero differences carry no sign and are dropped first, the exact null distribution is that of the rest; tied
    |differences| get average ranks). 1 when every difference is zero."""
    differences = np.asarray(differences, dtype=float)
    if not differences.any():
        return 1.0
    return float(stats.wilcoxon(differences, zero_method="wilcox", method="exact").pvalue)


def _sign_flip_sums(values: np.ndarray) -> np.ndarray:
    """The sum of `values` under every one of the 2^n sign flips, as the outer sum of its two halves' 2^(n/2)."""
    half = values.size // 2

    def sums(part: np.ndarray) -> np.ndarray:
        signs = 1 - 2 * ((np.arange(2**part.size)[:, None] >> np.arange(part.size)) & 1)
        return signs @ part

    return (sums(values[:half])[:, None] + sums(values[half:])[None, :]).ravel()


def sign_flip_test(differences, seed: int = 0) -> float:
    """Two-sided paired permutation p of the mean difference: the share of sign flips of the per-seed differences
    whose |sum| is at least the observed one. Exact (all 2^n flips, the observed one among them) for n ≤
    `SIGN_FLIPS_EXACT_UP_TO`; beyond that `SIGN_FLIP_SAMPLES` random flips drawn from `seed`, p = (1 + hits) /
    (1 + flips). 1 when every difference is zero."""
    differences = np.asarray(differences, dtype=float)
    observed = abs(differences.sum())
    tolerance = 1e-9 * max(1.0, float(np.abs(differences).sum()))  # a flip equal to the observed sum counts
    if differences.size <= SIGN_FLIPS_EXACT_UP_TO:
        return float(np.mean(np.abs(_sign_flip_sums(differences)) >= observed - tolerance))
    signs = np.random.default_rng(seed).choice([-1.0, 1.0], size=(SIGN_FLIP_SAMPLES, differences.size))
    hits = int(np.count_nonzero(np.abs(signs @ differences) >= observed - tolerance))
    return (1 + hits) / (1 + SIGN_FLIP_SAMPLES)


class PairedComparison(NamedTuple):
    superiority: ConfidenceInterval  # P(x > y) over seeds (`paired_superiority`)
    wilcoxon_p: float  # its exact test (`wilcoxon_exact`)
    difference: ConfidenceInterval  # mean(x − y) with its percentile-bootstrap CI (`mean_band`)
    sign_flip_p: float  # its exact test (`sign_flip_test`)


def paired_comparison(x, y, confidence: float = 0.95, seed: int = 0) -> PairedComparison:
    """x against y paired by seed: the typical seed (P(x > y), Wilcoxon) and the expected outcome (the mean
    difference, sign flips), each with its CI."""
    differences = _paired(x, y)
    low, high = mean_band(differences, confidence, seed)
    return PairedComparison(
        paired_superiority(x, y, confidence, seed),
        wilcoxon_exact(differences),
        ConfidenceInterval(float(differences.mean()), low, high, differences.size),
        sign_flip_test(differences, seed),
    )


def benjamini_hochberg(p_values) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (q-values) of a family of tests (scipy's false_discovery_control):
    a test is a discovery at false-discovery rate q when its q-value is ≤ q."""
    p_values = np.asarray(p_values, dtype=float)
    return stats.false_discovery_control(p_values, method="bh") if p_values.size else p_values


# ---------------------------------------------------------------- aggregates across runs and envs
# Agarwal et al. (2021), as the rliable package computes them; rliable itself does not import with
# our pandas pin (its arch dependency fails), so these use scipy's bootstrap. Each env is a stratum:
# resampling draws seeds within each env, never across envs.


def probability_of_improvement(x, y) -> float:
    """P(X > Y) for one env: the share of (x_i, y_j) pairs with x_i > y_j, a tie counting ½ (the
    Mann–Whitney U statistic divided by n·m)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return float(stats.mannwhitneyu(x, y, alternative="greater").statistic / (x.size * y.size))


def _poi_statistic(*samples, axis: int = -1):
    """Mean over envs of P(X > Y); `samples` alternate x, y of each env (vectorised over resamples)."""
    pois = []
    for x, y in zip(samples[::2], samples[1::2]):
        greater = (x[..., :, None] > y[..., None, :]).mean(axis=(-2, -1))
        ties = (x[..., :, None] == y[..., None, :]).mean(axis=(-2, -1))
        pois.append(greater + 0.5 * ties)
    return np.mean(pois, axis=0)


def probability_of_improvement_ci(pairs, confidence: float = 0.95, seed: int = 0) -> ConfidenceInterval:
    """Mean over envs of P(X > Y) with a stratified percentile-bootstrap CI: `pairs` holds one
    (x, y) of per-seed scores per env; each env's x and y are resampled on their own."""
    samples = [np.asarray(s, dtype=float) for pair in pairs for s in pair]
    point = float(np.mean([probability_of_improvement(x, y) for x, y in pairs]))
    low, high = percentile_bootstrap(samples, _poi_statistic, confidence, seed)
    return ConfidenceInterval(point, float(low), float(high), min(s.size for s in samples))


def performance_profile(per_env, taus, confidence: float = 0.95, seed: int = 0):
    """Fraction of runs whose score exceeds τ, for each τ in `taus`, with a stratified bootstrap band:
    `per_env` holds one array of per-seed scores per env, each env weighted by its runs. Returns
    (fraction, low, high), arrays over `taus`."""
    taus = np.asarray(taus, dtype=float)
    samples = [np.asarray(s, dtype=float) for s in per_env]

    def fraction_above(*resampled, axis: int = -1):
        above = [(s[..., :, None] > taus).sum(axis=-2) for s in resampled]
        return np.moveaxis(np.sum(above, axis=0) / sum(s.shape[-1] for s in resampled), -1, 0)

    point = fraction_above(*samples)
    return (point, *percentile_bootstrap(samples, fraction_above, confidence, seed))


def iqm_curve(curves, confidence: float = 0.95, seed: int = 0):
    """IQM over seeds at each round of `curves` (seeds × rounds, no NaN) with a percentile-bootstrap
    band over seeds. Returns (iqm, low, high), arrays over rounds."""
    curves = np.asarray(curves, dtype=float)
    return (iqm(curves, axis=0), *percentile_bootstrap((curves,), iqm, confidence, seed))


# ---------------------------------------------------------------- planted bad data (corruption.py)
# Per round of a corrupted run: does the drop set hold the planted records, and do the scores rank them last?


def auroc(positives: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve of `scores` for the `positives` mask: P(a positive scores above a
    negative), a tie counting ½ (`probability_of_improvement` of the two groups). NaN without both."""
    if positives.all() or not positives.any():
        return float("nan")
    return probability_of_improvement(scores[positives], scores[~positives])


def planted_detection(
    planted: np.ndarray, dropped: np.ndarray, influence: np.ndarray | None, agreement: np.ndarray | None
) -> dict[str, float]:
    """How well a round finds its planted records (bool masks over record ids): the precision and recall
    of its drop set (precision NaN when nothing is dropped), and the AUROC for "planted" of −influence and
    of −Ā·Â, the advantage heuristics' `agreement` (planted records should score low on both; NaN where
    the round has no such score)."""
    caught = int((planted & dropped).sum())
    return {
        "n_planted": int(planted.sum()),
        "precision": caught / dropped.sum() if dropped.any() else float("nan"),
        "recall": caught / planted.sum() if planted.any() else float("nan"),
        "auroc_influence": float("nan") if influence is None else auroc(planted, -influence),
        "auroc_advantage": float("nan") if agreement is None else auroc(planted, -agreement),
    }
