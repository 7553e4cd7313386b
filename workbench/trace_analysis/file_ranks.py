"""One trace file's activities (``parsed_trace.ParsedTrace``) as one ``ranks.RankEvents`` per GPU it drove:
the rank each is numbered, its device's name and compute capability from the file's deviceProperties, what the
script already does (its traits, from its host ops' names)."""

from __future__ import annotations

import bisect
import operator
import re
from collections import Counter
from typing import Any, Callable, Iterable, Optional

from workbench.engine import kineto
from workbench.engine.timeline import Activity, sort_by_start_longest_first
from workbench.trace_analysis import duplicates
from workbench.trace_analysis.model import UNKNOWN_DEVICE, ScriptTraits, TraceCancelled, TraceError
from workbench.trace_analysis.parsed_trace import COSTLY_PROFILER_OPTIONS, ParsedTrace, int_field, process_rank
from workbench.trace_analysis.ranks import RankEvents
from workbench.trace_analysis.trace_events import DATALOADER_NEXT, LIGHTNING_FETCH
from workbench.trace_analysis.wording import counted

OPTIMIZER_STEP = re.compile(r"Optimizer\.step#(\w+)\.step")  # torch.optim's annotation of each step
FUSED_OPTIMIZER_OPS = "aten::_fused_"  # aten::_fused_adamw_, _fused_adam_, _fused_sgd_
# enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__: the iterator says whether the loader has workers
MULTI_PROCESS_ITERATOR, SINGLE_PROCESS_ITERATOR = "_MultiProcessingDataLoaderIter", "_SingleProcessDataLoaderIter"
# GPUs one file may name (a node holds 8 or 16; one process usually drives one).
MAX_GPUS_PER_FILE = 64
# A profiler's trace covers minutes: an event timed more than a day from the rest has a corrupt timestamp (a ts of 0
# in a trace on the epoch's clock), and would stretch the GPU's window (first to last GPU event) across decades.
ASTRAY_NS = 24 * 3600 * 10**9
EVENTS_ASTRAY = "events timed more than a day away from the rest of the trace (a corrupt timestamp)"
# Past this share of a file's events, events timed far from the rest are not a few corrupt ones but clocks that
# disagree (a host's and a GPU's a day apart): nothing is left out, and a note says the figures may be wrong.
ASTRAY_SHARE = 0.01
ListedGpus = tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]  # deviceProperties by id, and in order
_START = operator.itemgetter(0)  # Activity.start_ns
_CORRELATION = operator.itemgetter(5)  # Activity.correlation


def rank_events(parsed: ParsedTrace, fallback_rank: int, cancelled: Optional[Callable[[], bool]] = None
                ) -> list[RankEvents]:
    """One RankEvents per GPU found in the file (one, usually); a CPU-only trace gives one without device work.
    TraceCancelled after the sorts (seconds on a large trace) once ``cancelled()`` says so."""
    rank = process_rank(parsed.meta)
    gpus = _listed_gpus(parsed.meta)
    base_rank = rank if rank is not None else fallback_rank
    host_ops = {thread: sort_by_start_longest_first(ops) for thread, ops in parsed.host_ops.items()}
    host_by_thread = {thread: sort_by_start_longest_first(events) for thread, events in parsed.host_by_thread.items()}
    if cancelled is not None and cancelled():
        raise TraceCancelled("reading cancelled")
    work = {index: sorted(activities, key=_START) for index, activities in parsed.device_work.items()}
    markers = {index: sorted(activities, key=_START) for index, activities in parsed.gpu_markers.items()}
    runtime, steps, data_waits = parsed.runtime, parsed.steps, parsed.data_waits
    gpu_steps = sorted(parsed.gpu_steps, key=_START)
    on_a_stream = parsed.host_ops_on_a_stream
    skipped = Counter(parsed.skipped)
    device_skipped = Counter(parsed.device_events_skipped)  # by the GPU each names (None: none read), astray too
    device_events = Counter({index: len(activities) for index, activities in parsed.device_work.items()})
    notes: list[str] = []
    copies = 0  # events held twice in the file (duplicates), each side counted once where proven copied
    if duplicates.copied([*work.values(), *markers.values()], ids_held=True):
        before = sum(map(len, work.values())) + sum(map(len, markers.values())) + len(gpu_steps)
        work = {index: duplicates.once_each(activities) for index, activities in work.items()}
        markers = {index: duplicates.once_each(activities) for index, activities in markers.items()}
        gpu_steps = duplicates.once_each(gpu_steps)
        copies += before - sum(map(len, work.values())) - sum(map(len, markers.values())) - len(gpu_steps)
    if duplicates.copied(host_by_thread.values(), ids_held=any(map(_CORRELATION, runtime))):
        before = sum(map(len, host_by_thread.values()))
        host_by_thread = {thread: duplicates.once_each(events) for thread, events in host_by_thread.items()}
        host_ops = {thread: duplicates.once_each(ops) for thread, ops in host_ops.items()}
        runtime, steps, data_waits = (duplicates.once_each(runtime), duplicates.once_each(steps),
                                      duplicates.once_each(data_waits))
        on_a_stream = duplicates.once_each(on_a_stream)
        copies += before - sum(map(len, host_by_thread.values()))
    lists = [*host_by_thread.values(), *work.values(), *markers.values(), gpu_steps]
    bounds = _bounds_of_the_rest(lists)
    astray = 0 if bounds is None else sum(
        bisect.bisect_left(activities, bounds[0], key=_START) + len(activities)
        - bisect.bisect_right(activities, bounds[1], key=_START) for activities in lists)
    if astray > ASTRAY_SHARE * sum(map(len, lists)):  # not a few corrupt timestamps: clocks that disagree
        notes.append(f"{counted(astray, 'events')} of the file's {sum(map(len, lists)):,} "
                     f"{'is' if astray == 1 else 'are'} timed more than a day away from the rest (clocks that "
                     "disagree?): read as they are, so the figures that span them may be wrong")
    elif bounds is not None:  # a few events timed far from the rest: corrupt timestamps would stretch every window
        low, high = bounds

        def kept(activities: list[Activity]) -> list[Activity]:
            return [activity for activity in activities if low <= activity[0] <= high]

        def events_in_all() -> int:  # every event once: runtime calls, steps and ops are among the host's
            return (sum(map(len, host_by_thread.values())) + sum(map(len, work.values()))
                    + sum(map(len, markers.values())) + len(gpu_steps))

        all_before = events_in_all()
        device_before = {index: len(activities) for index, activities in work.items()}
        host_ops = {thread: kept(ops) for thread, ops in host_ops.items()}
        host_by_thread = {thread: kept(events) for thread, events in host_by_thread.items()}
        work = {index: kept(activities) for index, activities in work.items()}
        markers = {index: kept(activities) for index, activities in markers.items()}
        runtime, steps, data_waits, gpu_steps = kept(runtime), kept(steps), kept(data_waits), kept(gpu_steps)
        on_a_stream = kept(on_a_stream)
        skipped[EVENTS_ASTRAY] += all_before - events_in_all()
        device_skipped.update({index: before - len(work[index]) for index, before in device_before.items()})
    notes[:0] = [f"{counted(count, reason)}: skipped" for reason, count in sorted(skipped.items())]
    options = _costly_options_on(parsed.meta)
    if options:
        notes.append(f"taken with {', '.join(f'{option}=True' for option in options)} (the file says so): the "
                     "profiler records more for every op, which lengthens the host's time: the steps, the host ops' "
                     "times and a GPU's wait for the host read longer than with them off (with all four on, a small "
                     "CNN's steps on a CPU took 1.3–1.7× as long, its optimizer step's own time 2×)")
    notes += [counted(count, reason) for reason, count in sorted(parsed.partly_read.items())]
    if parsed.unreadable_logs:
        notes.append(f"Kineto's {' and '.join(parsed.unreadable_logs)} log lines after the events are not valid JSON "
                     "(a quote or tab in a message, written unescaped by torch's Kineto until mid-2026): passed over; "
                     "every event was read")
    if copies:
        notes.append(f"{counted(copies, duplicates.COPIES)}: left out, each event counted once")
    if None in work or None in markers:  # device events without a device index
        known = sorted(index for index in work if index is not None)
        if len(known) <= 1:  # one GPU (or none named): they are its events
            target = known[0] if known else 0
            work.setdefault(target, []).extend(work.pop(None, []))
            markers.setdefault(target, []).extend(markers.pop(None, []))
        else:
            count = len(work.pop(None, [])) + len(markers.pop(None, []))
            notes.append(f"{count:,} device events name no GPU while the file holds several: left out")
    indices = sorted(index for index in work if index is not None and work[index])
    if len(indices) > MAX_GPUS_PER_FILE:  # each GPU is a report over all the host's events: refuse, not crawl
        raise TraceError(f"{parsed.path}: its device events name {len(indices):,} GPUs; one process's trace names "
                         f"a few, and past {MAX_GPUS_PER_FILE} it is not a profiler's")
    if len(indices) > 1:
        notes.append(f"this file holds {len(indices)} GPUs ({', '.join(f'cuda:{i}' for i in indices)}): "
                     f"one report per GPU, numbered process rank × {len(indices)} + its place by device index; "
                     "the host's figures (its ops, launch calls and syncs) are the process's, shared by its GPUs")
    traits = _script_traits(parsed.host_names)
    if any(LIGHTNING_FETCH.fullmatch(name) for name in parsed.host_names) and not traits.lightning_fetch_only:
        # Lightning's fetch span holds the DataLoader's own, and Lightning's work around it: where the DataLoader's
        # spans are there, they alone are the wait for data, as the TensorBoard plugin counted it (on a Lightning
        # trace whose loader kept up, its spans made the DataLoader's share 1.06 % of the step, not 0.87 %)
        data_waits = [wait for wait in data_waits if not LIGHTNING_FETCH.fullmatch(wait.name)]
    unreadable = device_skipped + parsed.device_events_partly_read  # Counter's + drops the keys counted 0

    def one_gpu(rank: int, index: Optional[int], device_work: list[Activity], gpu_markers: list[Activity]
                ) -> RankEvents:
        device_unreadable, device_in_file = _device_events_of(index, indices, unreadable,
                                                              parsed.device_events_skipped, device_events)
        return RankEvents(
            rank=rank, device_index=index, device=_device_name(gpus, index),
            compute_capability=_compute_capability(gpus, index), device_work=device_work,
            gpu_markers=gpu_markers, runtime=runtime, steps=steps, gpu_steps=gpu_steps, data_waits=data_waits,
            host_ops_on_a_stream=on_a_stream,
            host_by_thread=host_by_thread, host_ops_by_thread=host_ops, notes=list(notes),
            fractional_timestamps=parsed.fractional_timestamps, traits=traits,
            events_skipped=sum(skipped.values()),
            device_events_unreadable=device_unreadable, device_events_in_file=device_in_file,
            gpus_in_file=len(indices), unread_categories=parsed.unread_categories, profiler_options=tuple(options))

    if not indices:
        return [one_gpu(base_rank, None, [], [])]
    # A process driving several GPUs: its GPUs numbered after those of the processes ranked below it (base +
    # position gave two 2-GPU processes the ranks 0, 1, 1, 2).
    return [one_gpu(base_rank if len(indices) == 1 else base_rank * len(indices) + position, index,
                    sorted(work[index], key=_START), markers.get(index, []))
            for position, index in enumerate(indices)]


def _bounds_of_the_rest(sorted_lists: list[list[Activity]]) -> Optional[tuple[int, int]]:
    """(low, high): the starts within ASTRAY_NS of the trace's middle (the lists' middle starts, each weighted by
    its length: a few stray events cannot move it, on a thread or stream of their own or not); None where every
    start is within them (lists sorted by start)."""
    lists = sorted((activities for activities in sorted_lists if activities),
                   key=lambda activities: activities[len(activities) // 2][0])
    if not lists:
        return None
    half, seen = sum(map(len, lists)) / 2, 0
    for activities in lists:  # the weighted median of the lists' middles
        seen += len(activities)
        if seen >= half:
            middle = activities[len(activities) // 2][0]
            break
    low, high = middle - ASTRAY_NS, middle + ASTRAY_NS
    return (low, high) if any(activities[0][0] < low or activities[-1][0] > high for activities in lists) else None


def _costly_options_on(meta: dict[str, Any]) -> list[str]:
    """The options of COSTLY_PROFILER_OPTIONS the file says were on (Kineto writes 1)."""
    return [option for option in COSTLY_PROFILER_OPTIONS
            if type(meta.get(option)) in (int, bool) and meta[option]]


def _script_traits(host_names: Iterable[str]) -> ScriptTraits:
    """What the script already does, from its host ops' names (each name once: a trace has few)."""
    compiled, optimizer, fused = False, None, False
    iterators: set[bool] = set()  # whether each DataLoader iterator named runs worker processes
    dataloader, lightning_fetch = False, False
    for name in host_names:
        if name.startswith(kineto.COMPILED_CODE_OPS):
            compiled = True
        elif name.startswith(FUSED_OPTIMIZER_OPS):
            fused = True
        elif optimizer is None and (match := OPTIMIZER_STEP.match(name)):
            optimizer = match.group(1)
        elif LIGHTNING_FETCH.fullmatch(name):
            lightning_fetch = True
        elif DATALOADER_NEXT.match(name):
            dataloader = True
            if MULTI_PROCESS_ITERATOR in name:
                iterators.add(True)
            elif SINGLE_PROCESS_ITERATOR in name:
                iterators.add(False)
    return ScriptTraits(compiled=compiled, optimizer=optimizer, fused_optimizer=fused,
                        loader_workers=iterators.pop() if len(iterators) == 1 else None,
                        lightning_fetch_only=lightning_fetch and not dataloader)


def _device_name(gpus: ListedGpus, index: Optional[int]) -> str:
    properties = _device_properties(gpus, index)
    if properties is not None:
        return str(properties["name"])
    if index is None:  # no device work read: the GPUs the file lists, where they are all of one kind
        names = {str(p["name"]) for p in gpus[1]}
        return names.pop() if len(names) == 1 else UNKNOWN_DEVICE
    return f"cuda:{index}"


def _compute_capability(gpus: ListedGpus, index: Optional[int]) -> Optional[tuple[int, int]]:
    """The GPU's (major, minor) from deviceProperties (computeMajor, computeMinor, integers as CUDA gives them);
    None where not written, or written otherwise."""
    properties = _device_properties(gpus, index)
    if properties is None:
        return None
    major, minor = properties.get("computeMajor"), properties.get("computeMinor")
    if type(major) is int and type(minor) is int and 0 < major < 100 and 0 <= minor < 10:
        return major, minor
    return None


def _device_properties(gpus: ListedGpus, index: Optional[int]) -> Optional[dict[str, Any]]:
    """The deviceProperties entry of the GPU with this index (the only one, where the file lists one GPU: its
    index remapped by CUDA_VISIBLE_DEVICES); None without a named one, or without an index."""
    if index is None:
        return None
    by_id, named = gpus
    if index in by_id:
        return by_id[index]
    return named[0] if len(named) == 1 else None


def _device_events_of(index: Optional[int], indices: list[int], unreadable: Counter, skipped: Counter,
                      read: Counter) -> tuple[int, int]:
    """One GPU's kernel, copy and fill events in the file, those it could not read and all of them: the events that
    name it, and those that name no other GPU of the file (no device, or one it holds no work of: they may be its).
    ``unreadable``, ``skipped`` and ``read`` count events by the device they name."""
    keys = [key for key in {*unreadable, *skipped, *read} if key == index or key not in indices]
    return sum(unreadable[key] for key in keys), sum(read[key] + skipped[key] for key in keys)


def _listed_gpus(meta: dict[str, Any]) -> ListedGpus:
    """deviceProperties' named entries, by id and in order (read once: a file may list many)."""
    properties = meta.get("deviceProperties")
    if not isinstance(properties, list):
        return {}, []
    named = [p for p in properties if isinstance(p, dict) and isinstance(p.get("name"), str)]
    by_id: dict[int, dict[str, Any]] = {}
    for entry in named:
        number = int_field(entry.get("id"))
        if number is not None:
            by_id.setdefault(number, entry)
    return by_id, named
