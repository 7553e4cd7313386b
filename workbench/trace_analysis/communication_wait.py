"""The ranks' time in communication step by step, and the rank a data-parallel job's others wait for there.

Every rank's step meets the others' in the same collectives (DDP's all-reduce, FSDP's all-gathers and
reduce-scatters, a user's own all-reduce or barrier), each waiting for the slowest: the step times match, and a
straggler shows as the others' longer communication (NCCL/RCCL kernels on a GPU; gloo's collectives on the host of
a CPU job). Ranks of one job are also jittered by their machine (a loaded host schedules one process late in a step or
two), so one rank's longer total is no straggler by itself: the others must wait longer in nearly every step, by
more than the steps' own spread. No torch, no Qt.
"""

from __future__ import annotations

import math
import statistics
from typing import Optional, Sequence

from workbench.engine import intervals
from workbench.engine.intervals import Interval
from workbench.engine.timeline import Activity
from workbench.experiments.ab import MIN_TRIALS as MIN_STEPS  # as a rank named by its step time needs
from workbench.formatting import format_short_seconds, format_step_seconds
from workbench.trace_analysis.model import RankReport

# Host ops of a collective, which wait on the host until it completes: gloo's (CPU tensors; a GPU's NCCL collective
# returns at once on the host, and its wait is in its kernels) and the dispatcher's around them. Not FSDP's own
# annotations (FSDP::all_gather (N), FSDP::post_backward_reduce (N), …): they hold its copies in and out as well,
# which are compute, and gloo's ops within them give the collective's time.
COLLECTIVE_HOST_OPS = ("gloo:", "c10d::")


def longest_collective(rank: RankReport) -> Optional[str]:
    """The collective host op of the rank's top host ops with the most self time (where a CPU job's rank waits:
    gloo:all_reduce in DDP, gloo:all_gather in FSDP, gloo:barrier at a barrier); None where none is among them."""
    collectives = [op for op in rank.top_host_ops if op.name.startswith(COLLECTIVE_HOST_OPS)]
    return max(collectives, key=lambda op: op.seconds).name if collectives else None


def by_step(communication: Optional[Sequence[Interval]], host_by_thread: dict[int, list[Activity]],
            steps: Sequence[tuple[int, int]]) -> Optional[tuple[float, ...]]:
    """The seconds of each step in communication: with GPU figures, ``communication`` (its NCCL/RCCL kernels not
    hidden behind compute, the timeline's communication_spans); without (None), some collective's ops and gloo's
    annotations under way on any thread (gloo runs them on threads of its own), merged, as communication kernels are
    on a GPU. None without steps, or without GPU figures where the rank's trace holds no collective."""
    if not steps:
        return None
    if communication is not None:
        spans: Sequence[Interval] = communication
    else:
        spans = intervals.union((a.start_ns, a.end_ns) for activities in host_by_thread.values() for a in activities
                                if a.name.startswith(COLLECTIVE_HOST_OPS))
        if not spans:
            return None
    return tuple(intervals.overlap(start, end, spans) / 1e9 for start, end in steps)


# A rank the others wait for in communication this much longer a step (a share of the median step) may be named.
STRAGGLER_WAIT_SHARE = 0.10
# ... where the others wait longer by more than the steps' own spread (steps_spread) and that share in this share of
# the steps at least, paired in order (every step, up to 9 steps): jitter gives one rank a longer total now and then.
STEPS_CLEAR_SHARE = 0.9


def steps_spread(step_seconds: Sequence[float]) -> float:
    """The steps' own spread: their 90th less their 10th percentile (the steps' jitter; a checkpoint's one long step
    in a thousand does not make every wait look small beside it)."""
    deciles = statistics.quantiles(step_seconds, n=10, method="inclusive")
    return deciles[-1] - deciles[0]


def waited_for(ranks: Sequence[RankReport]) -> Optional[str]:
    """The rank the others wait for in communication (the one that spends least time there), in words: named where
    the others wait STRAGGLER_WAIT_SHARE of a step longer, in nearly every step beyond the steps' own spread; why
    not, where they wait that much longer but not beyond the spread; None where the waits differ by less, or where a
    rank's communication cannot be read."""
    if len(ranks) < 2 or any(rank.communication_by_step is None or not rank.step_seconds for rank in ranks):
        return None
    per_step = [(rank, sum(rank.communication_by_step or ()) / len(rank.step_seconds)) for rank in ranks]
    (least, least_seconds), (most, most_seconds) = (min(per_step, key=lambda item: item[1]),
                                                    max(per_step, key=lambda item: item[1]))
    step = statistics.median(rank.step_seconds_median or 0.0 for rank in ranks)
    wait = most_seconds - least_seconds
    if step <= 0 or wait < STRAGGLER_WAIT_SHARE * step:
        return None
    on_host = least.communication_share is None
    where = "in collectives (gloo's ops on the host)" if on_host else "in communication"
    longest = longest_collective(most) if on_host else None
    most_in = f" (the most in {longest})" if longest else ""
    seen = (f"rank {least.rank} spends {format_short_seconds(least_seconds)} a step {where} where rank {most.rank} "
            f"spends {format_short_seconds(most_seconds)}{most_in}, waiting {format_short_seconds(wait)} a step for it "
            f"({wait / step:.0%} of the step")
    paired = list(zip(most.communication_by_step or (), least.communication_by_step or ()))
    if len(paired) < MIN_STEPS:
        return f"none named: {seen}); fewer than {MIN_STEPS} steps a rank give no spread to hold it against"
    spread_seconds = steps_spread([*most.step_seconds, *least.step_seconds])
    bar = max(spread_seconds, STRAGGLER_WAIT_SHARE * step)
    clear = sum(1 for longer, shorter in paired if longer - shorter >= bar)
    needed = math.ceil(STEPS_CLEAR_SHARE * len(paired))
    spread = f"the steps' own spread ({format_step_seconds(spread_seconds)})"
    if clear < needed:
        return (f"none stands out: {seen}), but by more than {spread} and {STRAGGLER_WAIT_SHARE:.0%} of the step in only "
                f"{clear} of the {len(paired)} steps: within the steps' jitter")
    return (f"rank {least.rank}, by the others' wait: every rank's step meets the others' in the same collectives, "
            f"so the step times match, but {seen}; threshold {STRAGGLER_WAIT_SHARE:.0%}), in {clear} of the "
            f"{len(paired)} steps by more than {spread}")
