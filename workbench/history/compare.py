"""Runs side by side: every setting, result and environment fact, and which of them differ. No Qt.

The GUI's comparison view draws these rows; keeping the logic here lets it be tested without a window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from workbench.config import FIELD_NAMES, SETTINGS, inactive_settings
from workbench.formatting import format_duration
from workbench.history.metrics import SUMMARY_METRICS, Metric, format_metric, format_setting_cell, local_time
from workbench.history.records import RunRecord

SECTIONS: tuple[str, ...] = ("Run", "Settings", "Results", "Environment")
NOT_USED = "not used"  # a setting that did nothing with the run's other settings (its note says why)


@dataclass(frozen=True)
class ComparisonRow:
    section: str  # one of SECTIONS
    key: str  # RunConfig field, RunRecord attribute or device fact: stable, for code and tests
    label: str  # what the row header says
    values: tuple[Any, ...]  # one per run, raw
    texts: tuple[str, ...]  # one per run, as shown
    compared: bool = True  # False for facts every run has its own of (start time, note): never "differs"
    notes: tuple[str, ...] = ()  # one per run where a cell needs one: why a setting was not used ("" otherwise)
    tooltip: str = ""  # of the row's header: the setting's field name and its help

    @property
    def differs(self) -> bool:
        # Compare what is shown: two results that read the same (1,006 img/s) are not flagged as different.
        return self.compared and len(set(self.texts)) > 1


def compare_runs(records: Sequence[RunRecord]) -> list[ComparisonRow]:
    """Rows in SECTIONS order; with one run nothing differs, with none there are no values."""
    rows: list[ComparisonRow] = []

    def add(section: str, key: str, label: str, value: Callable[[RunRecord], Any], text: Callable[[Any], str],
            compared: bool = True) -> None:
        values = tuple(value(record) for record in records)
        rows.append(ComparisonRow(section, key, label, values, tuple(text(v) for v in values), compared))

    add("Run", "status", "status", lambda r: (r.status, r.reason), _status_text)
    add("Run", "source", "started from", lambda r: r.source, str)
    add("Run", "started_at", "started", lambda r: r.started_at, local_time, compared=False)
    add("Run", "duration_seconds", "duration", lambda r: r.duration_seconds, format_duration, compared=False)
    add("Run", "note", "note", lambda r: r.note, str, compared=False)

    unused = [unused_settings(record) for record in records]
    for name in FIELD_NAMES:
        values = tuple(getattr(record.config, name) for record in records)
        notes = tuple(not_used.get(name, "") for not_used in unused)
        texts = tuple(NOT_USED if note else format_setting_cell(value) for value, note in zip(values, notes))
        rows.append(ComparisonRow("Settings", name, SETTINGS[name].label, values, texts, notes=notes,
                                  tooltip=f"{name} (--{name.replace('_', '-')}): {SETTINGS[name].help}"))

    for metric in SUMMARY_METRICS:
        if metric.kind != "text":
            add("Results", metric.name, metric.label, _summary_figure(metric.name), _formatter(metric))

    add("Environment", "device_name", "device", lambda r: r.summary.device_name, _formatter(_TEXT))
    for fact in _DEVICE_FACTS:
        add("Environment", fact.name, fact.label, _device_fact(fact.name), _formatter(fact))
    add("Environment", "hostname", "machine", lambda r: r.hostname, _formatter(_TEXT))
    add("Environment", "app_version", "workbench", lambda r: r.app_version, _formatter(_TEXT))
    return rows


_TEXT = Metric("", "", "text")
# DeviceInfo fields, as stored with each run.
_DEVICE_FACTS = (
    Metric("type", "device type", "text"),
    Metric("compute_capability", "compute capability", "text"),
    Metric("total_memory_bytes", "device memory", "bytes"),
    Metric("driver_version", "driver", "text"),
    Metric("cuda_version", "CUDA (torch build)", "text"),
    Metric("torch_version", "torch", "text"),
    Metric("torchvision_version", "torchvision", "text"),
    Metric("python_version", "Python", "text"),
    Metric("cpu_count", "CPU cores", "text"),
)


def unused_settings(record: RunRecord) -> dict[str, str]:
    """The settings that did nothing in this run, with why (the form's rule, for the device the run had)."""
    device_type = record.device.get("type") or record.summary.device_type
    on_cpu = device_type == "cpu" if device_type else record.config.device == "cpu"
    return inactive_settings(record.config, on_cpu)


def _summary_figure(name: str) -> Callable[[RunRecord], Any]:
    return lambda record: getattr(record.summary, name)


def _device_fact(key: str) -> Callable[[RunRecord], Any]:
    return lambda record: record.device.get(key)


def _formatter(metric: Metric) -> Callable[[Any], str]:
    return lambda value: format_metric(metric.kind, value)


def _status_text(value: tuple[str, Any]) -> str:
    status, reason = value
    return f"{status}: {reason}" if reason else status
