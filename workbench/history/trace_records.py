"""A record of kind "trace": a torch.profiler trace opened in the window, kept in the runs table beside the runs.

It lists in the Runs tab, compares side by side and exports to CSV like a run. What it holds is the file (path, size,
sha256) and the figures per rank, the `workbench trace --json` keys as the latest analysis that opened it computed
them: the history keeps no copy of the trace. Its settings are its script's, unknown to the workbench, so a trace
record has none (config_json "{}"; the views show "–"), and a run's figures (images/sec, steps, loss) are not its
figures.

Opening the same file again (the same sha256) shows the record already kept, not a second one: a duplicate would
count twice in every comparison and export. The figures are a function of the file's bytes and of the analysis that
read them: where this workbench's analysis gives other figures than those kept (a newer workbench, a rule fixed, a
figure added), the record takes this analysis's figures and app_version, keeping its id, name, note, tags and path,
and the caller says so: the Runs tab, its comparisons and the CSV show no other figures than the Trace tab's for the
same bytes unsaid. No Qt, no torch.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field, replace
from typing import Any, Optional

RECORD_KIND_RUN = "run"
RECORD_KIND_TRACE = "trace"

# The per-rank figures a trace record keeps are the `workbench trace --json` entries (issue 27's contract; the
# controller stores trace_analysis.report_json.rank_json of each rank). These are the ones the CSV spreads out, in
# its order; gpu_span's three shares are kept nested, as --json has them.
RANK_FIGURE_KEYS: tuple[str, ...] = (
    "device", "steps", "step_seconds_median", "step_seconds_low", "step_seconds_high",
    "compute_share", "communication_share", "memory_share", "idle_share",
    "idle_for_data_share", "idle_for_host_share", "idle_kernel_wait_share", "idle_other_share",
    "dataloader_share",
)
GPU_SPAN_KEYS: tuple[str, ...] = ("idle_share", "compute_share", "non_compute_share")


@dataclass(frozen=True)
class TraceRecord:
    """What the history keeps of an opened trace (runs.trace_json)."""

    path: str  # as opened: a file, or a folder of rank files
    size_bytes: int  # the bytes hashed: the file's, or the rank files' together
    sha256: str  # of those bytes (a folder: of its rank files' names and digests, in name order)
    ranks: tuple[dict[str, Any], ...]  # one per rank: its --json entry, and "step_seconds" (each step's time)
    notes: tuple[str, ...] = ()  # what the reading could not read, in words
    files: tuple[str, ...] = field(default=())  # a folder's rank files that were hashed, by name

    @property
    def device(self) -> Optional[str]:
        """The ranks' devices, each once, in rank order ("NVIDIA A100-SXM4-80GB"); None when none is known."""
        devices = [str(rank.get("device")) for rank in self.ranks if rank.get("device") not in (None, "", "unknown")]
        return ", ".join(dict.fromkeys(devices)) or None

    @property
    def world_size(self) -> int:
        """The ranks it holds, each once (at least 1): a rank in several files (one process's profiling cycles, a
        file each) is one process, not one per file."""
        return max(1, len({repr(rank.get("rank")) for rank in self.ranks}))

    def to_json(self) -> str:
        return json.dumps({"path": self.path, "size_bytes": self.size_bytes, "sha256": self.sha256,
                           "ranks": list(self.ranks), "notes": list(self.notes), "files": list(self.files)},
                          sort_keys=True, allow_nan=False)

    @classmethod
    def from_json(cls, text: Optional[str]) -> Optional[TraceRecord]:
        """The stored record; None where the column is empty or cannot be read (its row still lists)."""
        try:
            data = json.loads(text) if text else None
        except (ValueError, RecursionError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("path"), str):
            return None
        ranks = data.get("ranks")
        size = data.get("size_bytes")
        return cls(
            path=data["path"],
            size_bytes=size if isinstance(size, int) else 0,
            sha256=str(data.get("sha256") or ""),
            ranks=tuple(rank for rank in ranks if isinstance(rank, dict)) if isinstance(ranks, list) else (),
            notes=tuple(str(note) for note in data.get("notes") or () if isinstance(note, str)),
            files=tuple(str(name) for name in data.get("files") or () if isinstance(name, str)),
        )

    def rank_values(self, key: str) -> tuple[Any, ...]:
        """One figure of every rank, in rank order; a gpu_span share by "gpu_span.<key>"."""
        if key.startswith("gpu_span."):
            inner = key.split(".", 1)[1]
            return tuple((rank.get("gpu_span") or {}).get(inner) if isinstance(rank.get("gpu_span"), dict) else None
                         for rank in self.ranks)
        return tuple(rank.get(key) for rank in self.ranks)


def insert_trace(conn: sqlite3.Connection, trace: TraceRecord, name: str, source: str, opened_at: float,
                 app_version: Optional[str]) -> int:
    """Insert the record (in the caller's transaction); its id."""
    cursor = conn.execute(
        "INSERT INTO runs (name, status, source, started_at, finished_at, app_version, config_json, device_name, "
        "world_size, record_kind, trace_json, trace_sha256) VALUES (?, 'finished', ?, ?, ?, ?, '{}', ?, ?, ?, ?, ?)",
        (name, source, opened_at, opened_at, app_version, trace.device, trace.world_size, RECORD_KIND_TRACE,
         trace.to_json(), trace.sha256),
    )
    assert cursor.lastrowid is not None  # set by every INSERT
    return cursor.lastrowid


def trace_record_id(conn: sqlite3.Connection, sha256: str) -> Optional[int]:
    """The oldest trace record of these bytes, if one is kept."""
    row = conn.execute("SELECT id FROM runs WHERE record_kind = ? AND trace_sha256 = ? ORDER BY id LIMIT 1",
                       (RECORD_KIND_TRACE, sha256)).fetchone()
    return int(row[0]) if row is not None else None


@dataclass(frozen=True)
class KeptBefore:
    """The record kept before of the same bytes, as an opening found it."""

    figures_replaced: bool  # its figures differed from this analysis's and were replaced by them
    app_version: Optional[str]  # the workbench whose analysis the record held (None: unknown)


def same_figures(kept: Optional[TraceRecord], trace: TraceRecord) -> bool:
    """Whether the record kept holds ``trace``'s figures, compared as stored (JSON's numbers and lists)."""
    stored = TraceRecord.from_json(trace.to_json())
    return kept is not None and stored is not None and (kept.ranks, kept.notes) == (stored.ranks, stored.notes)


def bring_up_to_date(conn: sqlite3.Connection, record_id: int, trace: TraceRecord,
                     app_version: Optional[str]) -> KeptBefore:
    """The record ``record_id`` of ``trace``'s bytes given ``trace``'s figures where its own differ (or cannot be
    read), in the caller's transaction: only its figures, device, ranks and app_version change."""
    row = conn.execute("SELECT trace_json, app_version FROM runs WHERE id = ?", (record_id,)).fetchone()
    kept = TraceRecord.from_json(row[0])
    if same_figures(kept, trace):
        return KeptBefore(False, row[1])
    if kept is not None:  # the path it was first opened from stays its path, as its name does
        trace = replace(trace, path=kept.path)
    conn.execute("UPDATE runs SET trace_json = ?, device_name = ?, world_size = ?, app_version = ? WHERE id = ?",
                 (trace.to_json(), trace.device, trace.world_size, app_version, record_id))
    return KeptBefore(True, row[1])
