"""How sure a run's images/sec is: an interval from the spread of its steady log windows; and the median of the
figures that were read. Pure Python.

The rate is samples ÷ seconds over the steady windows; its interval comes from a block bootstrap of those
windows (contiguous blocks resampled with replacement, the rate recomputed each time on the same time base),
so a slow patch of consecutive windows (a busy neighbour, a throttled clock) widens it as it should, where
resampling single windows would treat them as independent.
"""

from __future__ import annotations

import random
import statistics
from typing import Iterable, Optional, Sequence

CONFIDENCE = 0.90  # as the comparisons' (experiments/ab.py)
RESAMPLES = 1000  # enough for the 5th and 95th percentiles to settle to a few tenths of a percent
MAX_BLOCKS = 32  # long runs: windows grouped into at most this many blocks, so the cost stays fixed
MIN_WINDOWS = 3  # fewer steady windows give no interval worth the name
SEED = 0  # the same run gives the same interval every time it is summarised


def rate_interval(
    samples: Sequence[int], seconds: Sequence[float], confidence: float = CONFIDENCE
) -> Optional[tuple[float, float]]:
    """(low, high) images/sec for windows of ``samples`` over ``seconds``; None with fewer than MIN_WINDOWS."""
    windows = [(count, span) for count, span in zip(samples, seconds) if span > 0]
    if len(windows) < MIN_WINDOWS:
        return None
    size = -(-len(windows) // MAX_BLOCKS)  # windows per block, rounded up
    blocks = [windows[start : start + size] for start in range(0, len(windows), size)]
    sums = [(sum(count for count, _ in block), sum(span for _, span in block)) for block in blocks]
    generator = random.Random(SEED)
    rates = []
    for _ in range(RESAMPLES):
        drawn = generator.choices(sums, k=len(sums))
        rates.append(sum(count for count, _ in drawn) / sum(span for _, span in drawn))
    rates.sort()
    tail = (1 - confidence) / 2
    return rates[int(tail * (RESAMPLES - 1))], rates[int(round((1 - tail) * (RESAMPLES - 1)))]


def median_of_known(values: Iterable[Optional[float]]) -> Optional[float]:
    """The median of the values that were read (None: not read, left out); None when none was."""
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None
