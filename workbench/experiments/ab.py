"""Is B faster than A? One answer, the A/B result, for tune, sweeps, verify and the Runs tab.

Speeds on one machine vary 8–15 % between identical runs, so one run of each says nothing. A and B are each
measured several times, interleaved (A B A B …, so a machine that warms up, throttles or gets busy weighs on
both alike), and compared as

- the speedup: median(B) ÷ median(A), images/sec over each run's steady state;
- its interval: the Hodges–Lehmann interval of the ratio, read off the sorted ratios of every pair (B_j ÷ A_i)
  at the ranks the Mann–Whitney U distribution gives. It assumes nothing about the shape of the noise, and its
  coverage is exact (``ABResult.confidence``): with 3 + 3 trials the 90 % interval runs from the smallest
  pairwise ratio to the largest;
- a verdict that is decisive only when the whole interval clears 1.0 by ``MIN_EFFECT``.

One setting measured several times (``--repeats``) is summarised by ``median_interval``: the median and an
order-statistic interval for it, again with its exact coverage.

No torch, no Qt.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Literal, Optional, Sequence

Verdict = Literal["faster", "slower", "within_noise"]
# What an output states: the verdict where an interval decided it, "no_verdict" where there is none (2+2 trials, a side
# not measured): "within_noise" without an interval would claim a band the measurements never showed.
StatedVerdict = Literal["faster", "slower", "within_noise", "no_verdict"]

# The coverage asked of an interval. 90 %: with 3 + 3 trials (the fewest that give any interval at this level)
# one comparison costs six short runs; 95 % would need 4 + 4.
CONFIDENCE = 0.90
# A change is called faster (or slower) only when its whole interval lies beyond 1 ± this. Below 2 % a change is
# not worth a setting's side effects, and run-to-run drift this small survives interleaving.
MIN_EFFECT = 0.02
# Fewest measurements of each side that can give a 90 % interval (Mann–Whitney: 1 - 2/C(6,3) = 0.90).
MIN_TRIALS = 3
# The exact U distribution costs about 2·min(n, m)²·max(n, m) steps: counted exactly up to this (well under a
# second; 3 + 1,000 steps and 120 + 120 are), by the normal approximation past it, where both sides are large
# and it is within a rank or two of the exact count.
EXACT_COST = 2_000_000
# Up to this many pairs the ratios are listed and sorted; past it they are selected without listing them.
SORTED_PAIRS = 250_000


@dataclass(frozen=True, kw_only=True)
class ABResult:
    """What B did against A, measured: their rates (images/sec, in the order measured), the speedup B ÷ A and
    its interval (None with too few measurements), and the verdict."""

    baseline_rates: tuple[float, ...]
    changed_rates: tuple[float, ...]
    speedup: Optional[float]  # median(changed) ÷ median(baseline); None when either side has no measurement
    speedup_low: Optional[float]
    speedup_high: Optional[float]
    confidence: Optional[float]  # the interval's coverage (≥ the level asked; exact up to EXACT_COST), None without
    verdict: Verdict
    min_effect: float = MIN_EFFECT

    @property
    def trials(self) -> str:
        """"3+3 trials"."""
        return f"{len(self.baseline_rates)}+{len(self.changed_rates)} trials"

    @property
    def stated_verdict(self) -> StatedVerdict:
        """The verdict where the interval decided it; "no_verdict" without an interval."""
        return self.verdict if self.speedup_low is not None and self.speedup_high is not None else "no_verdict"

    @property
    def baseline_images_per_sec(self) -> Optional[float]:
        return statistics.median(self.baseline_rates) if self.baseline_rates else None

    @property
    def changed_images_per_sec(self) -> Optional[float]:
        return statistics.median(self.changed_rates) if self.changed_rates else None

    def describe(self) -> str:
        """"measured 1.31×: faster (1.25–1.37, 3+3 trials)", or why there is no verdict."""
        if self.speedup is None:
            return f"not measured ({self.trials} finished)"
        return verdict_text(self.speedup, self.speedup_low, self.speedup_high, self.verdict, self.trials)


VERDICT_WORDS = {"faster": "faster", "slower": "slower here, not recommended", "within_noise": "within the noise",
                 "no_verdict": "no verdict"}


def verdict_text(speedup: float, low: Optional[float], high: Optional[float], verdict: str, trials: str) -> str:
    """"measured 1.31×: faster (1.25–1.37, 3+3 trials)"; without an interval "measured 1.31×: no verdict (no
    interval: 2+2 trials)", whatever verdict was stored (it is only ever decided by an interval)."""
    if low is None or high is None:
        return f"measured {speedup:.2f}×: no verdict (no interval: {trials})"
    return f"measured {speedup:.2f}×: {VERDICT_WORDS[verdict]} ({low:.2f}–{high:.2f}, {trials})"


def compare_rates(
    baseline: Sequence[float],
    changed: Sequence[float],
    confidence: float = CONFIDENCE,
    min_effect: float = MIN_EFFECT,
) -> ABResult:
    """Compare two sets of measured rates (higher is better); non-positive or non-finite rates are left out."""
    a = tuple(rate for rate in baseline if math.isfinite(rate) and rate > 0)
    b = tuple(rate for rate in changed if math.isfinite(rate) and rate > 0)
    if not a or not b:
        return ABResult(baseline_rates=a, changed_rates=b, speedup=None, speedup_low=None, speedup_high=None,
                          confidence=None, verdict="within_noise", min_effect=min_effect)
    speedup = statistics.median(b) / statistics.median(a)
    interval = ratio_interval(a, b, confidence)
    low = high = coverage = None
    verdict: Verdict = "within_noise"
    if interval is not None:
        low, high, coverage = interval
        if low > 1 + min_effect:
            verdict = "faster"
        elif high < 1 / (1 + min_effect):
            verdict = "slower"
    return ABResult(baseline_rates=a, changed_rates=b, speedup=speedup, speedup_low=low, speedup_high=high,
                      confidence=coverage, verdict=verdict, min_effect=min_effect)


def ratio_interval(
    baseline: Sequence[float], changed: Sequence[float], confidence: float = CONFIDENCE
) -> Optional[tuple[float, float, float]]:
    """(low, high, coverage) for changed ÷ baseline: the Hodges–Lehmann interval on log rates; None when there
    are too few measurements for ``confidence``. A trace's steps may number thousands: the U distribution is
    counted exactly while that is cheap (EXACT_COST), and past it, where both sides are large, its normal
    approximation gives the ranks; the k-th ratios are found by selection once the pairs pass SORTED_PAIRS."""
    n, m = len(baseline), len(changed)
    if n < 1 or m < 1:
        return None
    if min(n, m) ** 2 * max(n, m) <= EXACT_COST:
        k = _rank_for(n, m, confidence)
        if k is None:
            return None
        coverage = 1 - 2 * _u_distribution(n, m)[k - 1] / math.comb(n + m, n)
    else:
        k, coverage = _normal_rank(n, m, confidence)
    if n * m <= SORTED_PAIRS:
        ratios = sorted(b / a for a in baseline for b in changed)
        return ratios[k - 1], ratios[n * m - k], coverage
    a, b = sorted(baseline), sorted(changed)
    return _kth_ratio(a, b, k), _kth_ratio(a, b, n * m - k + 1), coverage



def _normal_rank(n: int, m: int, confidence: float) -> tuple[int, float]:
    """k and its coverage from the normal approximation of U (with continuity correction)."""
    mean, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
    normal = statistics.NormalDist()
    k = max(1, math.floor(mean - 0.5 + normal.inv_cdf((1 - confidence) / 2) * sd) + 1)
    return k, 1 - 2 * normal.cdf((k - 1 + 0.5 - mean) / sd)


def _kth_ratio(baseline: Sequence[float], changed: Sequence[float], k: int) -> float:
    """The k-th smallest of every b ÷ a (both sorted, positive), without listing the n·m pairs: bisection on the
    value until it is pinned to one float, each step counting the pairs at or below it in one merge-like pass.
    The count divides as the listed ratios do (b / a, correctly rounded and so monotonic), so ties count alike."""
    def at_most(value: float) -> int:
        count, j = 0, 0
        for a in baseline:  # a grows, every b / a falls: j only moves on
            while j < len(changed) and changed[j] / a <= value:
                j += 1
            count += j
        return count

    low, high = changed[0] / baseline[-1], changed[-1] / baseline[0]  # the smallest and the largest ratio
    if at_most(low) >= k:
        return low
    while True:  # at_most(low) < k <= at_most(high): the k-th ratio lies in (low, high]
        middle = (low + high) / 2
        if middle <= low or middle >= high:
            return high  # no float between them: the k-th ratio is high itself
        if at_most(middle) >= k:
            high = middle
        else:
            low = middle


def _rank_for(n: int, m: int, confidence: float) -> Optional[int]:
    """The largest k with P(U ≤ k - 1) ≤ (1 - confidence) / 2: the interval is the k-th smallest to the k-th
    largest pairwise ratio. None when even k = 1 covers less than asked."""
    if n < 1 or m < 1:
        return None
    tail = (1 - confidence) / 2 * math.comb(n + m, n)
    cumulative = _u_distribution(n, m)
    k = 0
    while k < len(cumulative) and cumulative[k] <= tail + 1e-9:
        k += 1
    return k if k >= 1 else None


@functools.lru_cache(maxsize=64)
def _u_distribution(n: int, m: int) -> tuple[int, ...]:
    """Cumulative counts of the Mann–Whitney U statistic under no difference: entry u is how many of the
    C(n + m, n) equally likely orderings give U ≤ u. The counts are the coefficients of the Gaussian binomial
    [n + m choose n]_q = ∏_{i ≤ s} (1 − q^(l+i)) ÷ (1 − q^i), s and l the smaller and larger side: each factor
    one pass over the a·b + 1 coefficients (no term above that degree is ever needed)."""
    small, large = min(n, m), max(n, m)
    size = small * large + 1
    counts = [1] + [0] * (size - 1)
    for i in range(1, small + 1):
        for u in range(size - 1, large + i - 1, -1):  # × (1 − q^(large+i)), from the top down
            counts[u] -= counts[u - large - i]
        for u in range(i, size):  # ÷ (1 − q^i): a running sum with stride i
            counts[u] += counts[u - i]
    running, cumulative = 0, []
    for ways in counts:
        running += ways
        cumulative.append(running)
    return tuple(cumulative)


def median_interval(rates: Sequence[float], confidence: float = CONFIDENCE) -> Optional[tuple[float, float, float]]:
    """(low, high, coverage) for the median of ``rates``: the k-th smallest to the k-th largest measurement.

    The true median lies below the k-th smallest of n measurements only when fewer than k of them fall below
    it, a Binomial(n, ½) event whatever the noise's shape, so the coverage is exact: 1 - 2·P(Bin(n, ½) ≤ k - 1).
    k is the largest giving at least ``confidence``. Five measurements are the fewest that reach 90 % (with the
    smallest to the largest); with 3 or 4 the interval is the smallest to the largest at the coverage they give
    (75 %, 87.5 %), said as such. None under MIN_TRIALS; non-positive or non-finite rates are left out."""
    kept = sorted(rate for rate in rates if math.isfinite(rate) and rate > 0)
    n = len(kept)
    if n < MIN_TRIALS:
        return None
    k = 1
    while k < n // 2 + 1 and _median_coverage(n, k + 1) >= confidence:
        k += 1
    return kept[k - 1], kept[n - k], _median_coverage(n, k)


def _median_coverage(n: int, k: int) -> float:
    """P(k-th smallest ≤ median ≤ k-th largest) of n measurements from any continuous distribution."""
    below = sum(math.comb(n, i) for i in range(k)) / 2**n
    return 1 - 2 * below

