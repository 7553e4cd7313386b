"""What the Runs tab's comparison says about speed (no Qt): the selected runs as sides, each side's images/sec
with its interval, and whether a side is faster than the first beyond the noise.

Runs of one setting in one sequence (a `workbench run --repeats`, a sweep's repeats of a value, the tune's runs of
the best settings) are one side, read as the median of their runs and the interval of that median
(experiments/rate_over_runs.py). A run alone is a side of its own, with the interval of its steady windows.
Each side is compared with the first (the oldest) by the one A/B routine (comparison.compare_rates) when both
have repeats; a verdict is never drawn from one run of each: two runs of the same settings differ by 8–15 %,
more than most changes gain, and a run's own window interval cannot show that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from workbench.experiments.rate_over_runs import RateOverRuns, compared, rate_over
from workbench.controller.trace_step_comparison import trace_step_lines
from workbench.history.records import RunRecord


@dataclass(frozen=True)
class Side:
    """One side of the comparison: a run, or the runs of one setting in one sequence."""

    records: tuple[RunRecord, ...]
    rate: RateOverRuns

    @property
    def label(self) -> str:
        """"#7" or "#3, #5, #7"."""
        return ", ".join(f"#{record.id}" for record in self.records)

    @property
    def sequence_id(self) -> Optional[int]:
        return self.records[0].sequence_id


def sides(records: Sequence[RunRecord]) -> list[Side]:
    """The selected runs grouped: the runs of one setting in one sequence together, every other run alone; in the
    order of each side's first run."""
    groups: dict[Any, list[RunRecord]] = {}
    for record in sorted(records, key=lambda record: record.id):
        key = (record.sequence_id, record.config) if record.sequence_id is not None else ("run", record.id)
        groups.setdefault(key, []).append(record)
    return [Side(tuple(group), rate_over([record.summary for record in group])) for group in groups.values()]


def speed_lines(records: Sequence[RunRecord]) -> list[str]:
    """Each side's images/sec and interval, then each side against the first: [] with no run selected. Trace
    records (no images/sec: their script's steps) say their step time instead (trace_step_comparison.py)."""
    return _run_lines([record for record in records if not record.is_trace]) + trace_step_lines(records)


def _run_lines(records: Sequence[RunRecord]) -> list[str]:
    found = sides(records)
    if not found:
        return []
    letters = [_letter(index) for index in range(len(found))]
    if len(found) == 1:
        return [f"Images/sec of {found[0].label}: {found[0].rate.describe()}."]
    lines = [f"{letter} = {side.label}: {side.rate.describe()}" for letter, side in zip(letters, found)]
    first = found[0]
    for letter, side in zip(letters[1:], found[1:]):
        lines.append(f"{letter} against A: {_against(first, side)}")
    return lines


def _against(first: Side, side: Side) -> str:
    comparison = compared(first.rate, side.rate)
    if comparison is None:
        if first.rate.images_per_sec is None or side.rate.images_per_sec is None:
            return "not compared (a side has no finished run)"
        ratio = side.rate.images_per_sec / first.rate.images_per_sec
        alone = "one run each" if first.rate.runs == side.rate.runs == 1 else "one side is one run"
        return (f"{ratio:.2f}×, no verdict: {alone}, and runs of the same settings differ by 8–15 % "
                "(`--repeats 3` or a sweep with repeats measures both sides)")
    text = comparison.describe()
    if first.sequence_id != side.sequence_id:
        text += "; measured in different sequences, not interleaved: a machine that changed between them weighs in"
    return text


def _letter(index: int) -> str:
    return chr(ord("A") + index) if index < 26 else f"#{index + 1}"
