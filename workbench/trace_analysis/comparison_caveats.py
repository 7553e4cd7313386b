"""What may differ between two traces besides the script, in words (`workbench trace BEFORE AFTER`, its `--json`
and the Runs tab's step line say them alike): another GPU or device, other profiler options, and ranks paired by a
number their files did not name. No torch, no Qt.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

from workbench.trace_analysis.model import UNKNOWN_DEVICE, RankReport

_INDEX_ONLY = re.compile(r"cuda:\d+")  # a GPU named by its index alone says nothing of its kind


def other_gpu(before_device: str, after_device: str) -> str:
    """Where the two traces name GPUs of two kinds, a caveat that the change is the GPU's as much as the script's;
    "" where the names are the same, or either names no kind (an index alone, or nothing)."""
    kinds = [name for name in (before_device, after_device)
             if name != UNKNOWN_DEVICE and not _INDEX_ONLY.fullmatch(name)]
    if len(kinds) < 2 or before_device == after_device:
        return ""
    return (f"the two traces ran on different GPUs ({before_device}, then {after_device}): what changed is the GPU's "
            "as much as the script's")


def other_device(before_device: str, after_device: str, before_cpu_only: bool = False,
                 after_cpu_only: bool = False) -> str:
    """other_gpu's caveat, and where one trace holds no GPU work and the other does (a CPU-only trace beside a GPU's),
    that the steps may have run on different devices; "" otherwise."""
    if before_cpu_only == after_cpu_only:
        return other_gpu(before_device, after_device)
    without, with_gpu, device = (("before", "after", after_device) if before_cpu_only
                                 else ("after", "before", before_device))
    where = "a GPU" if device in (UNKNOWN_DEVICE, "") else device
    return (f"the {without} trace holds no GPU work read (a CPU-only run, or its GPU's events left out or "
            f"unreadable), the {with_gpu} trace ran on {where}: the steps may have run on different devices, and what "
            "changed is theirs as much as the script's")


def other_profiler_options(before: Optional[Sequence[str]], after: Optional[Sequence[str]]) -> str:
    """Where the two traces were taken with different options that lengthen the host's time (each a RankReport's
    ``profiler_options``), a caveat that the change is the profiler's as much as the script's; "" where they were
    the same, or where either is not known (None: a record kept before its options were)."""
    if before is None or after is None or set(before) == set(after):
        return ""
    return (f"the two traces were taken with different profiler options (before: {_options(before)}; after: "
            f"{_options(after)}): they lengthen the host's time, so what changed is the profiler's as much as the "
            "script's")


def _options(options: Sequence[str]) -> str:
    return ", ".join(f"{option}=True" for option in options) or "none"


def comparison_caveats(before: RankReport, after: RankReport) -> list[str]:
    """What, besides the script, may have changed between the two traces: the device, the profiler's options."""
    caveats = (other_device(before.device, after.device, before.cpu_only, after.cpu_only),
               other_profiler_options(before.profiler_options, after.profiler_options))
    return [caveat for caveat in caveats if caveat]


def pairing_caveat(before: RankReport, after: RankReport, one_process_each: bool,
                   alone: tuple[bool, bool] = (False, False)) -> str:
    """Where a pair's rank is a file that names no rank (numbered by its place among its folder's files, or 0 as
    the only file read: ``alone``, before and after), that the two are paired by that number alone; "" where both
    name their rank, or where each trace holds one process (one number: one unranked script's file, or its
    profiling cycles, against the other's)."""
    return unnamed_pairing_words(before.rank, before.rank_named, after.rank_named, one_process_each, alone=alone)


def unnamed_pairing_words(number: Any, before_named: bool, after_named: bool, one_process_each: bool,
                          sides: tuple[str, str] = ("before", "after"), alone: tuple[bool, bool] = (False, False)
                          ) -> str:
    """pairing_caveat's words, for two ranks paired by their ``number``, ``sides`` naming the two traces, ``alone``
    where a side's trace is its one file (numbered 0 as the only file read, not by a place among others)."""
    unnamed = [(side, lone) for side, named, lone in zip(sides, (before_named, after_named), alone) if not named]
    if not unnamed or one_process_each:
        return ""
    if len(unnamed) == 2 and not any(alone):
        return (f"neither file names its rank (no distributedInfo, no rank-N in the name): each is numbered "
                f"{number} by its place among its folder's files, so they are paired by that place alone, not "
                "known to be the same rank")
    if len(unnamed) == 2:
        how = ", ".join(f"the {side} {_numbered(number, lone)}" for side, lone in unnamed)
        return (f"neither file names its rank (no distributedInfo, no rank-N in the name): {how}, so they are "
                "paired by that number alone, not known to be the same rank")
    (side, lone), = unnamed
    other = sides[1] if side == sides[0] else sides[0]
    return (f"the {side} file names no rank (no distributedInfo, no rank-N in the name): it is "
            f"{_numbered(number, lone)}, so it is paired with the {other} trace's rank {number} by that number "
            "alone, not known to be the same rank")


def _numbered(number: Any, alone: bool) -> str:
    return f"numbered {number} as the only file read" if alone else (
        f"numbered {number} by its place among its folder's files")
