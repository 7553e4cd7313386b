"""Which ProfilerStep#N spans of a trace are the loop's steps, and the notes that say what was left out.

Kineto may write a step twice (an op and an annotation), on two threads, or with zero length; a record_function
named like a step can sit inside one; and the profiler opens a step at the loop's last step() and closes it when
it exits, a span of no work. Each such span is left out with a note. No torch, no Qt.
"""

from __future__ import annotations

import statistics
from typing import Callable, Sequence

from workbench.engine.timeline import Activity

Span = tuple[int, int]
# The profiler's closing step: no work, tens of µs long where the loop's steps take ms (49 µs against 9.3 ms in
# HTA's own MI250 trace). Shorter than this share of the other steps' median, and holding no work, it is no step.
EXIT_STEP_SHARE = 0.1

OVERLAP = "ProfilerStep spans overlap: the steps' window runs from the first one's start to the last end"
# The loop's steps follow one another on the host; where spans cross, one is a record_function named like a step
# over several steps, and which one cannot be told from the spans (a real trace: its span covered the steps and the
# 30 µs between them, 35 µs more than the three steps it crossed).
OVERLAP_ON_THE_HOST = ("ProfilerStep spans overlap, which the loop's steps never do on the host: a record_function "
                       "named like a step and over more than one step is then read as a step, and a step wholly "
                       "inside it is left out, so the step times may not be the loop's; the steps' window runs from "
                       "the first one's start to the last end")


def step_spans(host_steps: Sequence[Activity], gpu_steps: Sequence[Activity],
               holds_work: Callable[[int, int], bool]) -> tuple[list[Span], list[str]]:
    """The steps' spans by start, and the notes on what was left out. ``gpu_steps`` (the steps' spans on the GPU's
    timeline) are read only where the host has none; ``holds_work(start, end)``: whether the rank has work there."""
    notes: list[str] = []
    outer, nested = _not_nested(host_steps)
    steps, empty, apart = _one_per_number(outer)
    if not steps and not empty and gpu_steps:  # ProfilerStep#N only on the GPU's timeline: those spans
        outer, nested = _not_nested(gpu_steps)
        steps, empty, apart = _one_per_number(outer)
        notes.append("ProfilerStep#N appears only on the GPU's timeline: the steps are its spans there")
    if apart:
        notes.append(f"{apart:,} ProfilerStep number{'s' if apart != 1 else ''} appear{'s' if apart == 1 else ''} "
                     "more than once apart in time (steps of two threads or of two profilers in one file, or PyTorch "
                     "Lightning's validation steps, which it numbers apart from its training steps): the "
                     "longest span of each number is the step read, the others are left out")
    if empty:
        notes.append(f"{empty:,} ProfilerStep spans of zero length: left out (a step time of 0 is no step time)")
    if nested:
        notes.append(f"{nested:,} ProfilerStep span{'s' if nested != 1 else ''} wholly inside another step: left out "
                     "(a record_function named like a step, not a step of the loop)")
    if host_steps and _profilers_exit_step(steps, holds_work):  # steps off the GPU's timeline hold no host work
        steps = steps[:-1]
        notes.append("the last ProfilerStep span holds no work and is a fraction of the others (the profiler opened "
                     "it at the loop's last step() and closed it on exit): left out")
    if any(start < previous_end for (_, previous_end), (start, _) in zip(steps, steps[1:])):
        notes.append(OVERLAP_ON_THE_HOST if host_steps else OVERLAP)
    return steps, notes


def _one_per_number(steps: Sequence[Activity]) -> tuple[list[Span], int, int]:
    """ProfilerStep#N spans, one per step number (Kineto may write a step twice: op and annotation), by start;
    how many step numbers had only spans of zero length (left out); and how many had spans apart in time (two
    threads' or two profilers' steps of one number: the longest is kept, the others are not read)."""
    by_name: dict[str, Span] = {}
    apart: set[str] = set()
    for a in steps:
        known = by_name.get(a.name)
        if known is not None and known[1] > known[0] and a.end_ns > a.start_ns and (
                a.start_ns >= known[1] or a.end_ns <= known[0]):
            apart.add(a.name)
        if known is None or a.end_ns - a.start_ns > known[1] - known[0]:
            by_name[a.name] = (a.start_ns, a.end_ns)
    timed = sorted(span for span in by_name.values() if span[1] > span[0])
    return timed, len(by_name) - len(timed), len(apart)


def _not_nested(steps: Sequence[Activity]) -> tuple[list[Activity], int]:
    """The step spans without those wholly inside a step of another number (a record_function named like a step,
    inside one: a step of the loop is never within another), and how many were left out. Read before the spans of
    one number are made one: a record_function named like a step in each step is one number seen in every step, not
    a step written twice, and each of its spans is one left out. A span of zero length is left to ``_one_per_number``
    (counted there as no step time)."""
    kept: list[Activity] = []
    reach, reach_name = None, None  # the latest end of a span kept so far, and its name
    for span in sorted(steps, key=lambda a: (a.start_ns, -a.end_ns)):
        if (reach is not None and span.end_ns > span.start_ns and span.start_ns < reach and span.end_ns <= reach
                and span.name != reach_name):
            continue
        kept.append(span)
        if reach is None or span.end_ns > reach:
            reach, reach_name = span.end_ns, span.name
    return kept, len(steps) - len(kept)


def _profilers_exit_step(steps: list[Span], holds_work: Callable[[int, int], bool]) -> bool:
    """Whether the last of ``steps`` (by start) is the profiler's own closing span, not a step of the loop."""
    if len(steps) < 2:
        return False
    start, end = steps[-1]
    others = statistics.median(step_end - step_start for step_start, step_end in steps[:-1])
    return end - start < EXIT_STEP_SHARE * others and not holds_work(start, end)
