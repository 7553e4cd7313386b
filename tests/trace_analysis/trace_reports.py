"""Hand-made RankReport / TraceReport values for the report, findings and comparison tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from workbench.trace_analysis.model import NamedSeconds, RankReport, TraceReport


# The keys of a rank's entry in `workbench trace --json`: the contract other tools read (docs/cli.md), and beside it
CONTRACT_RANK_KEYS = {
    "rank", "device", "steps", "step_seconds_median", "step_seconds_low", "step_seconds_high",
    "compute_share", "communication_share", "memory_share", "idle_share",
    "idle_for_data_share", "idle_for_host_share", "idle_kernel_wait_share", "idle_other_share",
    "dataloader_share", "gpu_span", "findings",
    "file",  # beside the contract: the file the entry was read from
    "unavailable_reasons", "notes",  # beside it too: why each null figure is null, and what could not be read
}


def null_figures(entry: dict) -> set:
    """The keys of a rank's JSON entry whose figure is null (gpu_span: any of its shares)."""
    return {key for key, value in entry.items() if key not in ("file", "unavailable_reasons", "notes")
            and (value is None or key == "gpu_span" and None in value.values())}


def rank_report(**changes: Any) -> RankReport:
    """A single-GPU rank with nothing past any threshold: 5 steps of about 100 ms, mostly compute."""
    base = RankReport(
        rank=0, device="NVIDIA A100-SXM4-80GB", steps=5,
        step_seconds=(0.100, 0.101, 0.099, 0.100, 0.102),
        step_seconds_median=0.100, step_seconds_low=0.099, step_seconds_high=0.102,
        compute_share=0.70, communication_share=0.05, memory_share=0.05, idle_share=0.20,
        idle_for_data_share=0.0, idle_for_host_share=0.5, idle_kernel_wait_share=0.2, idle_other_share=0.3,
        dataloader_share=0.01,
        gpu_span={"idle_share": 0.19, "compute_share": 0.72, "non_compute_share": 0.09},
        top_kernels=(NamedSeconds("volta_sgemm_128x64_nn", 0.20), NamedSeconds("elementwise_kernel", 0.05)),
        top_host_ops=(NamedSeconds("aten::conv2d", 0.15), NamedSeconds("aten::add_", 0.02)),
        sync_calls=(), runtime_calls={"cudaLaunchKernel": 0.05}, kernels=5000, notes=(),
    )
    return dataclasses.replace(base, **changes)


def trace_report(*ranks: RankReport, path: str = "trace.json.gz") -> TraceReport:
    return TraceReport(path=path, ranks=ranks or (rank_report(),))
