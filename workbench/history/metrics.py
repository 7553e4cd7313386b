"""The figures a run is compared by, and how each reads: one list for the CSV, the CLI and the GUI."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, Optional

from workbench.formatting import CEILING_STALE, format_bytes, format_duration

MetricKind = Literal["rate", "count", "fraction", "efficiency", "bytes", "loss", "seconds", "text"]


@dataclass(frozen=True)
class Metric:
    name: str  # RunRecord attribute (and CSV column unless csv_name says otherwise)
    label: str  # column header in the app and the CLI
    kind: MetricKind
    csv_name: Optional[str] = None  # where the CSV contract spells it differently

    @property
    def csv_column(self) -> str:
        return self.csv_name or self.name


# In CSV column order (the issue lists them in this order).
SUMMARY_METRICS: tuple[Metric, ...] = (
    # The CSV contract column is images_per_sec_mean: the mean rate over the steady state (samples / seconds).
    Metric("images_per_sec", "Img/s", "rate", csv_name="images_per_sec_mean"),
    Metric("images_per_sec_median", "Img/s (median)", "rate"),
    Metric("data_wait_fraction", "Data wait", "fraction"),
    Metric("device_span_fraction", "Event span", "fraction"),
    Metric("peak_allocated_bytes", "Peak alloc", "bytes"),
    Metric("peak_reserved_bytes", "Peak reserved", "bytes"),
    Metric("peak_nvml_used_bytes", "Peak NVML", "bytes"),  # device-wide: every process's memory (the tooltip says so)
    Metric("final_loss", "Final loss", "loss"),
    Metric("test_accuracy", "Test acc", "fraction"),
    Metric("wall_seconds", "Train time", "seconds"),
    Metric("device_name", "Device", "text"),
    Metric("torch_version", "Torch", "text"),
    # Schema 4, appended so earlier columns keep their places: the profiler-sampled GPU timeline (what
    # the GPU did, what its idle time waited for), the compute ceiling, and the verdict (the first
    # finding's headline).
    Metric("kernel_busy_fraction", "Kernel busy", "fraction"),
    Metric("memcpy_fraction", "Memcpy", "fraction"),
    Metric("idle_waiting_for_data_fraction", "Idle: data", "fraction"),
    Metric("idle_waiting_for_host_fraction", "Idle: host", "fraction"),
    Metric("idle_other_fraction", "Idle: other", "fraction"),
    Metric("kernels_per_step", "Kernels/step", "count"),
    Metric("ceiling_images_per_sec", "Ceiling img/s", "rate"),
    Metric("pipeline_efficiency", "Efficiency", "efficiency"),  # above 100 %: the ceiling is stale
    Metric("verdict", "Verdict", "text"),
    Metric("world_size", "Processes", "count"),  # data-parallel ranks (the CSV contract name: world_size)
    # Schema 4 (issue 9): this process's own NVML memory beside the device-wide figure; fp16 skipped steps.
    Metric("peak_nvml_process_used_bytes", "Peak NVML (this process)", "bytes"),
    Metric("skipped_optimizer_steps", "Skipped steps (fp16)", "count"),
    # Schema 5 (issue 22): the training process's peak resident memory: what a CPU run's memory is.
    Metric("peak_process_rss_bytes", "Peak RSS (process)", "bytes"),
)
METRICS_BY_NAME = {metric.name: metric for metric in SUMMARY_METRICS}


def format_metric(kind: MetricKind, value: Any) -> str:
    """A figure as people read it: 1,234 img/s, 12.5 %, 1.2 GiB; "" when unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if kind in ("rate", "count"):
        return f"{value:,.0f}"
    if kind == "efficiency" and value > 1.0:
        return CEILING_STALE
    if kind in ("fraction", "efficiency"):
        return f"{value * 100:.1f} %"
    if kind == "bytes":
        return format_bytes(value)
    if kind == "loss":
        return f"{value:.4f}"
    if kind == "seconds":
        return format_duration(value)
    return str(value)


def iso_utc(timestamp: Optional[float]) -> str:
    """Unix seconds as ISO 8601 UTC text ("2024-05-01T12:00:00Z"); "" for None."""
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def local_time(timestamp: Optional[float]) -> str:
    """Unix seconds as local wall time for tables ("2024-05-01 14:03")."""
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


def format_setting_cell(value: Any) -> str:
    """A RunConfig value as the comparison table shows it: yes/no for switches, "none" for an unset limit
    (run names, sweeps and flags write settings with workbench.formatting.format_setting)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
