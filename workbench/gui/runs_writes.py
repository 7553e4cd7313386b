"""What the Runs tab writes to the history off the GUI thread: a run's name, note and tags, and deletes.

Any write can hang on a network home: each one here opens the history anew, for writing (as every `workbench`
command does: checked, runs whose process died marked "interrupted"), in the thread that calls it (a SQLite
connection belongs to the thread that opened it), and closes it. What the user typed is checked on the GUI thread
before (tags holding the CSV's separator: clean_tags), as that touches no file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from workbench.history.store import HistoryError, HistoryStore


def opened_for_writing(history: Path) -> HistoryStore:
    """The history whose database file is ``history`` (a HistoryStore's ``path``), opened here for writing."""
    return HistoryStore.open(Path(history).parent)


def rename_run(history: Path, run_id: int, name: str) -> None:
    """Raises HistoryError."""
    with opened_for_writing(history) as store:
        store.rename(run_id, name)


def set_run_note(history: Path, run_id: int, note: str) -> None:
    """Raises HistoryError."""
    with opened_for_writing(history) as store:
        store.set_note(run_id, note)


def set_run_tags(history: Path, run_id: int, tags: Sequence[str]) -> None:
    """``tags``: already cleaned (clean_tags), so no ValueError. Raises HistoryError."""
    with opened_for_writing(history) as store:
        store.set_tags(run_id, tags)


def delete_runs(history: Path, run_ids: Sequence[int]) -> list[str]:
    """Delete each run that may be (one still running is not); why each other one was not, in words. Raises
    HistoryError when the history cannot be opened."""
    refused = []
    with opened_for_writing(history) as store:
        for run_id in run_ids:
            try:
                store.delete(run_id)
            except HistoryError as error:
                refused.append(str(error))
    return refused
