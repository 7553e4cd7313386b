"""A DataLoader worker lives no longer than the run that started it, and leaves stopping to the run.

Signals: a terminal sends SIGINT (Ctrl-C) and SIGHUP (it closed) to its whole process group, and a service
manager may send SIGTERM to every process of the service. The run's own process decides what they mean (stop at
the next step, recorded); a worker that died of one would fail the run instead. So workers ignore them, as
Python's resource tracker does: a worker ends when the run shuts it down, or when the run is gone. Workers start
with these signals blocked (interruptible.py), so none arrives before ``worker_init`` ignores it.

The run gone: torch's own watchdog in a worker watches ``getppid()``. Under fork and spawn that is the run, but a
forkserver worker's parent is the forkserver, which lives as long as any worker holds its "alive" pipe, and each
worker holds a copy: after a SIGKILL of the run, workers and server kept each other alive (forever, ~1.1 GB).
So each worker watches the run's process itself, with a pidfd where Linux has one (no pid reuse, no polling),
and exits when it ends; the forkserver and the resource tracker then see their last client go and exit too.

Shutting them down (``shut_down_workers``): where one was killed, the others are killed too, and nothing they
share is touched, since the dead one may hold a lock of it for good.

Not PR_SET_PDEATHSIG: it fires when the *thread* that forked the child ends, and the run starts its workers on
short-lived helper threads (interruptible.py), so it would kill them mid-run.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import threading
import time
from typing import Any, Callable, Iterator

# The signals a run answers by stopping, which its workers leave to it.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
POLL_SECONDS = 0.5  # where there is no pidfd: how often a worker looks for its run


def block_stop_signals() -> None:
    """In a thread that may start workers (or the forkserver): they inherit the mask, so the signals stay away
    until ``worker_init`` ignores them (a forkserver, which never does, just never receives them)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))


@contextlib.contextmanager
def stop_signals_unblocked() -> Iterator[None]:
    """The stop signals unblocked in this thread while the user's own code runs (their model's module and
    function), then the thread's mask as it was: a process their code starts inherits the mask, and with these
    blocked it would ignore ``kill``, Ctrl-C and a closed terminal, orphaned once the run ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_UNBLOCK, set(STOP_SIGNALS))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def worker_init_for_this_run() -> Callable[[int], None]:
    """The DataLoader ``worker_init_fn`` for workers of the run in this process (picklable: spawn, forkserver)."""
    return functools.partial(worker_init, os.getpid())


def worker_init(run_pid: int, _worker_id: int) -> None:
    """In each worker, first thing: ignore the stop signals, and exit when the run's process ends."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if os.name == "posix":  # (Windows has spawn only, whose workers torch's watchdog ties to the run already)
        threading.Thread(target=_exit_with, args=(run_pid,), name="workbench-run-watch", daemon=True).start()


def _exit_with(run_pid: int) -> None:
    """Block until ``run_pid`` ends, then end this process at once (nothing here is worth finishing)."""
    try:
        watched = os.pidfd_open(run_pid)  # Linux ≥ 5.3
    except ProcessLookupError:
        os._exit(1)  # gone already
    except (AttributeError, OSError):  # no pidfd here (macOS, old kernels, seccomp): look now and then
        while _alive(run_pid):
            time.sleep(POLL_SECONDS)
        os._exit(1)
    select.select([watched], [], [])  # readable once the process has ended
    os._exit(1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process took the number: ours is gone
        return False
    return True


# How long the other workers of a dead one get to go once killed (SIGKILL: they go), and the pin-memory thread.
KILLED_JOIN_SECONDS = 5.0


def shut_down_workers(iterator: Any) -> None:
    """Shut a DataLoader iterator's workers down now (persistent ones too), instead of at garbage collection.

    Torch's own shutdown first sets the workers' shared "done" event, whose lock each worker takes for an instant
    whenever it looks at it. A worker killed in that instant (by the out-of-memory killer, a kill -9) leaves it
    held for good, and the run hung there, its stop unheard (the GUI soak test, once in a CI run on the 2-core
    VM). So where a worker has died, nothing the workers share is touched: the others are killed (they ignore
    SIGTERM), joined, the queues closed, and the iterator marked shut down, so that torch's shutdown never runs,
    at garbage collection either."""
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is None or getattr(iterator, "_shutdown", True):
        return
    workers = list(getattr(iterator, "_workers", ()))
    expected = list(getattr(iterator, "_workers_status", [True] * len(workers)))
    if not any(alive and not worker.is_alive() for worker, alive in zip(workers, expected)):
        shutdown()
        return
    iterator._shutdown = True
    for worker in workers:
        if worker.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGKILL)
    for worker in workers:
        worker.join(KILLED_JOIN_SECONDS)
    pin_thread = getattr(iterator, "_pin_memory_thread", None)
    if pin_thread is not None:  # its done event is a thread's (no worker holds it)
        iterator._pin_memory_thread_done_event.set()
        pin_thread.join(KILLED_JOIN_SECONDS)
    queues = list(getattr(iterator, "_index_queues", ()))
    if pin_thread is None or not pin_thread.is_alive():  # a queue is closed under no thread that reads it
        queues.append(getattr(iterator, "_worker_result_queue", None))
    for queue in queues:
        if queue is not None:
            queue.cancel_join_thread()
            queue.close()
    # The SIGCHLD handler's watch list (runs on the main thread), which torch's shutdown would have emptied: its
    # private function, as torch's own shutdown calls it.
    if getattr(iterator, "_worker_pids_set", False):
        from torch.utils.data._utils import signal_handling

        signal_handling._remove_worker_pids(id(iterator))
        iterator._worker_pids_set = False
