"""Phases that cannot be interrupted in their own thread run on a helper thread the run polls.

Loading data (a CIFAR download), building the session, starting DataLoader workers (the first
batch of an epoch: spawned workers import torch) and torch.compile's first step can each take
many seconds inside one call that never looks at the stop flag. ``call_interruptibly`` runs such a
call on a daemon thread and polls ``stop()`` every ``POLL_SECONDS``; on a stop it raises
``Stopped`` at once and the call is *abandoned*: it runs on to its end in the background, and
then ``on_abandoned`` gets its result (or None after an error) to release what it made — so
workers it started are shut down and memory it holds is freed when it finishes. Until then it shares the device
(or the CPU's cores) with whatever runs next: a run waits for it first (``wait_for_abandoned``, trainer.run).

A call that only other processes can end (joining a multi-process run's group: it waits for the others,
up to torch's 30-minute timeout) is marked so: nothing waits for it once abandoned, and the command's exit
ends the process without waiting for it (cli/program_exit.py).

Helper threads block the stop signals (SIGINT, SIGTERM, SIGHUP), so processes they start (DataLoader
workers, the forkserver) begin life with them blocked: a Ctrl-C or hang-up sent to the terminal's process
group cannot kill a worker before its init function ignores the signal (see worker_lifetime.py).
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional, TypeVar

from workbench.engine.requests import never
from workbench.engine.worker_lifetime import block_stop_signals

T = TypeVar("T")

POLL_SECONDS = 0.05  # stop latency added by polling; far below the 2 s a stop may take
THREAD_PREFIX = "workbench-"  # a helper thread's name: this, then the phase's

_abandoned_lock = threading.Lock()
_abandoned: set[threading.Thread] = set()
_abandoned_to_others: set[threading.Thread] = set()  # calls only other processes end: never waited for


class Stopped(Exception):
    """stop() became true while a phase ran on a helper thread (the phase was abandoned)."""


class StillRunning(Exception):
    """A wait with ``patience`` ran out of it; the call goes on (wait again to go on waiting)."""


def call_interruptibly(
    function: Callable[[], T],
    stop: Callable[[], bool],
    name: str,
    on_abandoned: Optional[Callable[[Optional[T]], None]] = None,
) -> T:
    """``function()``'s result (or its exception) — unless ``stop()`` turns true first: then ``Stopped``."""
    return HelperCall(function, name, on_abandoned).wait(stop)


class HelperCall:
    """One call on a helper thread; ``abandoned`` tells whether the caller stopped waiting for it.

    Waiting ends early on a stop (``Stopped``) or on any exception raised in the waiting thread (a
    second Ctrl-C's KeyboardInterrupt); either way the call is abandoned and ``on_abandoned`` will
    release what it made.
    """

    def __init__(self, function: Callable[[], T], name: str,
                 on_abandoned: Optional[Callable[[Optional[T]], None]] = None, ended_by_others: bool = False):
        """``ended_by_others``: only other processes end the call (see the module's docstring)."""
        self.name = name
        self.abandoned = False
        self.ended_by_others = ended_by_others
        self._call = _Call(function, on_abandoned)
        self._thread: Optional[threading.Thread] = None

    def wait(self, stop: Callable[[], bool], patience: Optional[float] = None):
        """With ``patience``, ``StillRunning`` once that many seconds have passed (the call goes on)."""
        call = self._call
        if self._thread is None:
            if stop():
                raise Stopped(self.name)
            self._thread = threading.Thread(target=call.work, name=THREAD_PREFIX + self.name, daemon=True)
            self._thread.start()
        deadline = None if patience is None else time.monotonic() + patience
        try:
            while not call.done.wait(POLL_SECONDS):
                if stop() and self.abandon():
                    raise Stopped(self.name)
                if deadline is not None and time.monotonic() >= deadline:
                    raise StillRunning(self.name)
        except (Stopped, StillRunning):
            raise
        except BaseException:
            self.abandon()
            raise
        return call.outcome()

    def abandon(self) -> bool:
        """Stop waiting for the call (a caller that gives up between waits); False when it had finished."""
        if self._thread is None or not self._call.abandon():
            return False
        self.abandoned = True
        with _abandoned_lock:
            (_abandoned_to_others if self.ended_by_others else _abandoned).add(self._thread)
        return True


def wait_for_abandoned(timeout: Optional[float] = None, stop: Callable[[], bool] = never) -> bool:
    """Join the helper threads of abandoned phases: True once none is left running; False as soon as ``timeout``
    seconds have passed or ``stop()`` is true (within ``POLL_SECONDS``), however long a phase goes on.
    Calls only other processes end are not waited for (they would take torch's 30-minute timeout)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _abandoned_lock:
            _abandoned.difference_update([thread for thread in _abandoned if not thread.is_alive()])
            running = next(iter(_abandoned), None)
        if running is None:
            return True
        if stop() or (deadline is not None and time.monotonic() >= deadline):
            return False
        running.join(POLL_SECONDS if deadline is None else min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def abandoned_phases(ended_by_others: bool = False) -> list[str]:
    """The names of the abandoned phases still running ("worker start-up"), sorted; with ``ended_by_others``,
    those only other processes end (a join whose other processes never came)."""
    with _abandoned_lock:
        threads = _abandoned_to_others if ended_by_others else _abandoned
        return sorted(thread.name.removeprefix(THREAD_PREFIX) for thread in threads if thread.is_alive())


class _Call:
    def __init__(self, function: Callable, on_abandoned: Optional[Callable]):
        self._function: Optional[Callable] = function
        self._on_abandoned = on_abandoned
        self._lock = threading.Lock()
        self._abandoned = False
        self._result = None
        self._error: Optional[BaseException] = None
        self.done = threading.Event()

    def work(self) -> None:
        block_stop_signals()
        result, error = None, None
        function, self._function = self._function, None
        try:
            assert function is not None, "a call works once"
            result = function()
        except BaseException as raised:  # handed to the caller's thread, raised there
            error = raised
        function = None
        with self._lock:  # done and the outcome change together: abandon() sees both or neither
            abandoned = self._abandoned
            if not abandoned:
                self._result, self._error = result, error
            self.done.set()
        if abandoned:
            error = None  # nobody will read it; its traceback holds the phase's frames
            if self._on_abandoned is not None:
                try:
                    self._on_abandoned(result)
                except Exception:
                    pass  # the run has ended; there is no one to tell
            self._on_abandoned = None

    def abandon(self) -> bool:
        """Mark the call abandoned; False when it had finished already (its outcome is then used)."""
        with self._lock:
            if self.done.is_set():
                return False
            self._abandoned = True
            return True

    def outcome(self):
        result, error = self._result, self._error
        self._result = self._error = None
        if error is not None:
            try:
                raise error
            finally:
                error = None  # no cycle through this frame: the traceback's frames must die with the error
        return result
