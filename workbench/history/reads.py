"""Every read of the history, as HistoryStore offers them: runs as RunRecords, their metrics as arrays or rows.

A read that meets a damaged page or a file it cannot open raises the HistoryError that says which.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence, get_type_hints

from workbench.history import stored_values as read
from workbench.history.database import HistoryDatabase
from workbench.history.errors import RunNotFound, translated
from workbench.history.records import RunChanges, RunRecord, record_from_row
from workbench.history.schema import EPOCH_COLUMNS, PROFILE_SAMPLE_COLUMNS, PROFILE_SAMPLE_LISTS, STEP_COLUMNS

if TYPE_CHECKING:
    import numpy as np

    from workbench.engine.events import ProfileSample

# Every read of a run: its row, and the name of the sequence (sweep) it belongs to, if any.
RUNS_QUERY = ("SELECT runs.*, sequences.name AS sequence_name FROM runs "
              "LEFT JOIN sequences ON sequences.id = runs.sequence_id")


class HistoryReads:
    """The reads of HistoryStore, which gives them its database and path."""

    path: Path
    _database: HistoryDatabase

    def _records(self, sql: str, params: Sequence = ()) -> list[RunRecord]:
        with translated(self.path, "read"):
            return [record_from_row(row) for row in self._database.conn.execute(f"{RUNS_QUERY} {sql}", params)]

    def sequence_runs(self, sequence_id: int) -> list[RunRecord]:
        """The runs of one sequence, in the order they ran."""
        return self._records("WHERE runs.sequence_id = ? ORDER BY runs.id", (sequence_id,))

    def changes_since(self, revision: Optional[int]) -> RunChanges:
        """The runs added or written since ``revision`` (every run when None), read in one snapshot.

        Every write to a run stamps it with the history's next revision (triggers, schema 4), so a view that
        polls during a run re-reads the running row only, not the whole history. A revision past the history's
        (another file in its place; an older file's copy, made again: database._upgraded) reads every run."""
        with self._database.snapshot() as conn:
            current = int(conn.execute("SELECT value FROM run_revision").fetchone()[0])
            if revision is None or revision > current:
                rows = conn.execute(f"{RUNS_QUERY} ORDER BY runs.id DESC").fetchall()
            elif revision == current:
                rows = []  # nothing written, nothing deleted
            else:
                rows = conn.execute(f"{RUNS_QUERY} WHERE runs.revision > ? ORDER BY runs.id DESC", (revision,)).fetchall()
            run_ids = frozenset(row[0] for row in conn.execute("SELECT id FROM runs"))
            return RunChanges(current, tuple(record_from_row(row) for row in rows), run_ids)

    def list_runs(self) -> list[RunRecord]:
        """Every run, newest first."""
        return self._records("ORDER BY runs.id DESC")

    def get_run(self, run_id: int) -> RunRecord:
        records = self._records("WHERE runs.id = ?", (run_id,))
        if not records:
            raise RunNotFound(f"no run with id {run_id} in {self.path}")
        return records[0]

    def get_runs(self, run_ids: Optional[Sequence[int]] = None) -> list[RunRecord]:
        """The given runs (all when None), oldest first; unknown ids are refused all together."""
        if run_ids is None:
            return self._records("ORDER BY runs.id")
        wanted = sorted(set(int(run_id) for run_id in run_ids))
        records = {}
        for start in range(0, len(wanted), 500):  # stay under SQLite's bound-parameter limit
            chunk = wanted[start : start + 500]
            for record in self._records(f"WHERE runs.id IN ({','.join('?' * len(chunk))})", chunk):
                records[record.id] = record
        missing = [run_id for run_id in wanted if run_id not in records]
        if missing:
            listed = ", ".join(str(run_id) for run_id in missing)
            raise RunNotFound(f"no run with id{'s' if len(missing) > 1 else ''} {listed} in {self.path}")
        return [records[run_id] for run_id in wanted]

    # -- metrics ---------------------------------------------------------------------
    def step_metrics(self, run_id: int) -> dict[str, np.ndarray]:
        """The run's step windows as arrays: "step" plus every STEP_COLUMNS name; unknown values are NaN."""
        return self._arrays("step_metrics", "step", STEP_COLUMNS, run_id)

    def epoch_metrics(self, run_id: int) -> dict[str, np.ndarray]:
        """Per-epoch figures as arrays: "epoch" plus every EPOCH_COLUMNS name."""
        return self._arrays("epoch_metrics", "epoch", EPOCH_COLUMNS, run_id)

    def _arrays(self, table: str, key: str, columns: tuple[str, ...], run_id: int) -> dict[str, np.ndarray]:
        import numpy as np  # only views and exports need arrays; `workbench runs` stays quick

        with translated(self.path, "read"):
            rows = self._database.conn.execute(
                f"SELECT {key}, {', '.join(columns)} FROM {table} WHERE run_id = ? AND {_WHOLE_NUMBER.format(key)} "
                f"ORDER BY {key}", (run_id,)
            ).fetchall()
        arrays = {key: np.array([row[0] for row in rows], dtype=np.int64)}
        for index, name in enumerate(columns, start=1):
            arrays[name] = np.array([row[index] if _is_number(row[index]) else np.nan for row in rows],
                                    dtype=np.float64)
        return arrays

    def profile_samples(self, run_id: int) -> list[ProfileSample]:
        """The run's profiler samples, in step order, as the engine yielded them."""
        from workbench.engine.events import ProfileSample
        from workbench.engine.run_summary import NamedTime

        with translated(self.path, "read"):
            rows = self._database.conn.execute(
                f"SELECT first_step, {', '.join(PROFILE_SAMPLE_COLUMNS)}, "
                f"{', '.join(name + '_json' for name in PROFILE_SAMPLE_LISTS)} "
                "FROM profile_samples WHERE run_id = ? ORDER BY first_step",
                (run_id,),
            ).fetchall()
        samples = []
        hints = get_type_hints(ProfileSample)
        readers = {item.name: read.field_reader(item, hints[item.name]) for item in dataclasses.fields(ProfileSample)}
        for row in rows:
            try:  # each value as its field holds it: a sample a damaged row cannot give is left out
                values = {name: readers[name](row[name]) for name in ("first_step", *PROFILE_SAMPLE_COLUMNS)}
            except read.Unreadable:
                continue
            for name in PROFILE_SAMPLE_LISTS:
                values[name] = tuple(NamedTime(name=item["name"], seconds=float(item["seconds"]), count=item["count"])
                                     for item in read.json_list(row[name + "_json"]) if _is_named_time(item))
            samples.append(ProfileSample(**values))
        return samples

    def iter_step_rows(self, run_id: int) -> Iterator[sqlite3.Row]:
        """Raw step rows (step, then STEP_COLUMNS), in step order: for streaming exports."""
        return self._rows(f"SELECT step, {', '.join(STEP_COLUMNS)} FROM step_metrics WHERE run_id = ? AND "
                          f"{_WHOLE_NUMBER.format('step')} ORDER BY step", run_id)

    def iter_epoch_rows(self, run_id: int) -> Iterator[sqlite3.Row]:
        """Raw epoch rows (epoch, then EPOCH_COLUMNS), in epoch order."""
        return self._rows(
            f"SELECT epoch, {', '.join(EPOCH_COLUMNS)} FROM epoch_metrics WHERE run_id = ? AND "
            f"{_WHOLE_NUMBER.format('epoch')} AND {_WHOLE_NUMBER.format('step')} ORDER BY epoch", run_id)

    def _rows(self, sql: str, run_id: int) -> Iterator[sqlite3.Row]:
        with translated(self.path, "read"):  # a damaged page may be met part-way through
            # not `yield from`: it closes the cursor when the generator is closed, and an export that failed part-way
            # (a full disk) leaves its generator to be closed after the history is, where the cursor's close raised
            for row in self._database.conn.execute(sql, (run_id,)):
                yield row


# A step or epoch number stored as a whole number (SQL): a row a damaged file holds text or a blob in is left out.
_WHOLE_NUMBER = "typeof({}) = 'integer'"


def _is_number(value: Any) -> bool:
    return read.number(value) is not None


def _is_named_time(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("name"), str) and _is_number(item.get("seconds")) \
        and isinstance(item.get("count"), int)
