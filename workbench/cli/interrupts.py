"""What a signal does to a headless run: Ctrl-C, SIGTERM and SIGHUP stop it at the next step (the run is
kept as stopped, its reason naming the signal; a second Ctrl-C aborts), SIGUSR1 asks for a profiler sample."""

from __future__ import annotations

import atexit
import os
import signal
import sys
from typing import Any, Callable, Optional

from workbench.cli.progress_line import ProgressLine
from workbench.engine.requests import THE_USER, StopRequest, stopped_by

# What a service manager (SIGTERM) or a closed terminal (SIGHUP) sends: a request to end, which a run answers as
# it answers Ctrl-C. Left to their default they would kill the process mid-step, with the run unrecorded.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def stop_then_interrupt(stop: StopRequest, progress: Optional[ProgressLine], abort_on_second: bool = True):
    """First signal: stop at the next step, named in the run's reason. A second Ctrl-C aborts (KeyboardInterrupt);
    a second SIGTERM or SIGHUP changes nothing (a closed terminal sends SIGHUP twice: once from the kernel, once
    from the shell). ``progress`` None: say nothing (a quiet torchrun rank)."""

    def handle(signum: int, frame: Any) -> None:
        ctrl_c = signum == signal.SIGINT
        if stop():
            if ctrl_c and abort_on_second:
                raise KeyboardInterrupt
            return
        by = THE_USER if ctrl_c else signal.Signals(signum).name
        stop.set(by)
        if progress is None:
            return
        progress.message("stopping at the next step (Ctrl-C again to abort)…" if ctrl_c
                         else f"{by}: stopping at the next step…")

    return handle


def take_stop_signals(stop: StopRequest, progress: Optional[ProgressLine],
                      abort_on_second: bool = True) -> Callable[[], None]:
    """From now on SIGINT, SIGTERM and SIGHUP set ``stop`` (see ``stop_then_interrupt``); returns the call that
    gives the previous handlers back."""
    handle = stop_then_interrupt(stop, progress, abort_on_second)
    # A signal the process was started with ignored stays ignored: `nohup workbench run …` outlives its terminal.
    taken = [signal.SIGINT, *(signum for signum in STOP_SIGNALS if signal.getsignal(signum) != signal.SIG_IGN)]
    previous = {signum: signal.signal(signum, handle) for signum in taken}

    def give_back() -> None:
        by_a_signal = stop() and stopped_by(stop) != THE_USER
        for signum, handler in previous.items():
            if by_a_signal and signum in STOP_SIGNALS and handler == signal.SIG_DFL:
                # The process is on its way out, as asked; a repeat (a second `kill`, a service manager's) now would
                # end it silently with 143 in the middle of exiting: it ends it saying so instead.
                signal.signal(signum, exit_saying_so)
                _LEAVING.add(signum)
            else:
                signal.signal(signum, handler)

    return give_back


# The stop signals given back as exit_saying_so. Python puts SIG_DFL back for every Python handler as it
# finalizes, before torch's libraries unload (seconds on a busy machine): the last exit handler ignores them.
_LEAVING: set[int] = set()


@atexit.register  # at import, before torch and multiprocessing register theirs: it runs after them
def _ignore_repeats_while_unloading() -> None:
    for signum in _LEAVING:
        if signal.getsignal(signum) is exit_saying_so:
            signal.signal(signum, signal.SIG_IGN)


def exit_saying_so(signum: int, frame: Any) -> None:
    """A stop signal again once the command has ended: one line, what is printed flushed, exit 128 + signal."""
    flush_output()
    try:
        os.write(2, f"workbench: {signal.Signals(signum).name} again while exiting: exiting now\n".encode())
    except OSError:
        pass
    os._exit(128 + signum)


def flush_output() -> None:
    """What the command printed, flushed before an os._exit (which skips Python's own flush)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or gone reader
            pass


def on_sample_request(requests: Any, progress: ProgressLine) -> Any:
    """SIGUSR1 (`kill -USR1 <pid>`) asks the run for a profiler sample; returns the previous handler."""
    if not hasattr(signal, "SIGUSR1"):
        return None

    def handle(signum: int, frame: Any) -> None:
        requests.request()
        progress.message("profile sample requested: taken at the next steps that fit")

    return signal.signal(signal.SIGUSR1, handle)
