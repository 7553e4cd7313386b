"""A long session in one GUI process: 30 real runs alternating the data paths and the workers, with stops and
failures in between, leave no tensors, modules, threads, file descriptors, processes or memory behind, and every run is in the
history with the status it ended with. None hangs: the default worker start method (forkserver) is what makes
that safe, since fork() from this process would copy Qt's thread, the training thread, the pin-memory thread and
CUDA's, and a lock one of them holds stays locked in the child (pytorch#15808, pytorch#130610).

The window is driven only through its form, its Start and Stop buttons and its signals (real_runs.py), with
the history and the Runs tab attached as `python -m workbench` attaches them.
"""

from __future__ import annotations

import ctypes
import gc
import statistics
import multiprocessing
import os
import signal
import threading
from pathlib import Path

import pytest
from builders import TINY_RUN
from real_runs import real_engine_window, run_to_end

from workbench.config import DEFAULT_START_METHOD
from workbench.gui.runs_view import RunsView

RUNS = 30
WARM_UP_RUNS = 4  # one of each path: torch's thread pools, the forkserver and Qt's caches exist afterwards
# What differs between the runs: the per-sample torchvision path in worker processes, the whole set on the device
# with batched augmentation, and the batched path in this process, without and with workers.
PATHS = (
    {"pipeline": "dataloader", "augment": "cpu", "num_workers": 2},
    {"pipeline": "gpu-resident", "augment": "gpu", "num_workers": 0},
    {"pipeline": "dataloader", "augment": "gpu", "num_workers": 0},
    {"pipeline": "dataloader", "augment": "gpu", "num_workers": 2},
)
STOPPED = {5, 12, 19, 26}  # Stop pressed once the first steps are drawn
FAILED = {8, 23}  # a DataLoader worker is killed (as the out-of-memory killer would): the run fails, the app goes on
# Resources are compared between two windows of one run per path each (a path's workers, pipes and buffers
# differ): right after the warm-up, and the last runs.
WINDOW = len(PATHS)
# What a run builds and must let go, counted exactly: live torch tensors and modules (gc's view). Each run builds
# small-cnn (its parameters, gradients and momentum: some 30 tensors and 8 modules) and its images afresh, so a run
# that kept them would add that much per run, 20 runs between the windows; measured flat (8 tensors, 0 modules).
TENSOR_SLACK = 8
MODULE_SLACK = 1
# Resident memory (after malloc_trim hands free heap back) may grow this much between the windows' medians: the
# gross check, for buffers outside torch. Run alone it grew +20 to +43 MiB; once, with the whole slow tier run
# before it in the same process, +96 MiB (climbing some 8 MiB a run late in the test while the live tensors and
# modules stayed flat): the allocator's and torch's caches, not the runs' data, which the counts above hold to.
RSS_GROWTH_BOUND = 160 * 2**20
# Qt's thread pool keeps a background call's idle thread for 30 s: one or two may come and go. A thread per
# run left behind would show as +20.
THREAD_SLACK = 2
# Descriptors come and go with the runs' ends: a worker's pipes still closing, the history's WAL and shared-memory
# files (measured 26–31 across one run of this test, with no trend). A descriptor per run left behind would
# show as +20.
FD_SLACK = 3


def process_resources() -> dict[str, int]:
    """This process's live torch tensors and modules, OS threads, Python threads, open file descriptors, descendant
    processes and resident memory (Linux)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # it ended while we looked
            children.setdefault(ppid, []).append(int(entry.name))
    descendants, frontier = 0, [os.getpid()]
    while frontier:
        kids = children.get(frontier.pop(), [])
        descendants += len(kids)
        frontier.extend(kids)
    _trim_heap()
    status = Path("/proc/self/status").read_text()
    rss_kib = int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])
    import torch  # loaded by the runs already

    live = gc.get_objects()
    return {
        "tensors": sum(1 for item in live if isinstance(item, torch.Tensor)),
        "modules": sum(1 for item in live if isinstance(item, torch.nn.Module)),
        "threads": len(os.listdir("/proc/self/task")),
        "python_threads": threading.active_count(),
        "fds": len(os.listdir("/proc/self/fd")),
        "descendants": descendants,
        "rss": rss_kib * 1024,
    }


def kill_a_worker() -> None:
    workers = multiprocessing.active_children()  # the run's DataLoader workers (from the forkserver)
    assert workers, "the run has no worker processes to kill"
    os.kill(workers[0].pid, signal.SIGKILL)


def _trim_heap() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: RSS keeps the allocator's free pages, the bound still holds
        pass


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_thirty_runs_with_stops_and_failures_leave_nothing_behind(qtbot, make_window, isolated_workbench_home):
    from workbench.history.store import HistoryStore

    store = HistoryStore.open()
    from workbench.experiments.recording import HistoryRecording

    # Each run records through its own connection to the same history, on the training thread (as main() does).
    window = real_engine_window(qtbot, make_window, recordings=lambda: HistoryRecording(source="gui"))
    window.set_runs_view(RunsView(store))
    base = TINY_RUN.replace(device="auto", synthetic_size=512, max_steps=6, log_every=2, pin_memory=True,
                            persistent_workers=True)
    assert base.worker_start_method == DEFAULT_START_METHOD == "forkserver"
    expected, seen = [], []
    try:
        for number in range(RUNS):
            config = base.replace(seed=number, **PATHS[number % len(PATHS)])
            then = None
            if number in STOPPED | FAILED:
                config = config.replace(max_steps=None, epochs=50)  # still training when Stop or the kill lands
                then = window.stop_button.click if number in STOPPED else kill_a_worker
            ended = run_to_end(qtbot, window, config, after_first_steps=then)
            want = "stopped" if number in STOPPED else "failed" if number in FAILED else "finished"
            assert ended.status == want, (number, config, ended.reason)
            if number in FAILED:
                assert ended.kind == "data_loader", ended.reason
            else:
                assert multiprocessing.active_children() == []  # the run's workers are gone when it ends
            expected.append(want)
            gc.collect()
            if number >= WARM_UP_RUNS - 1:
                # Worker processes exit a moment after the run's end: wait for them, then measure.
                if seen:
                    qtbot.waitUntil(lambda: process_resources()["descendants"] <= seen[0]["descendants"],
                                    timeout=10_000)
                seen.append(process_resources())
        runs = sorted(store.list_runs(), key=lambda run: run.id)
        assert [run.status for run in runs] == expected
        assert all(run.source == "gui" and run.summary.steps > 0 for run in runs)
        failed = [run for run in runs if run.status == "failed"]
        assert len(failed) == len(FAILED) and all(run.failure_kind == "data_loader" and run.reason for run in failed)
    finally:
        store.close()

    print("resources after the warm-up and after every run:", *seen, sep="\n")
    first, last = seen[:WINDOW], seen[-WINDOW:]

    def most(window: list[dict[str, int]], name: str) -> int:
        return max(sample[name] for sample in window)

    assert most(last, "fds") <= most(first, "fds") + FD_SLACK, seen
    assert most(last, "descendants") <= most(first, "descendants"), seen  # the forkserver and resource tracker
    assert most(last, "threads") <= most(first, "threads") + THREAD_SLACK, seen
    # Python's view too: idle executor threads and Qt pool threads that ran Python come and go between samples (one
    # end saw MainThread, two ThreadPoolExecutor workers and a Dummy), so the windows are compared, not a fixed count.
    assert most(last, "python_threads") <= most(first, "python_threads") + THREAD_SLACK, (
        seen, [thread.name for thread in threading.enumerate()])
    assert most(last, "tensors") <= most(first, "tensors") + TENSOR_SLACK, [sample["tensors"] for sample in seen]
    assert most(last, "modules") <= most(first, "modules") + MODULE_SLACK, [sample["modules"] for sample in seen]
    growth = statistics.median(s["rss"] for s in last) - statistics.median(s["rss"] for s in first)
    assert growth <= RSS_GROWTH_BOUND, [sample["rss"] // 2**20 for sample in seen]
