"""A run as the history gives it back (RunRecord), and how a row of the runs table becomes one.

Reading is tolerant of the history's past: settings a newer or older workbench stored are dropped
and named (``config_from_json``), JSON columns that cannot be read give empty values. No Qt here.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
import unicodedata
from dataclasses import dataclass, field, fields, replace
from typing import Any, Optional, Sequence, get_type_hints

from workbench.config import FIELD_TYPES, ConfigError, RunConfig
from workbench.engine.run_summary import Finding, RunSummary
from workbench.history import stored_values as read
from workbench.history.schema import RANK_PEAK_FIGURES, SUMMARY_COLUMNS
from workbench.history.trace_records import RECORD_KIND_TRACE, TraceRecord


TRACE_STATUS = "opened"  # a trace record's status in the views: opened in the window, never run


@dataclass(frozen=True)
class RunRecord:
    """A run as the history holds it: what it is (name, status, settings, device) and its figures (``summary``,
    as the run's last write left them: a running or interrupted run's are those so far)."""

    id: int
    name: str
    note: str
    status: str  # running, finished, stopped, failed, interrupted
    reason: Optional[str]
    failure_kind: Optional[str]
    source: str  # cli, gui
    started_at: float  # unix seconds; NaN where the history holds no readable time
    finished_at: Optional[float]
    config: RunConfig
    summary: RunSummary
    device: dict[str, Any] = field(default_factory=dict)  # DeviceInfo fields; empty until the run started
    run_info: dict[str, Any] = field(default_factory=dict)  # dataset_name, train_size, total_steps, notes, ...
    heartbeat_at: Optional[float] = None
    pid: Optional[int] = None
    hostname: Optional[str] = None
    process_identity: Optional[str] = None
    app_version: Optional[str] = None
    # Stored settings this version does not know (or cannot read); the config uses defaults for them.
    config_dropped: tuple[str, ...] = ()
    # The sequence of runs (a sweep, repeats, a search for faster settings, a verification, a max-batch search: the
    # "kind") this run belongs to; None for a lone run. The history, the CSV and --json name it the same.
    sequence_id: Optional[int] = None
    sequence_name: Optional[str] = None
    traceback: Optional[str] = None  # of a failure nobody expected (kinds error, data_loader, out_of_memory)
    tags: tuple[str, ...] = ()  # the user's words on the run, in the order given
    # "run", or "trace": a torch.profiler trace opened in the window (issue 27's schema version). A trace record has no settings
    # (config holds the defaults, which the views do not show) and no run figures; its own are in ``trace``.
    record_kind: str = "run"
    trace: Optional[TraceRecord] = None

    @property
    def is_trace(self) -> bool:
        return self.record_kind == RECORD_KIND_TRACE

    @property
    def shown_status(self) -> str:
        """The status as the views say it: a trace was opened, not run (its stored status is "finished")."""
        return TRACE_STATUS if self.is_trace else self.status

    @property
    def noun(self) -> str:
        """What the record is, in one word: "run" or "trace" (a trace was opened, not run)."""
        return "trace" if self.is_trace else "run"

    @property
    def duration_seconds(self) -> Optional[float]:
        """Wall time from start to end (to now, while running); None for a trace, which was opened, not run."""
        if self.is_trace:
            return None
        if not math.isfinite(self.started_at):  # a start the history could not read
            return None
        end = self.finished_at if self.finished_at is not None else time.time()
        return max(0.0, end - self.started_at)

    @property
    def verdict(self) -> Optional[str]:
        """The first finding's headline: what bounded the run, in one sentence (None before schema 4)."""
        return self.summary.verdict

    @property
    def label(self) -> str:
        return f"#{self.id} {self.name}"


@dataclass(frozen=True)
class RunChanges:
    """What a view must redraw since it last asked (``HistoryStore.changes_since``)."""

    revision: int  # the history's revision these changes bring a view up to: pass it to the next call
    changed: tuple[RunRecord, ...]  # runs added or written since the revision asked for, newest first
    run_ids: frozenset[int]  # every run stored now: a run a view shows that is not here was deleted


def rank_peaks_json(summary: RunSummary) -> Optional[str]:
    """The runs table's rank_peaks_json: each rank's peaks by figure; None for a one-process run."""
    peaks = {name: list(getattr(summary, "rank_" + name)) for name in RANK_PEAK_FIGURES}
    return json.dumps(peaks) if any(peaks.values()) else None


def _rank_peaks(text: Optional[str]) -> dict[str, Any]:
    """RunSummary's rank_* keyword arguments (each a tuple of Optional[int]) from rank_peaks_json."""
    stored = _json_object(text)
    peaks: dict[str, Any] = {}
    for name in RANK_PEAK_FIGURES:
        values = stored.get(name)
        if isinstance(values, list):
            peaks["rank_" + name] = tuple(value if isinstance(value, int) else None for value in values)
    return peaks


TAG_MAX_CHARS = 40
TAG_SEPARATOR = ";"  # between a run's tags in one CSV cell


def clean_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """The tags stripped, empty and repeated ones dropped, in the order given; ValueError naming a tag that is
    longer than TAG_MAX_CHARS or holds the CSV's separator or a line break (it would not read back the same)."""
    kept: list[str] = []
    for tag in tags:
        tag = tag.strip()
        if not tag or tag in kept:
            continue
        # a control character (an escape sequence) would drive the terminal that lists the tag
        if len(tag) > TAG_MAX_CHARS or TAG_SEPARATOR in tag or any(unicodedata.category(c) == "Cc" for c in tag):
            raise ValueError(f"a tag is at most {TAG_MAX_CHARS} characters on one line, without "
                             f"'{TAG_SEPARATOR}' or control characters (got {tag[:60]!r})")
        kept.append(tag)
    return tuple(kept)


def _tags(text: Any) -> tuple[str, ...]:
    """The stored tags; () for text that is no JSON list of strings (a hand-edited file)."""
    return tuple(tag for tag in read.json_list(text) if isinstance(tag, str))


def record_from_row(row: sqlite3.Row) -> RunRecord:
    """A RunRecord from a row of ``SELECT runs.*, sequences.name AS sequence_name`` (store.py's _RUNS). SQLite keeps
    whatever a hand-edited or damaged file put in a column (text in a figure, a blob, 1e300 for a time): each value
    is read as its field's type holds it, and one that cannot be is unknown (None, or the field's default), so the
    row still lists, compares and exports instead of failing every view of the history."""
    config, dropped = config_from_json(read.text(row["config_json"]))
    # Any: the run's end as stored, which may be "running" or "interrupted" beside RunSummary's three ends
    status: Any = read.text(row["status"]) or ""
    reason, failure_kind = read.text(row["reason"]), read.text(row["failure_kind"])
    summary = RunSummary(
        status=status, reason=reason, failure_kind=failure_kind,  # type: ignore[arg-type]  # kinds as stored
        findings=_findings(row["findings_json"]),
        # Columns an older schema wrote NULL in (skipped steps before schema 4) stay None: unknown, not 0.
        **{name: _SUMMARY_READERS[name](row[name]) for name in SUMMARY_COLUMNS},
        **_rank_peaks(read.text(row["rank_peaks_json"])),
    )
    record_kind = read.text(row["record_kind"]) or "run"
    trace = TraceRecord.from_json(read.text(row["trace_json"])) if record_kind == RECORD_KIND_TRACE else None
    if trace is not None:  # a record kept before it was counted by rank stored its files' count (cycles included)
        summary = replace(summary, world_size=trace.world_size)
    return RunRecord(
        id=row["id"],
        name=read.text(row["name"]) or "",
        note=read.text(row["note"]) or "",
        tags=_tags(row["tags_json"]),
        status=status,
        reason=reason,
        failure_kind=failure_kind,
        source=read.text(row["source"]) or "",
        started_at=_start_time(row["started_at"]),
        finished_at=read.unix_time(row["finished_at"]),
        config=config,
        summary=summary,
        device=_json_object(read.text(row["device_json"])),
        run_info=_json_object(read.text(row["run_info_json"])),
        heartbeat_at=read.unix_time(row["heartbeat_at"]),
        pid=read.integer(row["pid"]),
        hostname=read.text(row["hostname"]),
        process_identity=read.text(row["process_identity"]),
        app_version=read.text(row["app_version"]),
        config_dropped=dropped,
        sequence_id=read.integer(row["sequence_id"]),
        sequence_name=read.text(row["sequence_name"]),
        traceback=read.text(row["traceback"]),
        record_kind=record_kind,
        trace=trace,
    )


def _start_time(value: Any) -> float:
    start = read.unix_time(value)
    return math.nan if start is None else start  # unknown: the views show no time and no duration


# Each summary column read as its RunSummary field holds it (every summary field has a default).
_SUMMARY_TYPES = get_type_hints(RunSummary)
_SUMMARY_READERS = {item.name: read.field_reader(item, _SUMMARY_TYPES[item.name]) for item in fields(RunSummary)}


def _findings(text: Any) -> tuple[Finding, ...]:
    return tuple(finding for finding in map(_finding, read.json_list(text)) if finding is not None)


def _finding(item: Any) -> Optional[Finding]:
    """A stored finding; None where it is not one (its kind and headline are not text)."""
    if not isinstance(item, dict) or not isinstance(item.get("kind"), str) or not isinstance(item.get("headline"), str):
        return None
    text = item.get("text")
    value = item.get("value")
    return Finding.from_dict({
        **item,
        "text": text if isinstance(text, str) else item["headline"],
        "figure": read.number(item.get("figure")), "threshold": read.number(item.get("threshold")),
        "figure_name": item.get("figure_name") if isinstance(item.get("figure_name"), str) else None,
        "field": item.get("field") if isinstance(item.get("field"), str) else None,
        "value": value if value is None or isinstance(value, (str, int, float, bool)) else None,
    })


def config_from_json(text: Optional[str]) -> tuple[RunConfig, tuple[str, ...]]:
    """A stored RunConfig, tolerant of history: settings this version lacks are dropped (and named),
    settings it added take their defaults."""
    data = _json_object(text)
    dropped = [name for name in data if name not in FIELD_TYPES]
    known = {name: value for name, value in data.items() if name in FIELD_TYPES}
    try:
        return RunConfig.from_dict(known), tuple(dropped)
    except ConfigError:
        usable = {}
        for name, value in known.items():  # a setting whose type changed: keep the rest of the record
            try:
                RunConfig.from_dict({name: value})
            except ConfigError:
                dropped.append(name)
            else:
                usable[name] = value
        return RunConfig.from_dict(usable), tuple(dropped)


def _json_object(text: Optional[str]) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # nested past Python's limit: no object the workbench wrote
        return {}
    return value if isinstance(value, dict) else {}


def records_noun(records: Sequence["RunRecord"]) -> str:
    """The plural for these records: "runs", "traces", or "records" where they are both."""
    nouns = {record.noun for record in records}
    return f"{nouns.pop()}s" if len(nouns) == 1 else "records"


def records_count_text(records: Sequence["RunRecord"]) -> str:
    """How many records of each kind, in words: "8 runs", "3 traces", "1 run and 7 traces" (none: "0 runs")."""
    traces = sum(1 for record in records if record.is_trace)
    runs = len(records) - traces
    parts = [f"{count} {noun}{'s' if count != 1 else ''}" for count, noun in ((runs, "run"), (traces, "trace"))
             if count or (noun == "run" and not traces)]
    return " and ".join(parts)
