"""Efficiency metrics on hand-made curves whose answers are worked out by hand in the comments."""

import math

import numpy as np
import pandas as pd
import pytest

from rlinfluence import metrics

NAN = float("nan")


class TestFirstRoundReaching:
    def test_tie_counts_as_reaching(self):
        assert metrics.first_round_reaching([0, 1, 3, 3], 3) == 2

    def test_round_zero_is_not_searched(self):
        # The initial policy is shared by both arms; reaching a level there is no speed-up.
        assert metrics.first_round_reaching([5, 1, 5], 5) == 2

    def test_never_reaching_gives_none(self):
        assert metrics.first_round_reaching([0, 1, 2], 2.5) is None

    def test_unevaluated_rounds_are_skipped(self):
        assert metrics.first_round_reaching([0, NAN, NAN, 4], 1) == 3


class TestLevels:
    def test_running_maximum_records_after_round_zero(self):
        # Round 2 dips, round 3 ties the best so far (no new level), round 4 is a record.
        levels, rounds = metrics.se_levels([1, 2, 0, 2, 5])
        np.testing.assert_array_equal(levels, [2, 5])
        np.testing.assert_array_equal(rounds, [1, 4])

    def test_a_level_must_beat_the_initial_policy(self):
        levels, rounds = metrics.se_levels([3, 1, 2, 4])
        np.testing.assert_array_equal(levels, [4])
        np.testing.assert_array_equal(rounds, [3])

    def test_unevaluated_rounds_set_no_level(self):
        levels, rounds = metrics.se_levels([NAN, NAN, 1, NAN, 2])
        np.testing.assert_array_equal(rounds, [2, 4])


class TestSpeedup:
    STD = [0, 1, 2, 3, 4]  # levels 1, 2, 3, 4 reached at rounds 1, 2, 3, 4

    def test_known_reductions(self):
        # IIF reaches 1 and 2 at round 1, 3 and 4 at round 2: reductions 0, 50, 33.3, 50 %.
        iif = [0, 2, 4, 4, 4]
        reductions = metrics.level_reductions(self.STD, iif)
        np.testing.assert_allclose(reductions.reductions, [0, 50, 100 / 3, 50])
        assert reductions.n_unreached == 0
        assert metrics.se_ave(self.STD, iif) == pytest.approx((0 + 50 + 100 / 3 + 50) / 4)
        assert metrics.se_peak(self.STD, iif) == pytest.approx(50)

    def test_unreached_level_counts_as_zero_and_is_counted(self):
        # Never reaches 3 or 4: reductions 0 (level 1 at round 1), 50 (level 2 at 1), 0, 0.
        iif = [0, 2, 2, 2, 2]
        reductions = metrics.level_reductions(self.STD, iif)
        assert reductions.n_unreached == 2
        np.testing.assert_array_equal(reductions.reached, [True, True, False, False])
        assert metrics.se_ave(self.STD, iif) == pytest.approx(12.5)
        assert metrics.se_peak(self.STD, iif) == 0.0

    def test_slower_method_has_negative_reduction(self):
        # Reaches the peak 4 at round 6 instead of 4: 1 − 6/4 = −50 %.
        assert metrics.se_peak(self.STD, [0, 0, 0, 0, 0, 0, 4]) == pytest.approx(-50)

    def test_shorter_method_curve(self):
        # A 2-round IIF run: levels 1, 2 reached at round 1; 3, 4 never. Reductions 0, 50, 0, 0.
        reductions = metrics.level_reductions(self.STD, [0, 2, 2])
        np.testing.assert_allclose(reductions.method_rounds, [1, 1, NAN, NAN])
        assert metrics.se_ave(self.STD, [0, 2, 2]) == pytest.approx(12.5)

    def test_longer_method_curve(self):
        # Levels still come from the standard curve; the method is searched over all its rounds:
        # the peak 2 (std round 2) is reached at round 4, 1 − 4/2 = −100 %.
        assert metrics.se_peak([0, 1, 2], [0, 0, 0, 0, 2]) == pytest.approx(-100)

    def test_ties_with_a_level_reach_it(self):
        assert metrics.se_ave([0, 1, 2], [0, 2, 2]) == pytest.approx(25)  # levels 1, 2 both at round 1

    def test_standard_that_never_improves_has_no_levels(self):
        assert math.isnan(metrics.se_ave([3, 2, 3], [3, 4, 5]))
        assert math.isnan(metrics.se_peak([3, 2, 3], [3, 4, 5]))
        assert math.isnan(metrics.rt_peak([3, 2, 3], [0, 1, 1], [3, 4, 5], [0, 1, 1]))


class TestRuntime:
    def test_training_time_excludes_evaluation(self):
        frame = pd.DataFrame(
            {"time_collect": [0, 1.0], "time_influence": [0, 0.5], "time_update": [0, 2.0], "time_eval": [9.0, 9.0]}
        )
        np.testing.assert_allclose(metrics.training_time(frame), [0, 3.5])

    def test_rt_peak_with_known_times(self):
        # Std peak 4 at round 4 after 4 × 3 s = 12 s. IIF reaches it at round 2 after 2 × 2.5 s = 5 s.
        std_times = [0, 3, 3, 3, 3]
        iif, iif_times = [0, 2, 4, 4, 4], [0, 2.5, 2.5, 2.5, 2.5]
        assert metrics.time_to_reach(iif, iif_times, 4) == pytest.approx(5)
        expected = (1 - 5 / 12) * 100
        assert metrics.rt_peak(TestSpeedup.STD, std_times, iif, iif_times) == pytest.approx(expected)

    def test_rt_peak_can_differ_from_se_peak(self):
        # Same rounds to the peak, but IIF rounds are cheaper: SE_peak 0 %, RT_peak 1 − 4/8 = 50 %.
        std, times_std, times_iif = [0, 1, 2], [0, 4, 4], [0, 2, 2]
        assert metrics.se_peak(std, std) == 0
        assert metrics.rt_peak(std, times_std, std, times_iif) == pytest.approx(50)

    def test_unreached_peak_counts_as_zero(self):
        assert metrics.rt_peak([0, 1, 2], [0, 1, 1], [0, 1, 1, 1], [0, 1, 1, 1]) == 0.0
        assert math.isnan(metrics.time_to_reach([0, 1, 1], [0, 1, 1], 2))

    def test_times_must_match_the_curve(self):
        with pytest.raises(ValueError, match="round_times"):
            metrics.time_to_reach([0, 1, 2], [0, 1], 1)


class TestFinalReturnCI:
    def test_paired_t_interval(self):
        # Gains 1..5: mean 3, s = √2.5, half-width = t_{0.975,4} · s/√5 = 2.776 · 0.7071.
        ci = metrics.final_return_ci([11, 12, 13, 14, 15], [10, 10, 10, 10, 10])
        assert (ci.mean, ci.n) == (3.0, 5)
        assert ci.high - ci.mean == pytest.approx(2.776 * math.sqrt(2.5 / 5), abs=1e-3)
        assert ci.mean - ci.low == pytest.approx(ci.high - ci.mean)

    def test_pairing_cancels_a_shared_seed_effect(self):
        # Seeds differ wildly but IIF is always exactly 2 better: a zero-width interval at 2.
        std = np.array([-100.0, 0.0, 50.0])
        ci = metrics.final_return_ci(std + 2, std)
        assert (ci.low, ci.mean, ci.high) == pytest.approx((2, 2, 2))

    def test_one_seed_has_no_interval(self):
        ci = metrics.final_return_ci([1.0], [0.0])
        assert ci.mean == 1.0 and math.isnan(ci.low) and math.isnan(ci.high)

    def test_unpaired_lengths_are_rejected(self):
        with pytest.raises(ValueError, match="paired"):
            metrics.final_return_ci([1, 2, 3], [1, 2])


class TestRobustStatistics:
    # Ten seeds, one stuck at −500: the mean (−4.5) says "no gain", the robust summaries do not.
    SEEDS = [-500.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 95.0]

    def test_iqm_trims_a_quarter_from_each_end(self):
        # int(0.25 · 10) = 2 values cut from each end: the mean of 20..70 is 45.
        assert metrics.iqm(self.SEEDS) == pytest.approx(45.0)
        assert metrics.iqm([1.0, 2.0, 3.0, 100.0]) == pytest.approx(2.5)

    def test_mean_without_worst_drops_only_the_lowest_seed(self):
        assert np.mean(self.SEEDS) == pytest.approx(-4.5)
        assert metrics.mean_without_worst(self.SEEDS) == pytest.approx(455.0 / 9)
        assert math.isnan(metrics.mean_without_worst([3.0]))

    def test_bootstrap_ci_is_reproducible_and_brackets_the_iqm(self):
        first, again = metrics.bootstrap_ci(self.SEEDS), metrics.bootstrap_ci(self.SEEDS)
        assert first == again  # a fixed resampling seed: regenerated tables are byte-identical
        assert first.low <= first.mean <= first.high and first.n == 10
        assert first.low < 20.0 < 70.0 <= first.high + 10.0  # resamples with the stuck seed pull it down
        median = metrics.bootstrap_ci(self.SEEDS, statistic=np.median)
        assert median.mean == pytest.approx(45.0) and median.low >= 10.0

    def test_bootstrap_ci_of_equal_values_has_no_interval(self):
        ci = metrics.bootstrap_ci([5.0, 5.0, 5.0])
        assert ci.mean == 5.0 and math.isnan(ci.low) and math.isnan(ci.high)

    def test_mean_band_stays_within_the_seeds_range_where_a_t_interval_does_not(self):
        collapsed = [0.999, 0.996, 0.999, 0.0, 0.999]  # Fig. 6a's FrozenLake IIF finals: one seed of five at 0
        t = metrics.t_interval(collapsed)
        assert t.low < 0.3 and t.high > 1.3  # spills past the return's [0, 1]
        low, high = metrics.mean_band(collapsed)
        assert 0.0 < low < np.mean(collapsed) < high <= 0.999 and metrics.mean_band(collapsed) == (low, high)
        assert metrics.mean_band([0.5, 0.5]) == (0.5, 0.5)  # all seeds agree: a point, not NaN
        assert all(math.isnan(bound) for bound in metrics.mean_band([0.5]))

    def test_rate_ci_is_wilsons_interval(self):
        # Wilson, z = 1.96: 0 of 10 → [0, z²/(n + z²)] = [0, 0.2775]; 3 of 30 → [0.0346, 0.2562].
        none = metrics.rate_ci(0, 10)
        assert (none.mean, none.low) == (0.0, 0.0) and none.high == pytest.approx(0.2775, abs=1e-4)
        some = metrics.rate_ci(3, 30)
        assert (some.mean, some.n) == (0.1, 30)
        assert (some.low, some.high) == pytest.approx((0.0346, 0.2562), abs=1e-4)


class TestEvenLevels:
    def test_levels_split_the_improvement_evenly_and_end_at_the_peak(self):
        # From 0 to a peak of 1.0 (round 4): levels 0.25, 0.5, 0.75, 1.0, first reached at rounds 1, 2, 2, 4.
        levels, rounds = metrics.even_levels([0.0, 0.3, 0.8, 0.7, 1.0, 0.9], n_levels=4)
        assert levels.tolist() == [0.25, 0.5, 0.75, 1.0] and rounds.tolist() == [1, 2, 2, 4]

    def test_known_reductions_beside_the_running_maximum_levels(self):
        std = [0.0, 0.1, 0.2, 0.5, 0.8, 0.97, 0.98, 0.99, 1.0]
        method = [0.0, 0.2, 0.8, 0.99, 0.99, 0.99, 0.99, 0.99, 0.99]
        # Running-maximum levels 0.1, 0.2, 0.5, 0.8, 0.97, 0.98, 0.99, 1.0 (rounds 1..8); the method
        # reaches them at 1, 1, 2, 2, 3, 3, 3, never: 0, 50, 33.3, 50, 40, 50, 57.1, 0 %.
        assert metrics.se_ave(std, method) == pytest.approx((50 + 100 / 3 + 50 + 40 + 50 + 100 * 4 / 7) / 8)
        # Even levels 0.1..1.0: PPO at rounds 1, 2, 3, 3, 3, 4, 4, 4, 5, 8; the method at 1, 1, 2, 2, 2, 2,
        # 2, 2, 3, never: 0, 50, 33.3, 33.3, 33.3, 50, 50, 50, 40, 0 %.
        even = metrics.level_reductions(std, method, metrics.even_levels)
        assert even.std_rounds.tolist() == [1, 2, 3, 3, 3, 4, 4, 4, 5, 8] and even.n_unreached == 1
        assert metrics.se_ave(std, method, metrics.even_levels) == pytest.approx(34.0)

    def test_no_improvement_gives_no_level(self):
        levels, rounds = metrics.even_levels([1.0, 0.5, 0.9])
        assert levels.size == 0 and rounds.size == 0


def test_probability_of_improvement_counts_ties_as_half():
    # Pairs x > y: (1, 0), (2, 0), (3, 0), (3, 2); the tie (2, 2) counts ½: 4.5 of 9.
    assert metrics.probability_of_improvement([1, 2, 3], [0, 2, 5]) == pytest.approx(0.5)
    assert metrics.probability_of_improvement([5, 6], [1, 2]) == 1.0


def test_probability_of_improvement_ci_averages_envs_and_resamples_within_each():
    pairs = [([1, 2, 3, 4, 5], [0, 1, 2, 3, 4]), ([9, 9, 9], [1, 1, 1])]
    ci = metrics.probability_of_improvement_ci(pairs)
    # First env: 15 pairs x > y and 4 ties of 25; the second is certain.
    assert ci.mean == pytest.approx((17 / 25 + 1.0) / 2)
    assert 0.5 <= ci.low <= ci.mean <= ci.high <= 1.0  # the certain env keeps every resample's mean above ½
    assert metrics.probability_of_improvement_ci(pairs) == ci  # fixed resampling seed: the same CI every time


def test_performance_profile_counts_runs_above_each_threshold_over_all_envs():
    fraction, low, high = metrics.performance_profile([[1, 2, 3, 4, 5], [10, 20, 30, -5, 0]], [0, 2.5, 15])
    assert fraction.tolist() == [0.8, 0.6, 0.2]
    assert (low <= fraction).all() and (fraction <= high).all()


def test_iqm_curve_is_the_trimmed_mean_at_each_round():
    curves = np.array([[0, 1], [0, 2], [0, 3], [0, 4]], dtype=float)
    middle, low, high = metrics.iqm_curve(curves)
    assert middle.tolist() == [0.0, 2.5] and low.shape == high.shape == (2,)


def test_difference_of_means_ci_resamples_each_sample_on_its_own():
    x, y = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0.0, 1.0, 2.0]
    ci = metrics.difference_of_means_ci(x, y)
    assert (ci.mean, ci.n) == (2.5, 3)
    # A resample's mean lies within its sample's range: the difference within [1 - 2, 6 - 0].
    assert -1.0 <= ci.low < ci.mean < ci.high <= 6.0
    assert metrics.difference_of_means_ci(x, y) == ci  # fixed resampling seed: the same CI every time
    assert metrics.difference_of_means_ci([2.0, 2.0], [1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0, 2)  # nothing to resample
    assert math.isnan(metrics.difference_of_means_ci([2.0], y).low)


def test_rank_test_is_two_sided_mann_whitney():
    # x above y in 3 of 6 pairs, one tie counting ½: U = 3.5, the middle of 0..6, so p = 1.
    assert metrics.rank_test([1.0, 3.0, 5.0], [2.0, 3.0]) == (3.5, 1.0)
    # Every x above every y: U = 9 of 9; exact two-sided p = 2 / C(6, 3) = 0.1, the same either way round.
    assert metrics.rank_test([4.0, 5.0, 6.0], [1.0, 2.0, 3.0]) == pytest.approx((9.0, 0.1))
    assert metrics.rank_test([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx((0.0, 0.1))
    assert metrics.rank_test([1.0, 1.0], [1.0, 1.0, 1.0]) == (3.0, 1.0)  # every value tied: nothing to rank
