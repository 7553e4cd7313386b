"""Runs side by side: every setting, result and environment fact, and which of them differ. No Qt.

The GUI's comparison view draws these rows; keeping the logic here lets it be tested without a window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from workbench.config import FIELD_NAMES, SETTINGS, inactive_settings
from workbench.formatting import format_duration, format_step_seconds
from workbench.history.metrics import SUMMARY_METRICS, Metric, format_metric, format_setting_cell, local_time
from workbench.history.records import RunRecord

SECTIONS: tuple[str, ...] = ("Run", "Settings", "Results", "Trace", "Environment")
NOT_USED = "not used"  # a setting that did nothing with the run's other settings (its note says why)
# Why a trace record (history/trace_records.py) shows no settings: they are its script's.
TRACE_HAS_NO_SETTINGS = "an opened trace: its settings are its own script's, which the trace does not hold"


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
    # one per run where some hold no value of the row (a trace's settings and run figures, a run's trace figures):
    # False where it holds none. Their cells are not compared: a trace beside a run differs in no setting.
    held: tuple[bool, ...] = ()

    @property
    def differs(self) -> bool:
        # Compare what is shown: two results that read the same (1,006 img/s) are not flagged as different.
        texts = [text for text, held in zip(self.texts, self.held) if held] if self.held else self.texts
        return self.compared and len(set(texts)) > 1


def compare_runs(records: Sequence[RunRecord]) -> list[ComparisonRow]:
    """Rows in SECTIONS order; with one run nothing differs, with none there are no values."""
    rows: list[ComparisonRow] = []

    def add(section: str, key: str, label: str, value: Callable[[RunRecord], Any], text: Callable[[Any], str],
            compared: bool = True, held: tuple[bool, ...] = ()) -> None:
        values = tuple(value(record) for record in records)
        rows.append(ComparisonRow(section, key, label, values, tuple(text(v) for v in values), compared, held=held))

    add("Run", "record_kind", "kind", lambda r: r.record_kind, str)
    add("Run", "status", "status", lambda r: (r.shown_status, r.reason), _status_text)
    add("Run", "source", "started from", lambda r: r.source, str)
    add("Run", "started_at", "started", lambda r: r.started_at, local_time, compared=False)
    add("Run", "duration_seconds", "duration", lambda r: r.duration_seconds,
        lambda value: "" if value is None else format_duration(value), compared=False)
    add("Run", "note", "note", lambda r: r.note, str, compared=False)

    # Traces alone have no settings and no run figures to show: their own section says what they hold.
    only_traces = bool(records) and all(record.is_trace for record in records)
    runs_only = tuple(not record.is_trace for record in records)  # which hold settings and run figures
    unused = [unused_settings(record) for record in records]
    for name in () if only_traces else FIELD_NAMES:
        values = tuple(getattr(record.config, name) for record in records)
        notes = tuple(not_used.get(name, "") for not_used in unused)
        texts = tuple(NOT_USED if note else format_setting_cell(value) for value, note in zip(values, notes))
        rows.append(ComparisonRow("Settings", name, SETTINGS[name].label, values, texts, notes=notes,
                                  tooltip=f"{name} (--{name.replace('_', '-')}): {SETTINGS[name].help}",
                                  held=runs_only))

    for metric in () if only_traces else SUMMARY_METRICS:
        if metric.kind != "text":
            add("Results", metric.name, metric.label, _summary_figure(metric.name), _formatter(metric),
                held=runs_only)
    if any(record.is_trace for record in records):
        rows.extend(_trace_rows(records))

    add("Environment", "device_name", "device", lambda r: r.summary.device_name, _formatter(_TEXT))
    # A trace record knows its GPU's name from the trace, not the rest of the machine that took it: its blank
    # cells are not held, so they are no difference from a run's (nor another record's).
    for fact in _DEVICE_FACTS:
        add("Environment", fact.name, fact.label, _device_fact(fact.name), _formatter(fact), held=runs_only)
    add("Environment", "hostname", "machine", lambda r: r.hostname, _formatter(_TEXT), held=runs_only)
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
    if record.is_trace:
        return {name: TRACE_HAS_NO_SETTINGS for name in FIELD_NAMES}
    device_type = record.device.get("type") or record.summary.device_type
    on_cpu = device_type == "cpu" if device_type else record.config.device == "cpu"
    return inactive_settings(record.config, on_cpu)


def _summary_figure(name: str) -> Callable[[RunRecord], Any]:
    # A trace record has no run figures: its steps, train time and images are not a run's (None, shown blank).
    return lambda record: None if record.is_trace else getattr(record.summary, name)


def _rank_positions(trace: Any) -> dict[tuple[Any, int], int]:
    """(rank number, its n-th entry) → position in the trace's ranks: ranks are set side by side by their number,
    never by their place in a list (a lone rank-1 file beside a folder's ranks 0 and 1). A folder of files from
    different jobs may repeat a rank: its n-th entry pairs with the others' n-th."""
    positions: dict[tuple[Any, int], int] = {}
    seen: dict[Any, int] = {}
    for position, rank in enumerate(trace.ranks):
        number = rank.get("rank")
        number = number if isinstance(number, int) and not isinstance(number, bool) else f"#{position}"
        positions[(number, seen.get(number, 0))] = position
        seen[number] = seen.get(number, 0) + 1
    return positions


def _rank_label(rank: tuple[Any, int]) -> tuple[str, str]:
    """(row key part, label) of a rank: "rank1" and "rank 1"; a repeated rank's later entries "rank1.2" and
    "rank 1 (entry 2)"."""
    number, repeat = rank
    key, label = f"rank{number}", f"rank {number}"
    if repeat:
        key, label = f"{key}.{repeat + 1}", f"{label} (entry {repeat + 1})"
    return key, label


def _findings_text(findings: Any) -> str:
    if not isinstance(findings, list):
        return ""
    return "; ".join(dict.fromkeys(str(finding.get("kind")) for finding in findings if isinstance(finding, dict))) or "none"


def _device_fact(key: str) -> Callable[[RunRecord], Any]:
    return lambda record: record.device.get(key)


def _formatter(metric: Metric) -> Callable[[Any], str]:
    return lambda value: format_metric(metric.kind, value)


def _status_text(value: tuple[str, Any]) -> str:
    status, reason = value
    return f"{status}: {reason}" if reason else status


# A trace record's file and, rank by rank, its figures (the `workbench trace --json` keys): label, key, how it reads.
_PERCENT = _formatter(Metric("", "", "fraction"))
_TRACE_FILE_ROWS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("trace file", "path", _formatter(_TEXT)), ("size", "size_bytes", _formatter(Metric("", "", "bytes"))),
    ("sha256", "sha256", _formatter(_TEXT)))
def _step_time(value: Any) -> str:
    return "" if value is None else format_step_seconds(value)


_TRACE_RANK_ROWS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("device", "device", _formatter(_TEXT)),
    ("steps found", "steps", _formatter(Metric("", "", "count"))),
    ("step time (median)", "step_seconds_median", _step_time),
    ("step time low", "step_seconds_low", _step_time),
    ("step time high", "step_seconds_high", _step_time),
    ("compute", "compute_share", _PERCENT),
    ("communication", "communication_share", _PERCENT),
    ("memory", "memory_share", _PERCENT),
    ("idle", "idle_share", _PERCENT),
    ("idle split: waiting for data (of idle)", "idle_for_data_share", _PERCENT),
    ("idle split: waiting for the host (of idle)", "idle_for_host_share", _PERCENT),
    ("idle split: kernel wait (of idle)", "idle_kernel_wait_share", _PERCENT),
    ("idle split: other (of idle)", "idle_other_share", _PERCENT),
    ("DataLoader share", "dataloader_share", _PERCENT),
    ("GPU span idle (HTA's window)", "gpu_span.idle_share", _PERCENT),
    ("GPU span compute", "gpu_span.compute_share", _PERCENT),
    ("GPU span non-compute", "gpu_span.non_compute_share", _PERCENT),
    ("findings", "findings", lambda value: _findings_text(value)),
)


def _trace_rows(records: Sequence[RunRecord]) -> list[ComparisonRow]:
    """The Trace section: the file, then each figure of rank 0, 1, … paired by rank number (a run's cells blank)."""
    traces = [record.trace if record.is_trace else None for record in records]
    held = tuple(trace is not None for trace in traces)  # a run's cells are blank, not a difference
    rows = []
    for label, key, text in _TRACE_FILE_ROWS:
        values = tuple(getattr(trace, key) if trace is not None else None for trace in traces)
        rows.append(ComparisonRow("Trace", f"trace.{key}", label, values, tuple(text(value) for value in values),
                                  compared=key != "path", held=held))
    positions = [_rank_positions(trace) if trace is not None else {} for trace in traces]
    shown = [trace for trace in traces if trace is not None]
    if len(shown) > 1 and all(len(trace.ranks) == 1 for trace in shown):
        # one rank each: set side by side whatever their numbers, as `workbench trace BEFORE AFTER` compares them
        # their numbers in the columns' order, each once: "rank 1/0" reads as the cells beside it, rank 1's first
        numbers = dict.fromkeys(str(next(iter(found))[0]) for found in positions if found)
        both = ("/".join(numbers), 0)
        positions = [{both: 0} if trace is not None else {} for trace in traces]
    ranks = sorted({rank for found in positions for rank in found},
                   key=lambda rank: (0, rank[0], "", rank[1]) if isinstance(rank[0], int)
                   else (1, 0, str(rank[0]), rank[1]))
    # one process each (one rank number each): its files are not paired by a number their place gave them
    one_process_each = len(shown) > 1 and all(len({repr(rank.get("rank")) for rank in trace.ranks}) == 1
                                               for trace in shown)
    for rank in ranks:
        key_part, rank_label = _rank_label(rank)
        unnamed = _unnamed_beside_another(records, traces, positions, rank, one_process_each)
        tooltip = ""
        if unnamed:
            whose = " and ".join(f"#{record.id}'s" for record in unnamed)
            rank_label = f"{rank_label} ({whose} {'file names' if len(unnamed) == 1 else 'files name'} no rank)"
            tooltip = _unnamed_rank_words(unnamed, rank[0])
        steps = tuple(trace.rank_values("steps")[found[rank]] if trace is not None and rank in found else None
                      for trace, found in zip(traces, positions))
        # A rank with steps has its shares over them; one without, over its traced window (first to last event):
        # set side by side, each says which, and they are not flagged as a difference.
        mixed = len({bool(count) for count in steps if count is not None}) > 1
        # the rank's figures as each record keeps them; None where the record has no such rank
        kept = tuple(trace.ranks[found[rank]] if trace is not None and rank in found else None
                     for trace, found in zip(traces, positions))
        for label, key, text in _TRACE_RANK_ROWS:
            values = tuple(trace.rank_values(key)[found[rank]] if trace is not None and rank in found else None
                           for trace, found in zip(traces, positions))
            if all(value is None for value in values):
                continue  # read on no trace shown (a CPU-only trace's GPU shares): nothing to set side by side
            texts = tuple(_unread(key, figures) if figures is not None and value is None
                          else _over_its_window(text(value), value, count, key, mixed)
                          for value, count, figures in zip(values, steps, kept))
            # a figure its trace could not read is no difference from another's
            read = tuple(holds and not (figures is not None and value is None)
                         for holds, figures, value in zip(held, kept, values))
            rows.append(ComparisonRow("Trace", f"trace.{key_part}.{key}", f"{rank_label}: {label}", values, texts,
                                      compared=not (mixed and key in _OVER_THE_WINDOW), tooltip=tooltip, held=read))
    return rows


def _unnamed_beside_another(records: Sequence[RunRecord], traces: Sequence[Any], positions: Sequence[dict],
                            rank: tuple[Any, int], one_process_each: bool) -> list[RunRecord]:
    """The records whose file of this rank names no rank, where the rank is set beside another record's of that
    number: paired by that number alone, as the step line says (a record kept before rank_named was kept: taken
    as named). None where each trace holds one process."""
    holding = [(record, trace.ranks[found[rank]]) for record, trace, found in zip(records, traces, positions)
               if trace is not None and rank in found]
    if one_process_each or len(holding) < 2:
        return []
    return [record for record, figures in holding if figures.get("rank_named") is False]


def _unnamed_rank_words(unnamed: Sequence[RunRecord], number: Any) -> str:
    """Why a rank's rows say its file names no rank: how each such record numbered it (the step line's words)."""
    def numbered(record: RunRecord) -> str:
        alone = record.trace is not None and len(record.trace.files) <= 1  # a lone file's record lists none
        return "as the only file read" if alone else "by its place among its folder's files"

    how = "; ".join(f"#{record.id}'s is numbered {number} {numbered(record)}" for record in unnamed)
    return (f"no distributedInfo, no rank-N in the file's name: {how}; so it is set beside the other traces' rank "
            f"{number} by that number alone, not known to be the same rank")


# The figures over a rank's window: its steps, else the traced window (first to last GPU event, or host event)
_OVER_THE_WINDOW = frozenset({"compute_share", "communication_share", "memory_share", "idle_share",
                              "idle_for_data_share", "idle_for_host_share", "idle_kernel_wait_share",
                              "idle_other_share", "dataloader_share"})
_STEP_TIMES = frozenset({"step_seconds_median", "step_seconds_low", "step_seconds_high"})
NO_STEPS = "n/a (no ProfilerStep#N in the trace)"


NOT_READ = "n/a (not read from this trace)"


def _unread(key: str, figures: dict[str, Any]) -> str:
    """A figure the trace could not read (None in its record), in words: never a blank, which reads as a figure the
    record does not hold (a run's, or a rank the trace lacks). Why is the reason its `--json` entry gave, which the
    record keeps (``unavailable_reasons``: a gpu_span share by ``gpu_span``); a record kept before it did says what
    it can."""
    reasons = figures.get("unavailable_reasons")
    reason = reasons.get(key.split(".")[0]) if isinstance(reasons, dict) else None
    if isinstance(reason, str):
        return f"n/a ({reason})"
    if key in _STEP_TIMES and figures.get("steps") == 0:
        return NO_STEPS
    return NOT_READ


def _over_its_window(text: str, value: Any, steps: Optional[int], key: str, mixed: bool) -> str:
    """A trace's cell: where some of the traces set side by side have steps and some not, which window a share is
    over."""
    if mixed and key in _OVER_THE_WINDOW and value is not None:
        return f"{text} ({'over the steps' if steps else 'no steps: over the traced window'})"
    return text
