"""Two traces of one script side by side (`workbench trace BEFORE AFTER`): did the change make its steps faster?

The step time is compared with the workbench's one A/B statistic (experiments/ab.py): each trace's
steps are its repeated measurements (as steps per second, so "faster" means what it says there), and a change
whose interval does not clear 1 ± MIN_EFFECT is "within the noise", never a gain, however far the medians
moved. Fewer than MIN_STEPS steps in either trace give no interval and no verdict (the statistic would give 5+2
steps a 90 % interval and 3+2 none: one rule a user can read instead). A trace does not record its
batch size; given each trace's samples per step, the same statistic compares samples per second too (a larger
batch can leave the step time as it was and do many times the work). Categories are compared as
shares of the steps' GPU time and as seconds per step; kernels and host ops by their seconds per step.
No torch, no Qt.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar

from workbench.experiments.ab import MIN_TRIALS, ABResult, compare_rates
from workbench.formatting import format_short_seconds
from workbench.trace_analysis import communication_wait
from workbench.trace_analysis.model import NamedSeconds, RankReport
from workbench.trace_analysis.wording import ranks_in_several_files
from workbench.trace_analysis.ranks import TOP_COUNT

T = TypeVar("T")

# The figures compared category by category: (RankReport field, its label).
CATEGORIES = (
    ("compute_share", "compute"),
    ("communication_share", "communication"),
    ("memory_share", "memory"),
    ("idle_share", "idle"),
)
# Steps a trace needs, each, for the comparison to give an interval and a verdict: a trace's steps are its trials.
MIN_STEPS = MIN_TRIALS
# The step-time verdict in words (step_verdict_text). The interval covers the steps' spread within each trace: one
# trace of each, so the words say so.
STEP_VERDICT_WORDS = {"faster": "shorter steps in these two traces: a gain", "slower": "longer steps in these two "
                      "traces: a loss", "within_noise": "within the steps' own spread: not a gain"}
# Identical runs of one script vary by up to this much: a trace of each is one run of each, so a verdict whose
# interval stays within it says to trace both again before it is believed.
RUN_TO_RUN_SPREAD = 0.15
# How many kernels and host ops the comparison names.
TOP_CHANGES = 5
# The GPU's compute per step moved this much either way: the work per step changed (a batch size, say), and step
# time alone no longer says whether the change gained.
WORK_CHANGE = 1.5
BATCH_HINT = "if the batch size changed, compare samples per second with --batch-size BEFORE AFTER"


def work_moved(before_seconds_per_step: Optional[float], after_seconds_per_step: Optional[float]) -> Optional[float]:
    """The GPU's compute per step after ÷ before, where it moved ``WORK_CHANGE`` or more either way; else None."""
    if not before_seconds_per_step or not after_seconds_per_step:
        return None
    moved = after_seconds_per_step / before_seconds_per_step
    return moved if not 1 / WORK_CHANGE < moved < WORK_CHANGE else None


def work_moved_text(moved: float, batch_hint: str, devices_differ: bool) -> str:
    """The GPU's compute per step moved (work_moved), in words: a batch size is one cause; on two devices (other_device
    says so), the device is as likely one, and the words say so before the batch hint."""
    head = f"the GPU's compute per step is {moved:.1f}× what it was"
    if devices_differ:
        return (f"{head}: the two traces ran on different devices, and a kernel's time moves with its device as "
                f"much as with its batch; {batch_hint}")
    return f"{head}: {batch_hint}"


def per_step(share: Optional[float], window_seconds: Optional[float], steps: int) -> Optional[float]:
    """A share of the steps' GPU time as seconds per step: share × the steps' window ÷ the steps (the share is of
    the whole window, so the mean step, never the median: skewed steps would make equal work read as a change)."""
    if share is None or not window_seconds or steps < 1:
        return None
    return share * window_seconds / steps


@dataclass(frozen=True)
class CategoryChange:
    label: str
    before_share: Optional[float]  # None: a CPU-only trace has no GPU time to split
    after_share: Optional[float]
    before_seconds_per_step: Optional[float]  # share × the steps' window ÷ the steps (per_step); None without steps
    after_seconds_per_step: Optional[float]


@dataclass(frozen=True)
class NamedChange:
    """A kernel's or host op's seconds per step before and after; None where it is not among that trace's top
    entries (its time there is unknown, at most the smallest listed)."""

    name: str
    before_seconds: Optional[float]
    after_seconds: Optional[float]

    @property
    def change_seconds(self) -> Optional[float]:
        if self.before_seconds is None or self.after_seconds is None:
            return None
        return self.after_seconds - self.before_seconds


@dataclass(frozen=True)
class RankComparison:
    before: RankReport
    after: RankReport
    step_time: ABResult  # rates are steps per second: "faster" is a shorter step
    categories: tuple[CategoryChange, ...]
    kernels: tuple[NamedChange, ...]
    host_ops: tuple[NamedChange, ...]
    samples_per_step: Optional[tuple[int, int]] = None  # (before, after), where the user gave them
    throughput: Optional[ABResult] = None  # samples per second, compared: only with samples_per_step
    pairing_caveat: str = ""  # where the two are paired by a number a folder's file did not name (pairing_caveat)

    @property
    def step_time_ratio(self) -> Optional[float]:
        """after ÷ before of the median step time (below 1: shorter steps)."""
        return None if self.step_time.speedup is None else 1 / self.step_time.speedup


def compare_steps(before: Sequence[float], after: Sequence[float]) -> ABResult:
    """Two traces' per-step rates compared (ab.compare_rates); no interval, and so no verdict, where either trace
    has fewer than MIN_STEPS of them."""
    result = compare_rates(before, after)
    if min(len(result.baseline_rates), len(result.changed_rates)) < MIN_STEPS:
        return replace(result, speedup_low=None, speedup_high=None, confidence=None, verdict="within_noise")
    return result


def run_to_run_caveat(result: ABResult) -> str:
    """"; …: trace each again" where a gain or loss found within the traces' steps stays inside what identical runs
    vary by (RUN_TO_RUN_SPREAD); "" otherwise."""
    if result.speedup_low is None or result.speedup_high is None or result.verdict == "within_noise":
        return ""
    near = result.speedup_low if result.verdict == "faster" else 1 / result.speedup_high
    if near >= 1 + RUN_TO_RUN_SPREAD:
        return ""
    return ("; but identical runs of one script vary 8–15 % and this is one trace of each: trace both again, in "
            "turn, before believing it")


def step_verdict_text(result: ABResult) -> str:
    """The step-time comparison in words (``result.speedup`` known): the median ratio, its interval and the
    verdict, or why there is none; the text report and the Runs tab's line say it alike."""
    ratio = 1 / (result.speedup or 1.0)
    steps = result.trials.replace("trials", "steps")
    if result.speedup_low is None or result.speedup_high is None or result.confidence is None:
        return (f"the median step is {ratio:.2f}× as long; no verdict: fewer than {MIN_STEPS} steps in a trace "
                f"give no interval ({steps})")
    interval = f"{1 / result.speedup_high:.2f}–{1 / result.speedup_low:.2f}"
    return (f"the median step is {ratio:.2f}× as long ({interval} at {result.confidence:.0%}, {steps}): "
            f"{STEP_VERDICT_WORDS[result.verdict]}{run_to_run_caveat(result)}")


def compare(before: RankReport, after: RankReport, samples_per_step: Optional[tuple[int, int]] = None,
            pairing_caveat: str = "") -> RankComparison:
    step_time = compare_steps(_steps_per_second(before), _steps_per_second(after))
    throughput = None
    if samples_per_step is not None:
        throughput = compare_steps([samples_per_step[0] * rate for rate in _steps_per_second(before)],
                                   [samples_per_step[1] * rate for rate in _steps_per_second(after)])
    categories = tuple(
        CategoryChange(label, getattr(before, field), getattr(after, field),
                       _per_step(getattr(before, field), before), _per_step(getattr(after, field), after))
        for field, label in CATEGORIES)
    kernels: tuple[NamedChange, ...] = ()
    host_ops: tuple[NamedChange, ...] = ()
    if names_compared_per_step(before, after):
        host_ops = _changed_most(before, after, before.top_host_ops, after.top_host_ops)
    if kernels_not_compared(before, after) is None:
        kernels = _changed_most(before, after, before.top_kernels, after.top_kernels)
    return RankComparison(before=before, after=after, step_time=step_time, categories=categories, kernels=kernels,
                          host_ops=host_ops, samples_per_step=samples_per_step, throughput=throughput,
                          pairing_caveat=pairing_caveat)


def names_compared_per_step(before: RankReport, after: RankReport) -> bool:
    """Kernels and host ops are set side by side per step only where both traces have steps: a trace without them
    has totals over its window, which beside another's per-step figures read as a change of the same run."""
    return before.steps > 0 and after.steps > 0


# Why kernels and host ops are not set side by side, in words (the text report's line, and --json's
# kernels_not_compared / host_ops_not_compared beside their null lists).
NO_STEPS_TO_COMPARE_BY = "a trace without ProfilerStep#N has totals over its window, not steps"
NO_KERNELS_READ = "a trace without GPU figures has no kernels read, which is not to say none ran"


def host_ops_not_compared(before: RankReport, after: RankReport) -> Optional[str]:
    """Why the host ops are not compared per step; None where they are."""
    return None if names_compared_per_step(before, after) else NO_STEPS_TO_COMPARE_BY


def kernels_not_compared(before: RankReport, after: RankReport) -> Optional[str]:
    """Why the kernels are not compared per step (no steps in a trace, or no GPU figures: no kernel read is not no
    kernel run); None where they are."""
    if not names_compared_per_step(before, after):
        return NO_STEPS_TO_COMPARE_BY
    return NO_KERNELS_READ if before.cpu_only or after.cpu_only else None


def _steps_per_second(rank: RankReport) -> list[float]:
    return [1 / seconds for seconds in rank.step_seconds if seconds > 0]


def _per_step(share: Optional[float], rank: RankReport) -> Optional[float]:
    return per_step(share, rank.window_seconds, rank.steps)


def _changed_most(before_rank: RankReport, after_rank: RankReport, before: tuple[NamedSeconds, ...],
                  after: tuple[NamedSeconds, ...]) -> tuple[NamedChange, ...]:
    """The names whose seconds per step moved most (a name whose time did not move is none of them). A name
    missing from a list shorter than the report's top (``ranks.TOP_COUNT``) took no time there: such a list names
    all there were."""
    before_by_name = _seconds_per_step(before, before_rank)
    after_by_name = _seconds_per_step(after, after_rank)
    before_absent = 0.0 if len(before) < TOP_COUNT else None
    after_absent = 0.0 if len(after) < TOP_COUNT else None
    changes = [NamedChange(name, before_by_name.get(name, before_absent), after_by_name.get(name, after_absent))
               for name in dict.fromkeys([*before_by_name, *after_by_name])]
    bounds = {True: min(before_by_name.values(), default=0.0), False: min(after_by_name.values(), default=0.0)}

    def least_moved(change: NamedChange) -> float:
        """The least the name's time can have moved: out of a full top list, its time there is anywhere from 0 to
        that list's smallest; so a name that swapped places with another at the cut moved, at the least, 0."""
        if change.change_seconds is not None:
            return abs(change.change_seconds)
        known = change.after_seconds if change.before_seconds is None else change.before_seconds
        return max((known or 0.0) - bounds[change.before_seconds is None], 0.0)

    moved = [(least_moved(change), change) for change in changes]
    ranked = sorted((item for item in moved if item[0] >= SMALLEST_MOVE_SECONDS), key=lambda item: -item[0])
    return tuple(change for _, change in ranked[:TOP_CHANGES])


# A move the report would print as "0 µs" (it shows µs whole): float noise (2.0000000000000003e-06 against 2e-06),
# or too small to show, is not a change.
SMALLEST_MOVE_SECONDS = 0.5e-6


def _seconds_per_step(items: tuple[NamedSeconds, ...], rank: RankReport) -> dict[str, float]:
    steps = rank.steps  # names_compared_per_step: never 0 here
    totals: dict[str, float] = {}
    for item in items:
        totals[item.name] = totals.get(item.name, 0.0) + item.seconds / steps
    return totals


def by_rank_and_entry(ranks: Iterable[T], rank_of: Callable[[T], Any]) -> dict[tuple[Any, int], T]:
    """(rank number, its n-th report in the trace) → the report: how two traces' ranks are paired. A rank in
    several files of a folder (one process's profiling cycles) pairs its n-th file with the other trace's n-th,
    in the folder's name order (the Runs tab's side-by-side table pairs them so too)."""
    keyed: dict[tuple[Any, int], T] = {}
    seen: Counter = Counter()
    for rank in ranks:
        number = rank_of(rank)
        keyed[(number, seen[number])] = rank
        seen[number] += 1
    return keyed


def straggler(ranks: Sequence[RankReport]) -> str:
    """The ranks' slowest, named only where a slower rank is what the figures show: ranks of one job (no rank in
    two files: a folder of traces from several jobs repeats ranks) whose slowest and fastest step times differ
    beyond the steps' own spread (compare_steps, each rank's steps its measurements), or whose steps take alike
    while the others wait for it in communication (communication_wait); else why none is named."""
    timed = sorted((rank for rank in ranks if rank.step_seconds_median is not None),
                   key=lambda rank: rank.step_seconds_median or 0.0)
    if len(timed) < 2:
        return "n/a (fewer than two ranks with steps)"
    numbers = [rank.rank for rank in ranks]
    repeated = sorted({number for number in numbers if numbers.count(number) > 1})
    if repeated:
        return f"none named: {ranks_in_several_files(repeated)}, so these are not the ranks of one job"
    unnamed = sum(1 for rank in ranks if not rank.rank_named)
    if unnamed and len({rank.file for rank in ranks}) > 1:
        files = "1 file names" if unnamed == 1 else f"{unnamed:,} files name"
        return (f"none named: {files} no rank (no distributedInfo, no rank-N in the name), so these are not known to "
                "be one job's ranks")
    fastest, slow = timed[0], timed[-1]
    fast_seconds, slow_seconds = fastest.step_seconds_median or 0.0, slow.step_seconds_median or 0.0
    difference = (f"{format_short_seconds(slow_seconds - fast_seconds)} "
                  f"({(slow_seconds - fast_seconds) / max(fast_seconds, 1e-12):.0%}) longer than rank {fastest.rank}'s")
    result = compare_steps(_steps_per_second(fastest), _steps_per_second(slow))
    if result.verdict == "slower":
        return (f"rank {slow.rank}, its median step {difference}; in a data-parallel job every other rank waits for "
                "it in communication")
    waited_for = communication_wait.waited_for(timed)
    if waited_for is not None:
        return waited_for
    if result.speedup_low is None:
        return (f"none named: rank {slow.rank}'s median step is {difference}; fewer than {MIN_STEPS} steps a rank "
                "give no interval")
    return f"none stands out: rank {slow.rank}'s median step is {difference}, within the steps' own spread"
