"""`workbench run --json`: the run's summary as one JSON object on the last line, a contract other tools read.

Every RunSummary field is in it: under its own name, or, for the figures the contract gave a shape before this
list was derived, in that shape (``SHAPED`` says where). tests/history/test_summary_carried.py fails for a field
that is in neither.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from workbench.cli import timeline_report
from workbench.config import RunConfig
from workbench.engine.run_summary import RunSummary

# RunSummary fields the contract holds inside an object of its own, and where.
SHAPED: dict[str, str] = {
    "peak_allocated_bytes": "peak_memory_bytes.torch_allocated",
    "peak_reserved_bytes": "peak_memory_bytes.torch_reserved",
    "peak_nvml_device_used_bytes": "peak_memory_bytes.nvml_device_used",
    "peak_nvml_process_used_bytes": "peak_memory_bytes.nvml_process_used",
    "peak_process_rss_bytes": "peak_memory_bytes.process_rss",
    "rank_peak_allocated_bytes": "rank_peak_memory_bytes[].torch_allocated",
    "rank_peak_reserved_bytes": "rank_peak_memory_bytes[].torch_reserved",
    "rank_peak_nvml_device_used_bytes": "rank_peak_memory_bytes[].nvml_device_used",
    "findings": "findings (a list of finding objects)",
    **{name: f"profile.{key}" for name, key in timeline_report.PROFILE_KEYS.items()},
}


def summary_json(summary: RunSummary, run_id: Optional[int] = None, config: Optional[RunConfig] = None) -> dict:
    """The --json object: what ran (run_id in the history, None with --no-history; the whole RunConfig) and
    what came of it."""
    data: dict[str, Any] = {"run_id": run_id, "config": config.to_dict() if config is not None else None}
    data.update({item.name: _plain(getattr(summary, item.name)) for item in dataclasses.fields(RunSummary)
                 if item.name not in SHAPED})
    data.update({
        "verdict": summary.verdict,
        # why img/s, data wait and the verdict are null in a run that trained (one log window: its warm-up alone)
        "no_steady_state_reason": summary.no_steady_state_reason,
        "findings": timeline_report.findings_json(summary),
        "profile": timeline_report.profile_json(summary, config),
        "peak_memory_bytes": {
            "torch_allocated": summary.peak_allocated_bytes,
            "torch_reserved": summary.peak_reserved_bytes,
            "nvml_device_used": summary.peak_nvml_device_used_bytes,  # device-wide: every process, CUDA contexts
            "nvml_process_used": summary.peak_nvml_process_used_bytes,  # ours alone; None where hidden
            "process_rss": summary.peak_process_rss_bytes,  # the training process's resident memory
        },
        # Each rank's peaks, by rank ([] for a one-process run).
        "rank_peak_memory_bytes": [
            {"rank": rank, "torch_allocated": allocated, "torch_reserved": reserved, "nvml_device_used": nvml}
            for rank, (allocated, reserved, nvml) in enumerate(
                zip(summary.rank_peak_allocated_bytes, summary.rank_peak_reserved_bytes,
                    summary.rank_peak_nvml_device_used_bytes)
            )
        ],
    })
    return data


def _plain(value: Any) -> Any:
    """JSON's form of a summary value: tuples as lists, dataclasses as objects."""
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value
