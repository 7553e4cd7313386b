"""The figures a run is compared by, and how each reads: one list for the CSV, the CLI and the GUI."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional

from workbench.engine.run_summary import FigureKind, figure_fields
from workbench.formatting import CEILING_STALE, format_bytes, format_duration, format_short_seconds

MetricKind = FigureKind


@dataclass(frozen=True)
class Metric:
    name: str  # RunSummary attribute, its name in the history, the CSV and --json
    label: str  # column header in the app and the CLI
    kind: MetricKind


# Every figure RunSummary declares (engine/events.py: its order is this order), then the verdict (the first
# finding's headline).
SUMMARY_METRICS: tuple[Metric, ...] = (
    *(Metric(item.name, item.metadata["label"], item.metadata["kind"]) for item in figure_fields()),
    Metric("verdict", "Verdict", "text"),
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
    if kind == "seconds":  # a kernel's µs and a compile's 0.4 s read as 0:00 in minutes and seconds
        return format_short_seconds(value) if abs(value) < 60 else format_duration(value)
    return str(value)


def iso_utc(timestamp: Optional[float]) -> str:
    """Unix seconds as ISO 8601 UTC text ("2024-05-01T12:00:00Z"); "" for None, NaN or a time no date names."""
    return _date_text(timestamp, "%Y-%m-%dT%H:%M:%SZ", timezone.utc)


def local_time(timestamp: Optional[float]) -> str:
    """Unix seconds as local wall time for tables ("2024-05-01 14:03"); "" where unknown."""
    return _date_text(timestamp, "%Y-%m-%d %H:%M", None)


def _date_text(timestamp: Optional[float], form: str, zone: Optional[timezone]) -> str:
    if timestamp is None:
        return ""
    try:
        return datetime.fromtimestamp(timestamp, zone).strftime(form)
    except (OverflowError, OSError, ValueError):  # NaN, or past the year 9999
        return ""


def format_setting_cell(value: Any) -> str:
    """A RunConfig value as the comparison table shows it: yes/no for switches, "none" for an unset limit
    (run names, sweeps and flags write settings with workbench.formatting.format_setting)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
