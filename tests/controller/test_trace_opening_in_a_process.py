"""The window's opening of a single trace file, or of a folder of files too small for the pool, reads it in a process
of its own (trace_analysis/rank_pool.py), so that the reader's long sorts never hold the window's GIL: the same
report and record as read in the window's process, its progress and phases brought back from that process, and
Cancel killing it. Each test starts one or two readers (a quarter of a second each)."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from process_tree import descendants, leftovers

from workbench.controller.trace_opening import ANALYSING, READING, TraceOpening, TraceProgress, read_with_findings
from workbench.history.store import HistoryStore
from workbench.trace_analysis import rank_pool
from workbench.trace_analysis.model import TraceCancelled, TraceError

REPO = Path(__file__).resolve().parents[2]
H100_LAUNCH_GRAPHS = REPO / "tests" / "trace_analysis" / "data" / "h100" / "h100-launch-graphs.pt.trace.json.gz"
WAIT_S = 120.0  # a reader starts within a second alone; the most loaded machine is given this long


@pytest.fixture
def started(monkeypatch) -> list[subprocess.Popen[bytes]]:
    """The readers' processes, as rank_pool starts them, for files of any size (16 MB of text take a while)."""
    monkeypatch.setattr(rank_pool, "IN_WORKER_MIN_BYTES", 0)
    processes: list[subprocess.Popen[bytes]] = []
    real_start = rank_pool._start

    def start(*args):
        processes.append(real_start(*args))
        return processes[-1]

    monkeypatch.setattr(rank_pool, "_start", start)
    return processes


@pytest.fixture
def trace(tmp_path) -> Path:
    """A real trace as plain text, 1.3 MB: more than the reader's first chunk (1 MB), so its first progress is part
    of the file (gzip reads its 78 KB at once)."""
    path = tmp_path / "rank0.pt.trace.json"
    with gzip.open(H100_LAUNCH_GRAPHS) as packed, open(path, "wb") as plain:
        shutil.copyfileobj(packed, plain)
    return path


def test_a_single_file_opened_in_the_window_is_read_in_a_process_of_its_own(trace, tmp_path, started):
    """The same report, and the sha256 of the bytes read, as the file read in the window's own process; the reader
    ended once the file is read."""
    before = descendants()
    opened = TraceOpening(trace, tmp_path / "home").run()
    assert len(started) == 1 and started[0].pid != os.getpid()
    assert started[0].returncode == 0 and leftovers(before) == {}
    in_this_process = TraceOpening(trace, None, read=read_with_findings).run()
    assert len(started) == 1  # the CLI's reader and a caller's own stay in their process
    assert opened.report == in_this_process.report and opened.report.ranks[0].steps > 0
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        kept = store.get_run(opened.record_id).trace
    assert (kept.sha256, kept.size_bytes) == (hashlib.sha256(trace.read_bytes()).hexdigest(), trace.stat().st_size)


@pytest.fixture
def small_files(trace, tmp_path, monkeypatch) -> Path:
    """A folder of a file that is not a trace and two rank files, each under the size that gets a process of its own,
    all three together over it (as a folder of 40 files of 3 MB, gzipped or not, is to 16 MB); the pool's
    processes not worth starting for them (as for a folder of gzipped files of a few MB in all, or on one CPU)."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    (folder / "rank-0.json").write_text("this is not JSON")
    for rank in (1, 2):
        shutil.copy(trace, folder / f"rank-{rank}.pt.trace.json")
    sizes = [file.stat().st_size for file in folder.iterdir()]
    monkeypatch.setattr(rank_pool, "IN_WORKER_MIN_BYTES", sum(sizes))
    assert max(sizes) < rank_pool.IN_WORKER_MIN_BYTES and rank_pool.workers_for(sizes, [False] * 3) == 1
    return folder


def test_a_folder_of_small_files_is_read_in_one_process_of_its_own_where_together_they_are_large(
        small_files, tmp_path, started):
    """Its files, each too small to get a process, held the window's GIL for the whole read; now one process reads
    them all: the same report, notes (the file that is not a trace left out in its one line) and folder digest as
    read in the window's process."""
    before = descendants()
    opened = TraceOpening(small_files, tmp_path / "home").run()
    assert len(started) == 1 and started[0].returncode == 0 and leftovers(before) == {}
    in_this_process = TraceOpening(small_files, tmp_path / "home-2", read=read_with_findings).run()
    assert len(started) == 1  # the CLI's reader stays in its process
    assert opened.report == in_this_process.report and [r.rank for r in opened.report.ranks] == [1, 2]
    assert any(note.startswith(f"left out: {small_files / 'rank-0.json'}: ") for note in opened.report.notes)
    kept = []
    for home, record_id in ((tmp_path / "home", opened.record_id), (tmp_path / "home-2", in_this_process.record_id)):
        with HistoryStore.open_for_reading(home) as store:
            kept.append(store.get_run(record_id).trace)
    assert (kept[0].sha256, kept[0].size_bytes, kept[0].files) == (kept[1].sha256, kept[1].size_bytes, kept[1].files)


def test_the_files_a_read_takes_are_weighed_together_gzipped_ones_by_their_text():
    mb = 1024**2
    assert not rank_pool.worth_a_process([3 * mb] * 5, [False] * 5)  # 15 MB: the window's process holds it briefly
    assert rank_pool.worth_a_process([3 * mb] * 40, [False] * 40)
    assert rank_pool.worth_a_process([750 * 1024] * 8, [True] * 8)  # 8 ranks of 10 MB of JSON, gzipped: 6 MB


def test_a_file_that_is_not_a_trace_gets_the_one_line_it_gets_in_the_windows_process(tmp_path, started):
    bad = tmp_path / "not-a-trace.json"
    bad.write_text("this is not JSON")
    refusals = []
    for read in (None, read_with_findings):
        with pytest.raises(TraceError) as raised:
            TraceOpening(bad, None, **({"read": read} if read else {})).run()
        refusals.append(str(raised.value))
    assert len(started) == 1 and started[0].returncode == 0
    assert refusals[0] == refusals[1] and refusals[0].startswith(f"{bad}: ") and "\n" not in refusals[0]


def test_a_small_file_is_read_in_the_windows_process_where_a_process_would_cost_more(trace, tmp_path, monkeypatch):
    """A process takes a quarter to half a second to start; a file of a few MB holds the GIL for milliseconds."""
    def no_process(*args):
        raise AssertionError("a reader process was started for a small file")

    monkeypatch.setattr(rank_pool, "_start", no_process)
    assert TraceOpening(trace, tmp_path / "home").run().report.ranks[0].steps > 0


# The real rank_worker, its reader held after the first chunk of its last file (HELD) until the test has seen that
# progress, and held in that file's analysis for good: only a kill ends it there.
HELD_WORKER = """
import os, sys, time
sys.path.insert(0, {repo!r})
from workbench.trace_analysis import reading
read_rank_file = reading.read_rank_file

def wait_for(name):
    while not os.path.exists(os.path.join({marks!r}, name)):
        time.sleep(0.01)

def held(file, fallback_rank, several, want_digest, progress, cancelled, analysing):
    if file.name != {held!r}:
        return read_rank_file(file, fallback_rank, several, want_digest, progress, cancelled, analysing)

    def progress_held(bytes_read):
        progress(bytes_read)
        wait_for("read on")

    def analysing_held():
        analysing()
        wait_for("never")

    return read_rank_file(file, fallback_rank, several, want_digest, progress_held, cancelled, analysing_held)

reading.read_rank_file = held
from workbench.trace_analysis.rank_worker import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("opened", ["a file", "a folder of small files"])
def test_the_progress_comes_back_from_the_process_and_cancel_kills_it(opened, request, tmp_path, monkeypatch):
    """A folder's: its bytes read in all, "reading" until its last file's bytes are read."""
    path = request.getfixturevalue("trace" if opened == "a file" else "small_files")
    marks = tmp_path / "marks"
    marks.mkdir()
    started: list[subprocess.Popen[bytes]] = []

    def start(several, want_digest, news_fd):
        code = HELD_WORKER.format(repo=str(REPO), marks=str(marks), held=sorted(path.glob("*.json"))[-1].name
                                  if path.is_dir() else path.name)
        started.append(subprocess.Popen(
            [sys.executable, "-c", code, str(os.getpid()), "1" if several else "0", "1" if want_digest else "0",
             str(news_fd)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(news_fd,)))
        return started[-1]

    monkeypatch.setattr(rank_pool, "_start", start)
    if opened == "a file":
        monkeypatch.setattr(rank_pool, "IN_WORKER_MIN_BYTES", 0)
    before = descendants()
    opening = TraceOpening(path, tmp_path / "home")
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            opening.run()
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    reading = _wait_for(opening, thread, lambda progress: progress.phase == READING and bool(progress.fraction))
    assert reading.fraction is not None and 0 < reading.fraction < 1  # the first chunk's bytes, from the process
    (marks / "read on").touch()
    assert _wait_for(opening, thread, lambda progress: progress.phase == ANALYSING).fraction is None
    opening.cancel()  # the process is held in its analysis: only a kill ends it
    thread.join(WAIT_S)
    assert not thread.is_alive() and len(outcome) == 1 and isinstance(outcome[0], TraceCancelled)
    assert len(started) == 1 and started[0].returncode == -signal.SIGKILL
    assert leftovers(before) == {}
    assert not (tmp_path / "home").exists() or HistoryStore.open(tmp_path / "home").list_runs() == []


def _wait_for(opening: TraceOpening, thread: threading.Thread, seen) -> TraceProgress:
    """The opening's progress once ``seen`` holds for it (the opening's end stops the wait: then it never will)."""
    deadline = time.monotonic() + WAIT_S
    progress = opening.progress()
    while not seen(progress) and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
        progress = opening.progress()
    assert seen(progress), progress
    return progress
