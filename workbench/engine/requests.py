"""Requests a GUI or CLI makes to a running engine from another thread (no torch, no Qt).

The stop flag is a plain callable; a profile sample on demand needs one more thing: the engine must
notice it without checking a flag every step. ``ProfileRequests.request()`` sets the flag and wakes the
engine's sampler, which lowers the step number its training loop compares against, so the loop's
only cost outside a sample stays one integer comparison per step.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Iterator, Optional

if TYPE_CHECKING:
    from workbench.config import RunConfig
    from workbench.engine.events import Event

# The stop flag a run polls (between steps, and while it waits on a long phase). One that has a ``by``
# attribute (StopRequest, JobRequests) names who asked, and the stopped run's reason says so.
StopFlag = Callable[[], bool]
# What runs a run: engine.run, or a fake of it in tests.
RunFunction = Callable[["RunConfig", StopFlag], Iterator["Event"]]


# Who stopped a run, unless its stop flag says otherwise.
THE_USER = "the user"


def never() -> bool:
    """The stop flag of a run nobody stops."""
    return False


def stopped_by(stop: StopFlag) -> str:
    """Who asked ``stop`` to stop: a signal's name ("SIGTERM") where a flag was set by one, else the user."""
    return getattr(stop, "by", None) or THE_USER


class StopRequest:
    """A stop flag that remembers who set it first: called, it says whether a stop was asked for."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self.by: Optional[str] = None

    def __call__(self) -> bool:
        return self._set.is_set()

    def set(self, by: str = THE_USER) -> None:
        """Ask for a stop (any thread, or a signal handler); a second request does not rename the first."""
        if not self._set.is_set():
            self.by = by
            self._set.set()


class ProfileRequests:
    """Thread-safe "take a profile sample now" requests; one pending request at most."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # the sampler schedules under it too, so no wake-up is lost
        self._pending = False
        self._wake: Optional[Callable[[], None]] = None

    def request(self) -> None:
        """Ask for a sample as soon as one fits (any thread). A sample already under way counts."""
        with self.lock:
            self._pending = True
            if self._wake is not None:
                self._wake()

    @property
    def pending(self) -> bool:
        return self._pending

    # -- the engine's side (called with ``lock`` held where it says so) ---------------------------------
    def attach(self, wake: Callable[[], None]) -> None:
        with self.lock:
            self._wake = wake
            if self._pending:
                wake()

    def detach(self) -> None:
        with self.lock:
            self._wake = None

    def clear(self) -> None:
        """The engine took a sample: the request is answered. Call with ``lock`` held."""
        self._pending = False


class JobRequests:
    """What another thread holds on a running job (a run, or a sequence of runs): a stop flag and
    "sample now" requests, together. Called, it is the stop flag, so it goes wherever ``stop`` goes
    (``engine.run``, every member of a sweep), and a caller that knows it can reach the requests too."""

    def __init__(self) -> None:
        self._stop = StopRequest()
        self.profile_requests = ProfileRequests()

    def __call__(self) -> bool:
        return self._stop()

    @property
    def by(self) -> Optional[str]:
        return self._stop.by

    def stop(self, by: str = THE_USER) -> None:
        """Ask the job to stop at its next check (any thread); ``by`` names who asked (a signal: "SIGTERM")."""
        self._stop.set(by)
