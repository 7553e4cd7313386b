"""A profiler trace's events as the reader decodes them (msgspec Structs of the fields it reads), and how each
category is read (``parsed_trace`` sorts them into activities).

The decoder picks an event's type by its ``ph`` (a tagged union, in C): a complete span ("X") is a ``Span`` with
the fields read; every other phase (flow arrows, instants, metadata, counters) is a Struct holding its ``ts``
alone, so its name, category and args are skipped without being built (43 % of a real V100 trace's events are
flow arrows and instants). An event without a ``ph``, with one no trace format names, or with a mistyped
``args``, makes the decoder refuse its batch; the stdlib then decodes it, and ``as_event`` reads each of its
dicts into the same types.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Union

import msgspec

from workbench.engine import kineto
from workbench.engine.timeline import CPU_OP, DATA_WAIT, STEP

DEVICE_CATEGORIES = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
                     "gpu_memset": "memset", "Memset": "memset"}
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver", "hip_runtime"})
OP_CATEGORIES = frozenset({"cpu_op", "Operator"})
ANNOTATION_CATEGORIES = frozenset({"user_annotation"})
GPU_MARKER_CATEGORIES = frozenset({"cuda_sync"})  # CUPTI's sync records on a stream: HTA counts them as GPU events
# An annotation's span on the GPU: not GPU work, but HTA's filter reads the GPU's ProfilerStep#N (hta_rules).
GPU_ANNOTATION_CATEGORIES = frozenset({"gpu_user_annotation"})
# Categories of spans the reader passes over that are the host's own (Python frames, the profiler's span of the
# trace); any other it does not know may be a device's it does not read (an MTIA's, CUPTI's range profiler's), and
# is counted, up to this many categories (a hostile file may name millions).
HOST_ONLY_CATEGORIES = frozenset({"python_function", "Python", "Trace", "overhead"})

# How an event of a category is read: a device kind ("kernel" is split further by name), or one of these sides.
OP, HOST_OP, RUNTIME_CALL, MARKER = "op", "host op", "runtime", "gpu marker"  # OP: a host op of OP_CATEGORIES
GPU_ANNOTATION = "gpu annotation"
PASSED_OVER = "passed over"  # the host's own spans that no figure reads (HOST_ONLY_CATEGORIES)
SIDES: dict[str, str] = {
    **DEVICE_CATEGORIES,
    **{category: RUNTIME_CALL for category in RUNTIME_CATEGORIES},
    **{category: HOST_OP for category in ANNOTATION_CATEGORIES},
    **{category: OP for category in OP_CATEGORIES},
    **{category: MARKER for category in GPU_MARKER_CATEGORIES},
    **{category: GPU_ANNOTATION for category in GPU_ANNOTATION_CATEGORIES},
    **{category: PASSED_OVER for category in HOST_ONLY_CATEGORIES},
}
DEVICE_SIDES = frozenset(DEVICE_CATEGORIES.values())

NO_STREAM = -1  # the stream CUPTI gives a sync record that waits on no stream (an event's, the context's)
# A span longer than a day is a corrupt duration, not a profiler's record (its buffers hold minutes of events): one
# kernel of 1e15 µs made an input-bound trace read 100 % compute. A bound on the duration alone, not on the trace's
# other spans: a 75 s kernel or a 70 s step with nothing else in it is real, and one event with a corrupt start would
# move any bound taken from the trace's own span.
MAX_SPAN_US = 24 * 3600 * 10**6
# The TensorBoard plugin's data-loading span: enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ (or
# _MultiProcessingDataLoaderIter): the host blocked on the next batch.
DATALOADER_NEXT = re.compile(r"enumerate\(DataLoader\)#.*__next__")
# PyTorch Lightning's span around its fetch of the next batch ([pl][profile][_TrainingEpochLoop].train_dataloader_next;
# val_next, test_next, predict_next in its evaluation loops): only the next(iterator) call. Around a DataLoader it
# holds the DataLoader's own span; around any other iterable (DALI's, a stream's) it is the only sign of the wait.
LIGHTNING_FETCH = re.compile(r"\[pl\]\[profile\]\[\w+\]\.(train_dataloader|val|test|predict)_next")


def host_op_kind(name: str) -> Optional[str]:
    """A host op's or annotation's kind by its name (None: the profiler's own record, left out)."""
    if name.startswith(kineto.STEP_PREFIX):
        return STEP
    if name == kineto.DATA_WAIT_ANNOTATION or DATALOADER_NEXT.match(name) or LIGHTNING_FETCH.fullmatch(name):
        return DATA_WAIT
    if name in kineto.PROFILER_RECORDS:
        return None
    return CPU_OP


class Args(msgspec.Struct, gc=False, frozen=True):
    """The fields of an event's ``args`` the reader uses (msgspec skips the rest without building them)."""

    correlation: Any = None
    device: Any = None
    stream: Any = None


NO_ARGS = Args()  # an event without args: read as one whose args hold none of these fields
ARGS_NOT_READ = Args()  # an event's args that is not an object (decoded by the stdlib): none of it read


class Span(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """A complete span ("ph": "X"), the fields the reader uses. ``Any``: a mistyped field is read (and counted) as
    the stdlib would read it. ``args`` None: the file wrote ``"args": null``."""

    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    args: Optional[Args] = NO_ARGS


# The phases of Chrome's trace event format other than "X", each a Struct of its ts alone (HTA's rounding asks
# whether any ts in the file has a fraction, whatever its event).
OTHER_PHASES = ("B", "E", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f", "P", "N", "O", "D", "M",
                "V", "v", "R", "c", "(", ")")
PHASE_TYPES: dict[str, type] = {
    phase: msgspec.defstruct(f"Phase_{phase}", [("ts", Any, None)], tag_field="ph", tag=phase, gc=False)
    for phase in OTHER_PHASES}


class UnknownPhase(msgspec.Struct, gc=False):
    """An event (decoded by the stdlib) with no ph, or one no format names: not read, its ts alone asked."""

    ts: Any = None


# Begin/end marks: spans this reader does not pair up (said in a note, not dropped unsaid).
BEGIN_END_TYPES = (PHASE_TYPES["B"], PHASE_TYPES["E"])
# Kineto writes each span as one complete ("X") event; a trace whose spans are begin/end pairs was written otherwise
BEGIN_END_EVENTS = 'events that are begin or end marks ("ph": "B"/"E"; torch.profiler writes spans as "X")'
Event = Union[tuple([Span, *PHASE_TYPES.values()])]  # type: ignore[valid-type]  # the typed decoder's item


def as_event(item: Any) -> Any:
    """An event as the stdlib decoded it (a dict), as the typed decoder would have given it; None where it is not
    a JSON object."""
    if type(item) is not dict:
        return None
    phase = item.get("ph")
    if phase == "X" and type(phase) is str:
        args = item.get("args", NO_ARGS)
        return Span(item.get("cat"), item.get("name"), item.get("ts"), item.get("dur"), item.get("pid"),
                    item.get("tid"), args if args is NO_ARGS or args is None else Args(
                        args.get("correlation"), args.get("device"), args.get("stream"))
                    if type(args) is dict else ARGS_NOT_READ)
    kind = PHASE_TYPES.get(phase) if type(phase) is str else None
    return (kind or UnknownPhase)(item.get("ts"))
