"""The one comparison routine's statistics, against synthetic timings whose true effect and noise are known."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from workbench.experiments import ab
from workbench.experiments.ab import (
    CONFIDENCE,
    MIN_EFFECT,
    compare_rates,
    median_interval,
    ratio_interval,
)


def noisy(rate: float, noise: float, count: int, generator: random.Random) -> list[float]:
    """``count`` measurements of ``rate`` with multiplicative noise spread uniformly over ±``noise``."""
    return [rate * (1 + generator.uniform(-noise, noise)) for _ in range(count)]


def test_a_real_thirty_percent_gain_is_faster_with_an_interval_that_excludes_one():
    generator = random.Random(1)
    outcomes = []
    for _ in range(200):
        base, changed = noisy(1000, 0.10, 3, generator), noisy(1300, 0.10, 3, generator)
        outcomes.append(compare_rates(base, changed))
    assert all(result.verdict == "faster" and result.speedup_low > 1 for result in outcomes)
    assert all(result.speedup_low <= result.speedup <= result.speedup_high for result in outcomes)


def test_two_percent_in_ten_percent_noise_is_within_the_noise():
    assert compare_rates([1000, 1090, 920], [1040, 950, 1010]).verdict == "within_noise"
    # Over many such comparisons a 90 % interval may exclude the true 1.02 one time in ten, and only the
    # misses beyond 1 ± MIN_EFFECT give a verdict: at most about one in twenty.
    generator = random.Random(2)
    verdicts = [compare_rates(noisy(1000, 0.10, 3, generator), noisy(1020, 0.10, 3, generator)).verdict
                for _ in range(2000)]
    assert verdicts.count("within_noise") / 2000 >= 0.90


def test_a_real_loss_is_slower():
    result = compare_rates([1000, 990, 1010], [800, 820, 790])
    assert result.verdict == "slower" and result.speedup_high < 1
    assert "slower here, not recommended" in result.describe()


def test_identical_settings_are_called_different_no_more_often_than_the_interval_allows():
    # No real difference: the 90 % interval must exclude 1 ± MIN_EFFECT in at most ~10 % of comparisons.
    generator = random.Random(3)
    wrong = sum(compare_rates(noisy(1000, 0.12, 3, generator), noisy(1000, 0.12, 3, generator)).verdict != "within_noise"
                for _ in range(2000))
    assert wrong / 2000 <= 0.10


def test_three_and_three_give_a_ninety_percent_interval_from_the_extreme_pairwise_ratios():
    low, high, coverage = ratio_interval([100, 110, 90], [120, 130, 125])
    assert (low, high) == (pytest.approx(120 / 110), pytest.approx(130 / 90))
    assert coverage == pytest.approx(1 - 2 / math.comb(6, 3))


def test_the_interval_coverage_is_exact_for_larger_samples():
    # Under no difference every ordering of the 5 + 5 ranks is equally likely: count how often the interval
    # from the ranks misses the true ratio (1), over all C(10, 5) orderings.
    values = list(range(1, 11))
    missed = 0
    for chosen in itertools.combinations(values, 5):
        baseline = list(chosen)
        changed = [value for value in values if value not in chosen]
        low, high, coverage = ratio_interval(baseline, changed)
        # The true ratio of two samples from one population is 1 on the log-shift scale.
        missed += not (low <= 1 <= high)
    assert 1 - missed / math.comb(10, 5) == pytest.approx(coverage)
    assert coverage >= 0.90


def test_too_few_trials_give_no_interval_and_no_verdict():
    result = compare_rates([1000, 1010], [2000, 2100])
    assert result.speedup == pytest.approx(2050 / 1005)
    assert (result.speedup_low, result.speedup_high, result.verdict) == (None, None, "within_noise")
    assert "no interval" in result.describe()


def test_failed_measurements_are_left_out_and_none_at_all_is_not_measured():
    assert compare_rates([1000, float("nan"), 0, 1010, 990], [1300, 1310, 1290]).baseline_rates == (1000, 1010, 990)
    result = compare_rates([], [1000])
    assert result.speedup is None and result.verdict == "within_noise" and "not measured" in result.describe()


def test_the_description_names_the_speedup_its_interval_and_the_trials():
    text = compare_rates([1000, 1010, 990], [1310, 1300, 1320]).describe()
    assert text.startswith("measured 1.31×: faster (") and text.endswith(", 3+3 trials)")


def test_the_minimum_effect_is_stated_and_applied():
    assert MIN_EFFECT == 0.02
    # A steady 1.5 % gain with almost no noise is real, but below the stated minimum effect.
    assert compare_rates([1000, 1000.1, 999.9], [1015, 1015.1, 1014.9]).verdict == "within_noise"
    assert compare_rates([1000, 1000.1, 999.9], [1015, 1015.1, 1014.9], min_effect=0.01).verdict == "faster"


def test_the_median_of_repeats_has_an_order_statistic_interval_with_its_exact_coverage():
    assert median_interval([1000, 1010]) is None  # under MIN_TRIALS: no interval
    assert median_interval([1010, 990, float("nan"), 0]) is None  # what failed is left out
    # 3 or 4 repeats cannot reach 90 %: the smallest to the largest, at the coverage they give.
    assert median_interval([1010, 990, 1000]) == (990, 1010, 0.75)
    assert median_interval([4, 1, 3, 2]) == (1, 4, 0.875)
    assert median_interval([5, 1, 4, 2, 3]) == (1, 5, pytest.approx(1 - 2 / 32))
    low, high, coverage = median_interval(list(range(1, 12)))  # 11 repeats: the 3rd smallest to the 3rd largest
    assert (low, high) == (3, 9) and coverage == pytest.approx(1 - 2 * (1 + 11 + 55) / 2**11) and coverage >= 0.90


def test_the_median_interval_covers_as_often_as_it_says_whatever_the_noise():
    # Skewed noise (a run now and then much slower, as a busy machine gives): the true median is known.
    generator = random.Random(4)
    true_median = 1000 * math.exp(-math.log(2))  # of 1000 · exp(-Exponential(1))
    for repeats in (3, 5, 8):
        covered = []
        for _ in range(4000):
            low, high, coverage = median_interval([1000 * math.exp(-generator.expovariate(1)) for _ in range(repeats)])
            covered.append(low <= true_median <= high)
        assert sum(covered) / len(covered) == pytest.approx(coverage, abs=0.025)


def test_past_the_exact_table_the_interval_is_the_same_pairs_read_by_selection():
    """A trace's steps may number thousands: the ranks come from the normal approximation (within a point of the
    exact coverage) and the ratios by selection, never an n·m² table (200 steps a side took 85 s before)."""
    generator = random.Random(7)
    baseline = [generator.uniform(5, 10) for _ in range(200)]
    changed = [generator.uniform(5.5, 11) for _ in range(150)]
    low, high, coverage = ratio_interval(baseline, changed)
    k, _ = ab._normal_rank(200, 150, CONFIDENCE)
    ratios = sorted(b / a for a in baseline for b in changed)
    assert (low, high) == (ratios[k - 1], ratios[len(ratios) - k])
    assert 0.90 <= coverage < 0.905
    exact_k = ab._rank_for(40, 40, CONFIDENCE)
    assert abs(ab._normal_rank(40, 40, CONFIDENCE)[0] - exact_k) <= 1  # the two agree where both are counted
    many = [generator.uniform(5, 10) for _ in range(5000)]
    assert ratio_interval(many, many[::-1]) is not None  # 25 million pairs, never listed


def test_selection_counts_tied_ratios_as_the_sorted_list_does(monkeypatch):
    """Step times that take a few exact values tie at many ratios: the selected k-th ratio is the listed one
    (a count by b <= value·a left ties out, and 41+41 such steps read 1.0–1.0 where 40+40 read 1.078)."""
    monkeypatch.setattr(ab, "SORTED_PAIRS", 0)  # select even where the pairs would be listed
    generator = random.Random(11)
    for _ in range(400):
        n, m = generator.randint(1, 25), generator.randint(1, 25)
        baseline = sorted(generator.choice([1.0, 1.1, 1.3, generator.uniform(1, 2)]) for _ in range(n))
        changed = sorted(generator.choice([1.0, 1.1, 1.3, generator.uniform(1, 2)]) for _ in range(m))
        ratios = sorted(b / a for a in baseline for b in changed)
        k = generator.randint(1, n * m)
        assert ab._kth_ratio(baseline, changed, k) == ratios[k - 1]


def test_a_small_side_against_a_large_one_is_counted_exactly():
    """3 steps against 1,000: the normal approximation's ranks are off by tens there (coverage 0.8965 < 0.90); the
    exact count is cheap while the smaller side is small."""
    k = ab._rank_for(3, 1000, CONFIDENCE)
    low, high, coverage = ratio_interval([1.0, 1.01, 0.99], [1.0 + i / 10_000 for i in range(1000)])
    assert coverage >= CONFIDENCE and k is not None


def test_too_few_trials_are_said_as_no_verdict_not_within_the_noise():
    """2+2 trials have no interval: "within the noise" claimed a band the trials never showed."""
    result = compare_rates([1000, 1010], [2000, 2100])
    assert result.describe() == "measured 2.04×: no verdict (no interval: 2+2 trials)"
    assert result.stated_verdict == "no_verdict" and compare_rates([], [1000]).stated_verdict == "no_verdict"
    assert compare_rates([1000, 1010, 990], [1000, 1005, 995]).stated_verdict == "within_noise"
