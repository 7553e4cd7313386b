"""Where a sequence's runs are recorded: one factory, so the CLI and the GUI record them the same way.

A sequence asks its factory once for a sequence id (``begin_sequence``) and then for one recorder per
member (``start_run``); each recorder takes that member's engine events in order. ``NoRecording``
keeps nothing (``--no-history``, tests). ``HistoryRecording`` writes to the run history; it opens
its store on first use, in the thread that uses it (a SQLite connection belongs to one thread), so
a GUI can hand one to the training thread that iterates the sequence.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol

from workbench.config import RunConfig

if TYPE_CHECKING:
    from workbench.engine.events import Event
    from workbench.history.store import HistoryStore


class Recorder(Protocol):
    run_id: int
    discarded: bool

    def record(self, event: Event) -> None: ...

    def fail(self, reason: str, kind: str = "error") -> None: ...


class RecorderFactory(Protocol):
    def begin_sequence(self, kind: str, name: str, plan: dict[str, Any]) -> Optional[int]:
        """The new sequence's id (None when nothing is recorded)."""

    def start_run(self, config: RunConfig, name: str, sweep_id: Optional[int]) -> Optional[Recorder]:
        """A recorder for one member run (None when nothing is recorded)."""


class NoRecording:
    """Records nothing: every id is None."""

    def begin_sequence(self, kind: str, name: str, plan: dict[str, Any]) -> Optional[int]:
        return None

    def start_run(self, config: RunConfig, name: str, sweep_id: Optional[int]) -> Optional[Recorder]:
        return None

    def close(self) -> None:
        pass

    def __enter__(self) -> NoRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class HistoryRecording:
    """Records every member in the run history, tagged with its sequence."""

    def __init__(self, source: str = "cli", home: Optional[Path] = None):
        self.source = source
        self.home = home
        self._store: Optional[HistoryStore] = None

    @property
    def store(self) -> HistoryStore:
        if self._store is None:
            from workbench.history.store import HistoryStore

            self._store = HistoryStore.open(self.home)
        return self._store

    def begin_sequence(self, kind: str, name: str, plan: dict[str, Any]) -> Optional[int]:
        return self.store.create_sweep(kind, name, plan)

    def start_run(self, config: RunConfig, name: str, sweep_id: Optional[int]) -> Optional[Recorder]:
        return self.store.start_run(config, name=name, source=self.source, sweep_id=sweep_id)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> HistoryRecording:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
