"""`workbench trace --json`: the report as the issue's contract of keys (other tools read them; keep the names),
and the comparison of two traces.

``path`` and ``ranks``, one entry per rank with exactly ``RANK_KEYS``, ``file``, ``unavailable_reasons`` and
``notes``; a figure that could not be read is null, and ``unavailable_reasons`` says why. Beside them, the report's
own ``notes`` (a folder's files left out, its job's ranks without a file) and, for several ranks, ``slowest``.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from workbench.trace_analysis.comparing import (NamedChange, RankComparison, host_ops_not_compared,
                                                kernels_not_compared, straggler)
from workbench.trace_analysis.comparison_caveats import comparison_caveats
from workbench.trace_analysis.model import Finding, RankReport, TraceReport
from workbench.trace_analysis.wording import why_unavailable

RANK_KEYS = (
    "rank", "device", "steps",
    "step_seconds_median", "step_seconds_low", "step_seconds_high",
    "compute_share", "communication_share", "memory_share", "idle_share",
    "idle_for_data_share", "idle_for_host_share", "idle_kernel_wait_share", "idle_other_share",
    "dataloader_share", "gpu_span", "findings",
)
# Beside the contract's keys: the file each entry was read from, which tells apart the entries of a rank in several
# files (one process's profiling cycles: one file per cycle), otherwise alike but for their order.
FILE_KEY = "file"
# Beside them too: why each figure that is null is (key → reason; a figure that cannot be read is null with a reason,
# never 0), and the rank's notes (what the trace could not be read for), which the text report prints inline.
UNAVAILABLE_KEY = "unavailable_reasons"
NOTES_KEY = "notes"
GPU_SPAN_KEYS = ("idle_share", "compute_share", "non_compute_share")
FINDING_KEYS = ("kind", "text", "figure", "threshold", "change")


# Beside the contract's path and ranks: the report's own notes, and the slowest rank (the text's "slowest:" line):
# without them a tool reading a folder whose rank file was cut saw the ranks read and no word of the one left out.
REPORT_NOTES_KEY = "notes"
SLOWEST_KEY = "slowest"


def to_json(report: TraceReport) -> dict[str, Any]:
    return {"path": report.path, "ranks": [rank_json(rank) for rank in report.ranks],
            REPORT_NOTES_KEY: list(report.notes),
            # the slowest rank named, or why none is, in the text report's words; null for one rank
            SLOWEST_KEY: straggler(report.ranks) if len(report.ranks) > 1 else None}


def rank_json(rank: RankReport) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    for key in RANK_KEYS:
        if key == "gpu_span":
            span = rank.gpu_span or {}  # None on a CPU-only trace: each share null, the keys kept
            entry[key] = {name: _number(span.get(name)) for name in GPU_SPAN_KEYS}
        elif key == "findings":
            entry[key] = [finding_json(finding) for finding in rank.findings]
        elif key in ("rank", "device", "steps"):
            entry[key] = getattr(rank, key)
        else:
            entry[key] = _number(getattr(rank, key))
    entry[FILE_KEY] = rank.file or None
    entry[UNAVAILABLE_KEY] = {key: why_unavailable(rank, key) for key in RANK_KEYS
                              if entry[key] is None or key == "gpu_span" and None in entry[key].values()}
    entry[NOTES_KEY] = list(rank.notes)
    return entry


def finding_json(finding: Finding) -> dict[str, Any]:
    return {key: _number(getattr(finding, key)) if key in ("figure", "threshold") else getattr(finding, key)
            for key in FINDING_KEYS}


def _number(value: Any) -> Optional[float]:
    """A finite float, or null: JSON has no NaN, and a figure that cannot be read is no number."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def comparison_json(comparison: RankComparison) -> dict[str, Any]:
    """`workbench trace BEFORE AFTER --json`: one rank's comparison (step time after ÷ before with its interval
    and verdict, the categories, and the kernels and host ops that changed most, in seconds per step)."""
    step = comparison.step_time
    ratio = comparison.step_time_ratio
    kernels_why = kernels_not_compared(comparison.before, comparison.after)
    host_ops_why = host_ops_not_compared(comparison.before, comparison.after)
    return {
        "rank": comparison.before.rank,
        "after_rank": comparison.after.rank,
        FILE_KEY: comparison.before.file or None,
        "after_" + FILE_KEY: comparison.after.file or None,
        # why the two are not known to be the same rank (a folder's file that names none); null where they are
        "pairing_caveat": comparison.pairing_caveat or None,
        # what besides the script may have changed (another GPU or device, other profiler options); [] where nothing
        "caveats": comparison_caveats(comparison.before, comparison.after),
        "step_time_ratio": _number(ratio),
        "step_time_ratio_low": _number(1 / step.speedup_high) if step.speedup_high else None,
        "step_time_ratio_high": _number(1 / step.speedup_low) if step.speedup_low else None,
        "confidence": _number(step.confidence),
        "verdict": step.verdict if step.speedup_low is not None else "no_verdict",
        **_throughput_json(comparison),
        "categories": {category.label: {"before_share": _number(category.before_share),
                                        "after_share": _number(category.after_share),
                                        "before_seconds_per_step": _number(category.before_seconds_per_step),
                                        "after_seconds_per_step": _number(category.after_seconds_per_step)}
                       for category in comparison.categories},
        # null, with why, where the names were not set side by side: an empty list says none of them moved
        "kernels": None if kernels_why else [_named_change(change) for change in comparison.kernels],
        "kernels_not_compared": kernels_why,
        "host_ops": None if host_ops_why else [_named_change(change) for change in comparison.host_ops],
        "host_ops_not_compared": host_ops_why,
    }


def _throughput_json(comparison: RankComparison) -> dict[str, Any]:
    """Samples per second after ÷ before, where ``--batch-size`` gave each trace's samples per step (else null)."""
    given, result = comparison.samples_per_step, comparison.throughput
    measured = result if result is not None and result.speedup is not None else None
    return {
        "samples_per_step_before": given[0] if given else None,
        "samples_per_step_after": given[1] if given else None,
        "samples_per_second_ratio": _number(measured.speedup) if measured else None,
        "samples_per_second_ratio_low": _number(measured.speedup_low) if measured else None,
        "samples_per_second_ratio_high": _number(measured.speedup_high) if measured else None,
        # null only without the flag: with it, a trace without steps (no samples per second) has no verdict
        "samples_verdict": None if not given
        else measured.verdict if measured is not None and measured.speedup_low is not None else "no_verdict",
    }


def _named_change(change: NamedChange) -> dict[str, Any]:
    return {"name": change.name, "before_seconds_per_step": _number(change.before_seconds),
            "after_seconds_per_step": _number(change.after_seconds)}
