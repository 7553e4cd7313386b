"""A folder's rank files read side by side, each in a process of its own (trace_analysis/rank_pool.py): the same
report as one after the other, progress as the processes read, and no process left behind when the read is cancelled."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from trace_builders import launched, step, trace, write
from workbench.trace_analysis import rank_pool, read_report
from workbench.trace_analysis.model import TraceCancelled

GB = 1024**3
REPO = Path(__file__).resolve().parents[2]


def test_the_pool_is_used_only_where_large_files_pay_for_its_processes(monkeypatch):
    monkeypatch.setattr(rank_pool.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(rank_pool, "_free_memory_bytes", lambda: 64 * GB)
    mb = 1024**2
    assert rank_pool.workers_for([300 * mb], [False]) == 1  # one file: nothing to read beside it
    assert rank_pool.workers_for([1 * mb, 1 * mb], [True, True]) == 1  # 2 MB in all: processes cost more
    assert rank_pool.workers_for([300 * mb] * 8, [False] * 8) == 8  # 8 GPUs' files, 16 cores
    assert rank_pool.workers_for([300 * mb] * 32, [False] * 32) == 16  # no more than the cores
    monkeypatch.setattr(rank_pool, "_free_memory_bytes", lambda: 16 * GB)
    assert rank_pool.workers_for([100 * mb] * 8, [True] * 8) == 6  # gzipped: 2.5 GB at its peak each
    monkeypatch.setattr(rank_pool, "_free_memory_bytes", lambda: 3 * GB)
    assert rank_pool.workers_for([1 * GB] * 8, [False] * 8) == 3  # as many as memory holds
    monkeypatch.setattr(rank_pool, "_free_memory_bytes", lambda: 0)  # not known: one file at a time
    assert rank_pool.workers_for([1 * GB] * 8, [False] * 8) == 1


def test_the_windows_lone_file_gets_a_process_of_its_own_from_16_mb_of_text():
    mb = 1024**2
    assert not rank_pool.worth_a_process([15 * mb], [False]) and rank_pool.worth_a_process([16 * mb], [False])
    assert rank_pool.worth_a_process([1 * mb], [True])  # gzipped: 10-25× as much text


@pytest.fixture
def ranks_folder(tmp_path, monkeypatch):
    """Three rank files (one not a trace), and a pool of two processes however small they are."""
    for rank in (0, 1):
        events = [step(number, 1000 * number, 1000) for number in range(1, 4)]
        events += [event for number in range(1, 4)
                   for event in launched("k", 1000 * number + 10, 1000 * number + 100, 300 + 100 * rank, number,
                                         device=rank)]
        write(tmp_path / f"rank-{rank}.json.gz", trace(events, distributedInfo={"rank": rank}))
    (tmp_path / "rank-2.json").write_text("not json")
    monkeypatch.setattr(rank_pool, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(rank_pool, "workers_for", lambda sizes, gzipped: 2)
    return tmp_path


@pytest.mark.slow  # starts processes
def test_one_rank_read_in_a_process_keeps_its_place_in_the_folder(ranks_folder):
    """Files that name no rank are numbered by their place among all the folder's files, also when only one of
    them is read (in a process of the pool); the file that is not a trace is left unread, as it holds no rank."""
    (ranks_folder / "unnamed").mkdir()
    for name in ("a.json", "b.json", "c.json"):
        write(ranks_folder / "unnamed" / name, trace([step(1, 0, 1000), *launched("k", 10, 100, 300, 1)]))
    report = read_report(ranks_folder / "unnamed", rank=2)
    assert (report.files, [r.rank for r in report.ranks]) == ((str(ranks_folder / "unnamed" / "c.json"),), [2])
    report = read_report(ranks_folder, rank=1)
    assert ([Path(file).name for file in report.files], [r.rank for r in report.ranks]) == (["rank-1.json.gz"], [1])
    # one process's profiling cycles share its number in the pool's processes too (their places are 0 and 1)
    (ranks_folder / "cycles").mkdir()
    for name in ("host_7.11.pt.trace.json", "host_7.12.pt.trace.json", "z.json"):
        write(ranks_folder / "cycles" / name, trace([step(1, 0, 1000), *launched("k", 10, 100, 300, 1)]))
    assert [r.rank for r in read_report(ranks_folder / "cycles").ranks] == [0, 0, 1]


@pytest.mark.slow  # starts processes
def test_a_workbench_py_in_the_current_folder_is_not_run_by_the_readers(ranks_folder, tmp_path, monkeypatch):
    """A user's own script named workbench.py, in the folder they run `workbench trace` from: the readers ran it
    (`python -m` puts that folder first on sys.path) and failed to find our package."""
    here = tmp_path / "project"
    here.mkdir()
    (here / "workbench.py").write_text(f"open({str(here / 'ran')!r}, 'a').write('ran')\n")
    (here / "runpy.py").write_text(f"open({str(here / 'ran')!r}, 'a').write('runpy')\n")
    monkeypatch.chdir(here)
    report = read_report(ranks_folder)
    assert [r.rank for r in report.ranks] == [0, 1] and not (here / "ran").exists()


@pytest.mark.slow  # starts processes
def test_a_folder_read_in_processes_is_the_report_read_in_one(ranks_folder, monkeypatch):
    fingerprints, seen = {}, []
    pooled = read_report(ranks_folder, fingerprints=fingerprints, progress=lambda done, total: seen.append(done))
    monkeypatch.setattr(rank_pool, "workers_for", lambda sizes, gzipped: 1)
    one_fingerprints = {}
    alone = read_report(ranks_folder, fingerprints=one_fingerprints)
    assert pooled == alone and fingerprints == one_fingerprints and len(fingerprints) == 2
    assert [r.rank for r in pooled.ranks] == [0, 1]
    assert any(note.startswith("left out:") and "rank-2.json" in note for note in pooled.notes)
    assert seen == sorted(seen) and seen[-1] == sum(p.stat().st_size for p in ranks_folder.iterdir())


@pytest.mark.slow  # starts processes
def test_a_cancelled_read_leaves_no_process_behind(ranks_folder, monkeypatch):
    started = []
    real_start = rank_pool._start

    def start(*args):
        started.append(real_start(*args))
        return started[-1]

    monkeypatch.setattr(rank_pool, "_start", start)
    with pytest.raises(TraceCancelled):
        read_report(ranks_folder, cancelled=lambda: bool(started))
    assert started and all(process.returncode is not None for process in started)


@pytest.mark.slow  # starts processes
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the process end")
def test_a_reader_killed_mid_read_leaves_no_file_and_no_process_behind(ranks_folder, tmp_path_factory):
    """A window or CLI killed with SIGKILL cannot clean up: the pool must have nothing to clean (its results come
    back through pipes, not a temporary folder), and a process still reading ends with its reader."""
    temp, marks = tmp_path_factory.mktemp("tmpdir"), tmp_path_factory.mktemp("marks")
    # The real rank_worker (its lifetime tied to the reader's), reading slowly: it marks that it is at work and
    # sleeps where it would read.
    slow_worker = textwrap.dedent(f"""
        import sys, time
        from workbench.trace_analysis import reading
        def read_slowly(*args):
            open({str(marks)!r} + "/at-work", "w").close()
            time.sleep(3600)
        reading.read_rank_file = read_slowly
        from workbench.trace_analysis.rank_worker import main
        sys.exit(main(sys.argv[1:]))
    """)
    reader_code = textwrap.dedent(f"""
        import os, subprocess, sys
        from workbench.trace_analysis import rank_pool, read_report
        rank_pool.workers_for = lambda sizes, gzipped: 2
        def start(several, want_digest, news_fd):
            process = subprocess.Popen(
                [sys.executable, "-c", {slow_worker!r}, str(os.getpid()), "1", "0", str(news_fd)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(news_fd,))
            print(process.pid, flush=True)  # the first one's is read
            return process
        rank_pool._start = start
        read_report({str(ranks_folder)!r})
    """)
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONPATH": str(REPO)}
    reader = subprocess.Popen([sys.executable, "-c", reader_code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        worker = int(reader.stdout.readline())
        for _ in range(1200):  # 120 s on the most loaded machine; at work within a second or two alone
            if (marks / "at-work").exists():
                break
            time.sleep(0.1)
        assert _alive(worker) and (marks / "at-work").exists()
    finally:
        reader.kill()
        reader.wait()
        reader.stdout.close()
    assert list(temp.iterdir()) == []
    for _ in range(600):  # it ends as soon as it sees its reader gone; 60 s on the most loaded machine
        if not _alive(worker):
            break
        time.sleep(0.1)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False
