"""What the Runs tab's comparison says about the step time of the trace records selected (no Qt).

Each trace's steps are its repeated measurements: two traces are compared rank by rank with the workbench's one A/B
statistic (experiments/ab.compare_rates, on steps per second, so "faster" is a shorter step), as
`workbench trace BEFORE AFTER` compares them. A difference within the steps' own spread is not called a gain;
fewer than MIN_STEPS (3) steps in either trace give no interval and no verdict.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from workbench.formatting import format_step_seconds
from workbench.history.records import RunRecord
from workbench.trace_analysis.comparing import (by_rank_and_entry, compare_steps, per_step, step_verdict_text,
                                                work_moved, work_moved_text)
from workbench.trace_analysis.comparison_caveats import other_device, other_profiler_options, unnamed_pairing_words


def trace_step_lines(records: Sequence[RunRecord]) -> list[str]:
    """One trace: each rank's median step and spread. Several: each against the first (the oldest), rank by rank."""
    traces = sorted(((record.id, record.trace) for record in records if record.is_trace and record.trace is not None),
                    key=lambda item: item[0])
    if not traces:
        return []
    first_id, first = traces[0]
    if len(traces) == 1:
        return [f"Step time of #{first_id}, rank {_rank(rank)}: {_spread(rank)}" for rank in first.ranks]
    lines = []
    before_ranks = by_rank_and_entry(first.ranks, _rank)
    for other_id, other in traces[1:]:
        # one process each (one rank number each): its files are not paired by a number their place gave them
        one_process_each = len({repr(_rank(rank)) for rank in first.ranks}) == 1 == len(
            {repr(_rank(rank)) for rank in other.ranks})
        for key, after in by_rank_and_entry(other.ranks, _rank).items():
            # one rank each: compared whatever their numbers, as `workbench trace BEFORE AFTER` compares them
            one_each = len(first.ranks) == 1 and len(other.ranks) == 1
            before = first.ranks[0] if one_each else before_ranks.get(key)
            if before is None:
                why = "no such rank" if (key[0], 0) not in before_ranks else f"rank {key[0]} in fewer files"
                lines.append(f"#{other_id} against #{first_id}, rank {_rank(after)}: not compared (#{first_id} has "
                             f"{why})")
                continue
            gpus = other_device(str(before.get("device", "")), str(after.get("device", "")),
                                before.get("cpu_only") is True, after.get("cpu_only") is True)
            # one rank each of two numbers: both, each beside its record, in the line's order
            numbers = (f"{_rank(after)} against rank {_rank(before)}" if _rank(before) != _rank(after)
                       else f"{_rank(after)}")
            # a record kept before rank_named was kept: its rank is taken as named (unknown, as it was read then)
            unnamed = unnamed_pairing_words(_rank(after), before.get("rank_named") is not False,
                                            after.get("rank_named") is not False, one_process_each,
                                            (f"#{first_id}", f"#{other_id}"), (len(first.files) <= 1, len(other.files) <= 1))
            options = other_profiler_options(_options(before), _options(after))
            lines.append(f"#{other_id} against #{first_id}, rank {numbers}: {_spread(before)} → {_spread(after)}; "
                         f"{_verdict(before, after)}{_work_hint(before, after, bool(gpus))}"
                         + "".join(f"; {caveat}" for caveat in (gpus, options, unnamed) if caveat))
    return lines


def _options(rank: dict[str, Any]) -> Optional[list[str]]:
    """The profiler's options a record's rank was taken with; None where it was kept before they were (unknown)."""
    options = rank.get("profiler_options")
    return [str(option) for option in options] if isinstance(options, list) else None


def _verdict(before: dict[str, Any], after: dict[str, Any]) -> str:
    before_steps, after_steps = _step_seconds(before), _step_seconds(after)
    if not before_steps or not after_steps:
        return "no verdict: a trace without steps has no step time to compare"
    result = compare_steps([1 / seconds for seconds in before_steps], [1 / seconds for seconds in after_steps])
    if result.speedup is None:
        return "no verdict: no step with a time"
    return step_verdict_text(result)


def _work_hint(before: dict[str, Any], after: dict[str, Any], devices_differ: bool) -> str:
    """Where the GPU's compute per step moved (a batch size changed, say, or the device), step time alone does not
    say it all."""
    moved = work_moved(_compute_per_step(before), _compute_per_step(after))
    return "" if moved is None else f"; {work_moved_text(moved, WINDOW_BATCH_HINT, devices_differ)}"


# The window has no batch sizes to give a trace (a trace does not record its own): the command that takes them.
WINDOW_BATCH_HINT = ("if the batch size changed, compare samples per second at the command line: workbench trace "
                     "--batch-size BEFORE AFTER with the two trace files")


def _compute_per_step(rank: dict[str, Any]) -> Optional[float]:
    """The GPU's compute seconds per step: its share × the steps' window ÷ the steps (a record kept before the
    window was kept: the steps' sum, which is the window where the steps follow each other)."""
    steps = _step_seconds(rank)
    window = _number(rank.get("window_seconds")) or sum(steps)
    return per_step(_number(rank.get("compute_share")), window, len(steps))


def _step_seconds(rank: dict[str, Any]) -> list[float]:
    values = rank.get("step_seconds")
    return [float(value) for value in values if isinstance(value, (int, float)) and value > 0] if isinstance(
        values, list) else []


def _spread(rank: dict[str, Any]) -> str:
    median = _number(rank.get("step_seconds_median"))
    if median is None:
        return "no steps"
    low, high = _number(rank.get("step_seconds_low")), _number(rank.get("step_seconds_high"))
    spread = (f" ({format_step_seconds(low)}–{format_step_seconds(high)})"
              if low is not None and high is not None else "")
    steps = rank.get("steps")
    return f"{format_step_seconds(median)} median{spread}, {steps} step{'' if steps == 1 else 's'}"


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) else None


def _rank(rank: dict[str, Any]) -> Any:
    return rank.get("rank")
