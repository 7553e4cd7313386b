"""The words the CLI's text report and the window's Trace tab both say of a rank (one wording for both views):
what the host was in while the GPU waited for it, the idle no finding names, ranks read twice, names shortened."""

from __future__ import annotations

import os
from typing import Optional, Sequence

from workbench.formatting import format_step_seconds
from workbench.trace_analysis.model import NO_GPU_WORK, UNKNOWN_DEVICE, RankReport

# Where the steps (or the first to the last GPU event) span no time: every share of that time is unknown.
ZERO_WINDOW = "the time the figures are over has no length"


NO_DATALOADER_SPANS = "no DataLoader spans in this trace"
NO_STEPS = "no ProfilerStep#N spans in this trace"
NEVER_IDLE = "the GPU was never idle: a split of no idle time is no figure"
# A figure left unread for a reason none of the others names (a note of the report says what could not be read).
NOT_READ = "not read from this trace"
IDLE_SPLIT = ("idle_for_data_share", "idle_for_host_share", "idle_kernel_wait_share", "idle_other_share")
GPU_SHARES = ("compute_share", "communication_share", "memory_share", "idle_share")

# How a finding's change is proven on the user's own machine (a finding says what to try, not what it wins): the
# second trace and the comparison, which calls a gain only beyond the steps' own spread. The CLI and the Trace tab
# each name their own way to compare.
PROVE_A_CHANGE = "to see what a change did: make one, trace again, and {compare}: the steps are compared with " \
                 "their spread, and a gain is called only beyond it"
PROVE_AT_THE_CLI = "run `workbench trace BEFORE AFTER`"
PROVE_IN_THE_WINDOW = "open the new trace too and select both in the Runs tab"


def prove_a_change(ranks: Sequence[RankReport], compare: str) -> Optional[str]:
    """The line that says how to prove a finding's change, where any rank has a finding (None: nothing to try)."""
    return PROVE_A_CHANGE.format(compare=compare) if any(rank.findings for rank in ranks) else None


# Where a rank's host waited for data, when PyTorch Lightning's fetch spans are the only sign of it (trace_events)
LIGHTNING_FETCH_WORDS = "Lightning's [pl][profile]…_next spans, its fetch of the next batch from no DataLoader"


def data_wait_spans(rank: RankReport) -> str:
    """The spans RankReport.dataloader_share is read from, in words."""
    return LIGHTNING_FETCH_WORDS if rank.traits.lightning_fetch_only else "enumerate(DataLoader)#…__next__"


# A rank's device where the trace names none and holds no GPU work: "unknown" (the --json value) read as a GPU that
# could not be named, where none was read at all (a CPU-only run, or ProfilerActivity.CUDA left out)
NO_GPU_READ = "no GPU work read"


def device_words(rank: RankReport) -> str:
    """The rank's device as the text report and the Trace tab name it."""
    return NO_GPU_READ if rank.cpu_only and rank.device == UNKNOWN_DEVICE else rank.device


def dataloader_unknown(rank: RankReport) -> str:
    """Why RankReport.dataloader_share is None, in words."""
    return ZERO_WINDOW if rank.data_spans else NO_DATALOADER_SPANS


def why_unavailable(rank: RankReport, figure: str) -> str:
    """Why the rank's figure (a RankReport field: a step time, a share, ``gpu_span``) is None, in words: the one
    reason the text report and ``--json``'s ``unavailable_reasons`` give."""
    if figure.startswith("step_seconds"):
        return NO_STEPS if rank.steps == 0 else NOT_READ
    if figure == "dataloader_share":
        return dataloader_unknown(rank)
    if figure in GPU_SHARES or figure in IDLE_SPLIT or figure == "gpu_span":
        if rank.cpu_only:
            return NO_GPU_WORK
        if figure == "gpu_span" or rank.window_seconds <= 0:
            return ZERO_WINDOW  # (HTA's window, first to last GPU event, spans no time)
        if figure in IDLE_SPLIT and rank.idle_share == 0:
            return NEVER_IDLE
        if figure == "idle_for_data_share":
            return dataloader_unknown(rank)
    return NOT_READ


def host_wait_calls_text(rank: RankReport, shown: int = 4) -> Optional[str]:
    """RankReport.host_wait_calls in words, as the CLI's text and the window's page say them; None without."""
    wait = rank.host_wait_seconds
    if not rank.host_wait_calls or not wait:
        return None
    calls = ", ".join(f"{call.name} {call.seconds / wait:.0%}" for call in rank.host_wait_calls[:shown]
                      if call.seconds >= 0.005 * wait)  # what rounds to 0 % says nothing
    if not calls:
        return None
    return f"while the GPU waited for the host ({format_step_seconds(wait)}), the host was in: {calls} of that wait"


def ops_on_threads_at_once_text(rank: RankReport, characters: int = 60) -> Optional[str]:
    """Where the top host ops ran on several threads at once, seen as one op's self time longer than the time read
    over (gloo runs a bucket's collective on each of its threads), or as their self times adding up past it: that a
    self time is summed per thread; None otherwise."""
    if rank.window_seconds <= 0:
        return None
    window = f"{format_step_seconds(rank.window_seconds)} {'of the steps' if rank.steps else 'traced'}"
    over = [op for op in rank.top_host_ops if op.seconds > rank.window_seconds]
    if over:
        names = ", ".join(f"{short_name(op.name, characters)} ({format_step_seconds(op.seconds)})" for op in over)
        return (f"host op time is summed over the threads each ran on: longer than the {window}, {names} ran on "
                "several threads at once")
    # One thread's self times never overlap, so top ops adding up past the window ran on several threads at once:
    # one wait can then show twice (FSDP2 on gloo: gloo:all_gather on gloo's thread, FSDP::all_gather around it)
    total = sum(op.seconds for op in rank.top_host_ops)
    if total > rank.window_seconds:
        return (f"the top host ops' self times add up to {format_step_seconds(total)}, more than the {window}: ops ran "
                "on several threads at once (a self time is one thread's), so one wait may show in more than one of "
                "them")
    return None


def queued_waits_text(rank: RankReport, characters: int = 60, shown: int = 3) -> list[str]:
    """RankReport.queued_waits and blocked_launches in words (CLI text and the window's page), each where its time
    is QUEUED_WAITS_SHOWN of the window or more (below, it is not what bounds the step)."""
    lines = []
    least = QUEUED_WAITS_SHOWN * rank.window_seconds
    waited = rank.queued_wait_seconds
    if rank.queued_waits and rank.window_seconds and waited >= least:
        listed = [wait for wait in rank.queued_waits[:shown] if wait.seconds >= 0.005 * waited]
        names = short_names([wait.name for wait in listed], characters)
        works = ", ".join(f"{name}{f' (launched by {wait.launched_by})' if wait.launched_by else ''} "
                          f"{wait.seconds / waited:.0%}" for name, wait in zip(names, listed))
        lines.append(f"idle with its next work already launched (\"other\", {format_step_seconds(waited)}: that work "
                     f"waited on something other than its launch, such as another stream, an event or a graph's "
                     f"start), by the work that then waited: {works}")
    blocked = rank.blocked_launch_seconds
    if rank.blocked_launches and rank.window_seconds and blocked >= least:
        calls = ", ".join(f"{call.name} {call.seconds / blocked:.0%}" for call in rank.blocked_launches[:shown]
                          if call.seconds >= 0.005 * blocked)
        lines.append(f"idle while the call launching its next work was still running (counted as \"other\", "
                     f"{format_step_seconds(blocked)}: the call began before the GPU went idle and returned after, so "
                     f"the host was inside a launch that blocked): {calls}")
    return lines


QUEUED_WAITS_SHOWN = 0.05  # of the window: below this the "other" idle is not what bounds the step


def ranks_in_several_files(repeated: list[int]) -> str:
    """"rank 0 appears in more than one file" (a folder's report note, and why no straggler is named)."""
    if len(repeated) == 1:
        return f"rank {repeated[0]} appears in more than one file"
    shown = ", ".join(map(str, repeated[:RANKS_LISTED]))
    if len(repeated) > RANKS_LISTED:  # a thousand-rank job's files twice over: not a page of numbers
        shown += f" and {len(repeated) - RANKS_LISTED:,} more"
    return f"ranks {shown} appear in more than one file"


RANKS_LISTED = 8


def short_names(names: Sequence[str], characters: int) -> list[str]:
    """Each name as short_name gives it; where two of the list would then read alike (two instances of one template
    that differ in its middle), each shows its head and then the text from just before where they first differ."""
    shown = [short_name(name, characters) for name in names]
    # from where each first differs from a name it reads alike, the earliest such place, then the latest (three
    # alike names: one may differ from the second early and from the third late)
    for pick in (min, max):
        result = list(shown)
        for index, name in enumerate(names):
            twins = [other for other, form in zip(names, shown) if form == shown[index] and other != name]
            if twins:
                result[index] = _around(name, pick(len(os.path.commonprefix([name, twin])) for twin in twins),
                                        characters)
        if len(set(result)) == len(set(names)):
            break
    return result


def _around(name: str, differs: int, characters: int) -> str:
    """The name's head, then its text from just before ``differs``, in ``characters``."""
    head = characters // 3
    start = max(differs - CONTEXT_CHARACTERS, head)
    window = characters - head - 2  # two ellipses
    return name[:head] + "…" + name[start:start + window] + ("…" if start + window < len(name) else "")


CONTEXT_CHARACTERS = 8  # shown before the first character where two alike names differ


def short_name(name: str, characters: int) -> str:
    """A long name with its middle elided: two instances of one template differ in their arguments, often at the
    end (``…, 128, 64, true>``), so the end is kept too."""
    if len(name) <= characters:
        return name
    tail = max(characters // 3, 1)
    return name[: max(characters - tail - 1, 0)] + "…" + name[-tail:]


def counted(count: int, events: str) -> str:
    """"2 events with a negative duration", "1 event with a negative duration": a reason written for many events
    ("events with …", "events that are …", "… their …"), said of one where there is one."""
    if count != 1:
        return f"{count:,} {events}"
    one = "event" + events[len("events"):] if events.startswith("events") else events
    return "1 " + one.replace(" that are not JSON objects", " that is not a JSON object").replace(" their ", " its ")
