"""Interval arithmetic on [start, end) integer spans (ns on a profiler's clock): unions, clips, differences, gaps.

``union`` takes spans in any order; the others take sorted, disjoint lists (as ``union`` returns them).
"""

from __future__ import annotations

import bisect
import operator
from typing import Iterable, Sequence

Interval = tuple[int, int]

_START = operator.itemgetter(0)


def union(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    append = merged.append
    ordered = sorted(intervals, key=_START)  # by start alone (a C key): the merge needs no order among equal starts
    if not ordered:
        return merged
    current_start, current_end = ordered[0]
    for start, end in ordered:
        if start <= current_end:
            if end > current_end:
                current_end = end
        else:
            append((current_start, current_end))
            current_start, current_end = start, end
    append((current_start, current_end))
    return merged


def clip(intervals: Sequence[Interval], begin: int, end: int) -> list[Interval]:
    return [(s if s > begin else begin, e if e < end else end) for s, e in intervals if e > begin and s < end]


def subtract(intervals: Sequence[Interval], cover: Sequence[Interval]) -> list[Interval]:
    """The parts of ``intervals`` that ``cover`` does not cover (both sorted and disjoint)."""
    result: list[Interval] = []
    append = result.append
    count = len(cover)
    index = 0
    for start, end in intervals:
        while index < count and cover[index][1] <= start:
            index += 1
        cursor, probe = start, index
        while probe < count:
            cover_start, cover_end = cover[probe]
            if cover_start >= end:
                break
            if cover_start > cursor:
                append((cursor, cover_start))
            if cover_end > cursor:
                cursor = cover_end
            probe += 1
        if cursor < end:
            append((cursor, end))
    return result


def gaps(busy: Sequence[Interval], begin: int, end: int) -> list[Interval]:
    """The idle stretches of [begin, end) between the busy intervals."""
    return subtract([(begin, end)], busy) if end > begin else []


def overlap(start: int, end: int, intervals: Sequence[Interval]) -> int:
    """How much of [start, end) the sorted, disjoint ``intervals`` cover."""
    index = max(0, bisect.bisect_right(intervals, (start, start)) - 1)
    covered = 0
    for s, e in intervals[index:]:
        if s >= end:
            break
        covered += max(0, min(e, end) - max(s, start))
    return covered


def total(intervals: Iterable[Interval]) -> int:
    return sum(end - start for start, end in intervals)
