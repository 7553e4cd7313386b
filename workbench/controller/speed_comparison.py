"""What the Runs tab's comparison says about speed (no Qt): the selected runs as sides, each side's images/sec
with its interval, and whether a side is faster than the first beyond the noise.

Runs of one setting in one sequence (a `workbench run --repeats`, a sweep's repeats of a value, the tune's runs of
the best settings) are one side, read as the median of their runs and the interval of that median
(experiments/rate_over_runs.py). A run alone is a side of its own, with the interval of its steady windows.
Each side is compared with the first (the oldest) by the one A/B routine (ab.compare_rates) when both
have repeats; a verdict is never drawn from one run of each: two runs of the same settings differ by 8–15 %,
more than most changes gain, and a run's own window interval cannot show that.
"""

from __future__ import annotations

import statistics
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

    def accuracy_text(self) -> str:
        """"; test accuracy over 3 seeds: median 43.9 %, from 41.2 % to 45.0 %" where the side's runs had seeds of
        their own and whole epochs to the end; "" otherwise."""
        seeds = {record.config.seed for record in self.records}
        accuracies = sorted(record.summary.test_accuracy for record in self.records
                            if record.status == "finished" and record.summary.test_accuracy is not None
                            and record.config.max_steps is None)
        if len(seeds) < 2 or len(accuracies) < 2:
            return ""
        return (f"; test accuracy over {len(accuracies)} seeds: median {statistics.median(accuracies):.1%}, "
                f"from {accuracies[0]:.1%} to {accuracies[-1]:.1%}")


def sides(records: Sequence[RunRecord], every_run: Sequence[RunRecord] = ()) -> list[Side]:
    """The selected runs grouped: the runs of one setting in one sequence together, every other run alone; in the
    order of each side's first run. A selected run of a sequence brings its repeats along from ``every_run`` (the
    runs the table holds): one run picked from each of two `--repeats 3` sequences compares the sequences."""
    def key(record: RunRecord) -> Any:
        # The seed decides no kernel: repeats over seeds (`--repeats N --vary-seed`) are one side for speed.
        return ((record.sequence_id, record.config.replace(seed=0)) if record.sequence_id is not None
                else ("run", record.id))

    chosen = {record.id: record for record in records}
    in_sequences = {key(record) for record in records if record.sequence_id is not None}
    chosen.update({record.id: record for record in every_run if record.sequence_id is not None
                   and key(record) in in_sequences})
    groups: dict[Any, list[RunRecord]] = {}
    for record in sorted(chosen.values(), key=lambda record: record.id):
        groups.setdefault(key(record), []).append(record)
    return [Side(tuple(group), rate_over([record.summary for record in group])) for group in groups.values()]


def speed_lines(records: Sequence[RunRecord], every_run: Sequence[RunRecord] = ()) -> list[str]:
    """Each side's images/sec and interval, then each side against the first: [] with no run selected. Trace
    records (no images/sec: their script's steps) say their step time instead (trace_step_comparison.py)."""
    return _run_lines([record for record in records if not record.is_trace],
                      [record for record in every_run if not record.is_trace]) + trace_step_lines(records)


def _run_lines(records: Sequence[RunRecord], every_run: Sequence[RunRecord]) -> list[str]:
    found = sides(records, every_run)
    if not found:
        return []
    letters = [_letter(index) for index in range(len(found))]
    if len(found) == 1:
        return [f"Img/s of {found[0].label}: {found[0].rate.describe()}{found[0].accuracy_text()}."]
    lines = [f"{letter} = {side.label}: {side.rate.describe()}{side.accuracy_text()}"
             for letter, side in zip(letters, found)]
    first = found[0]
    for letter, side in zip(letters[1:], found[1:]):
        lines.append(f"{letter} against A: {_against(first, side)}")
    return lines


def _against(first: Side, side: Side) -> str:
    comparison = compared(first.rate, side.rate)
    if comparison is None:
        if first.rate.images_per_sec is None or side.rate.images_per_sec is None:
            # said as it is: a finished run too short for a steady window is no failed run
            unmeasured = first if first.rate.images_per_sec is None else side
            return f"not compared ({unmeasured.label}: {unmeasured.rate.unmeasured_reason})"
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
