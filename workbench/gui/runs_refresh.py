"""When the Runs tab reads the history: one read at a time, off the GUI thread, and a poll that notices writes.

The table follows the history as it changes (this app's runs, a CLI run in another process): a poll of the history's
run revision, and when anyone wrote, only the runs written since the table's revision are read
(HistoryStore.changes_since): during a run that is the running row, however long the history. Both reads run on
Qt's thread pool through connections of their own (runs_exports): on a large history or a hung disk (a network
home) the window keeps painting.

The revision is read on every schema this version reads: a history older than the run revision (schema 4) opened
read only has its upgraded copy's, made again when the file changes (database.run_revision). A poll that fails says
why once while it fails so (in the status line, as a read that fails), not on every tick, and not never; the status
line follows its latest message, and says it again SAY_AGAIN_AFTER_TICKS ticks after another message took the status
line while it still fails. It is written to failures.log in the workbench home (off the GUI thread: the disk may be
the one that hangs) once per kind of failure (exception class) whatever its messages (a byte offset, a time in them),
and that kind again only once it has not failed for LOG_AGAIN_AFTER_QUIET_TICKS ticks, whatever reads came between (a
flaky disk: fail, read, fail, read…); at most LOGGED_KINDS_AT_ONCE kinds while they keep failing.

At most one read is in flight. A refresh asked meanwhile is kept, one however many are asked, and starts when the
read lands, from the revision that read brought: results land in the order they were read, so no older one is
applied over a newer one, and a write after a read's snapshot is read by the next read.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, Optional

from PySide6.QtCore import QObject, QTimer

from workbench.gui.background import call_in_background
from workbench.gui.runs_exports import history_revision, runs_changed_since
from workbench.history.failure_log import log_problem
from workbench.history.records import RunChanges
from workbench.history.store import HistoryError

# Failing ticks, once another message took the status line, before the poll's failure is said again (10 s at the
# tab's 2 s poll: time to read the message that took its place).
SAY_AGAIN_AFTER_TICKS = 5
# Ticks a kind of failure (exception class) logged to failures.log must pass without failing before it is logged
# again (10 minutes at the tab's 2 s poll): a poll that fails and reads by turns, each read ending the status line's
# spell of failure, wrote a line every 4 s for as long as the disk flapped.
LOG_AGAIN_AFTER_QUIET_TICKS = 300
# Kinds of failure logged while they keep failing (none quiet that long yet): two errors taking turns are logged once
# each, and no more than this many lines however many kinds come.
LOGGED_KINDS_AT_ONCE = 3
POLL = "the Runs tab's poll of the history"  # failures.log's line: "… failed: REASON"


class RunsRefresh(QObject):
    """Reads the runs written since ``revision`` off the GUI thread; ``apply(changes, everything)`` or
    ``fail(error)`` back on it (``everything``: the first read, every run), while the parent lives.
    ``failure_shown()``: whether what ``fail`` said last is still shown (else a poll that still fails says it
    again)."""

    def __init__(self, history: Path, apply: Callable[[RunChanges, bool], None],
                 fail: Callable[[HistoryError], None], poll_ms: int, parent: QObject,
                 failure_shown: Callable[[], bool]):
        super().__init__(parent)
        self._history = history
        self._apply, self._fail, self._failure_shown = apply, fail, failure_shown
        self.revision: Optional[int] = None  # the history's revision the table shows; None: nothing read yet
        self._reading = False  # a read of the changes is in flight
        self._read_again = False  # a refresh was asked while it was
        self._then_next: list[Callable[[], None]] = []  # to call once the next read to start has landed
        self._polling = False  # a read of the revision is in flight
        self._poll_error: Optional[str] = None  # what the poll's latest failure said, while they go on
        self._ticks = 0  # polls landed, read or failed: the clock of LOG_AGAIN_AFTER_QUIET_TICKS
        self._logged_kinds: dict[type, int] = {}  # kind of failure logged → the tick it last failed on
        self._unshown_ticks = 0  # failing ticks since another message took the status line from the poll's
        self._poll = QTimer(self)
        self._poll.setInterval(poll_ms)
        self._poll.timeout.connect(self.poll)
        if poll_ms > 0:
            self._poll.start()

    @property
    def busy(self) -> bool:
        """A read is in flight or asked for (tests wait for this to end)."""
        return self._reading or self._read_again or self._polling

    def request(self, then: Optional[Callable[[], None]] = None) -> None:
        """Read what was written since the table's revision; ``then`` once a read that started after this call
        has landed (or failed): the table then shows every write made before it."""
        if then is not None:
            self._then_next.append(then)
        if self._reading:
            self._read_again = True  # started when the read in flight lands, from the revision it brings
            return
        self._start()

    def _start(self) -> None:
        self._reading, self._read_again = True, False
        then, self._then_next = self._then_next, []
        call_in_background(self, partial(runs_changed_since, self._history, self.revision),
                           partial(self._read, then), partial(self._read_failed, then))

    def _read(self, then: list[Callable[[], None]], changes: RunChanges) -> None:
        try:
            self._apply(changes, self.revision is None)
            self.revision = changes.revision
        finally:
            self._landed(then)

    def _read_failed(self, then: list[Callable[[], None]], error: Exception) -> None:
        try:
            if not isinstance(error, HistoryError):
                raise error  # a bug, not the disk: as loud as it was on the GUI thread
            self._fail(error)
        finally:
            self._landed(then)

    def _landed(self, then: list[Callable[[], None]]) -> None:
        self._reading = False
        for callback in then:
            callback()
        if self._read_again:
            self._start()

    def poll(self) -> None:
        """Read the revision (a cheap read: no checks, one row) and refresh if it moved on from the table's."""
        if self._reading or self._polling:
            return  # the read in flight brings a revision; the next poll compares with it
        self._polling = True
        call_in_background(self, partial(history_revision, self._history), self._revision_read,
                           self._revision_unread)

    def _revision_read(self, revision: int) -> None:
        self._polling = False
        self._ticks += 1
        failing_until_now, self._poll_error = self._poll_error is not None, None
        if (revision != self.revision or failing_until_now) and not self._reading:
            self.request()  # after failures, also where nothing was written: its read clears what they said

    def _revision_unread(self, error: Exception) -> None:
        self._polling = False
        self._ticks += 1
        if not isinstance(error, HistoryError):
            raise error
        # The history cannot be read just now (the file went away, a busy disk): the poll skips a beat. What is
        # wrong is said once while the poll fails so (a poll that failed on every tick, unsaid, left the table as it
        # was for good), then again only to follow its message while it is shown, or if another message took its
        # place and it still fails SAY_AGAIN_AFTER_TICKS ticks on (it was never seen again). Logged once per kind of
        # failure, not per message (one whose text changes on every tick was logged every 2 s), nor per spell (a
        # flaky disk that read between failures was logged every 4 s).
        failed_before, self._poll_error = self._poll_error, str(error)
        if self._log_due(type(error)):
            call_in_background(self, partial(log_problem, POLL, str(error), home=Path(self._history).parent),
                               _ignore, _ignore)  # log_problem never raises: nothing to report either way
        if failed_before is None:
            self._unshown_ticks = 0
            self._fail(error)
        elif self._failure_shown():
            self._unshown_ticks = 0
            if str(error) != failed_before:
                self._fail(error)  # the status line says what fails now
        else:
            self._unshown_ticks += 1
            if self._unshown_ticks >= SAY_AGAIN_AFTER_TICKS:
                self._unshown_ticks = 0
                self._fail(error)

    def _log_due(self, kind: type) -> bool:
        """Whether this failure of ``kind`` is to be logged (noting that it failed now): not while it was logged
        and has failed within LOG_AGAIN_AFTER_QUIET_TICKS ticks."""
        quiet = [logged for logged, tick in self._logged_kinds.items()
                 if self._ticks - tick > LOG_AGAIN_AFTER_QUIET_TICKS]
        for logged in quiet:
            del self._logged_kinds[logged]
        if kind in self._logged_kinds:
            self._logged_kinds[kind] = self._ticks
            return False
        if len(self._logged_kinds) >= LOGGED_KINDS_AT_ONCE:
            return False
        self._logged_kinds[kind] = self._ticks
        return True

    def stop(self) -> None:
        self._poll.stop()


def _ignore(_: object) -> None:
    pass
