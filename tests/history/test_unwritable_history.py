"""A history that cannot be written where it is (a full disk, a read-only mount) is intact and said to be: `runs`
and `export` only read, so they work there; `run` says one line naming the cause. Told apart from a damaged
history by SQLite's result code and the folder's file system. No Qt."""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import sqlite3
from types import SimpleNamespace

import pytest
from builders import record_complete_run, started, step
from small_disk import fill, remount_read_only, small_tmpfs

from workbench.cli import main
from workbench.config import RunConfig
from workbench.history import errors
from workbench.history.errors import HistoryDamaged, HistoryError, HistoryUnwritable, history_error
from workbench.history.schema import MIGRATIONS
from workbench.history.store import HistoryStore

TRAIN = ["--dataset", "synthetic", "--synthetic-size", "64", "--batch-size", "16", "--max-steps", "2", "--device", "cpu",
         "--num-workers", "0"]


@pytest.fixture
def disk(tmp_path):
    with small_tmpfs(tmp_path / "disk", "1m") as folder:
        yield folder


def history_with_runs(home, count=3):
    with HistoryStore.open(home) as store:
        return [record_complete_run(store, name=f"run {number}") for number in range(1, count + 1)]


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(capsys, home, *args):
    code = main(["--home", str(home), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("make_unwritable", [remount_read_only, fill], ids=["read-only mount", "full disk"])
def test_runs_and_export_read_a_history_the_disk_cannot_write(disk, tmp_path, capsys, make_unwritable):
    home = disk / "home"
    ids = history_with_runs(home)
    before = sha256(home / "history.sqlite3")
    make_unwritable(disk)

    code, out, err = cli(capsys, home, "runs")
    assert (code, err) == (0, ""), err
    assert [line.split()[0] for line in out.splitlines()[1:]] == [str(run_id) for run_id in reversed(ids)]

    code, out, err = cli(capsys, home, "export", "--out", str(tmp_path / "runs.csv"))
    assert (code, err) == (0, ""), err
    with open(tmp_path / "runs.csv", newline="", encoding="utf-8") as file:
        assert [row["name"] for row in csv.DictReader(file)] == ["run 1", "run 2", "run 3"]
    assert sha256(home / "history.sqlite3") == before


@pytest.mark.parametrize("make_unwritable, cause", [(remount_read_only, "is on a read-only file system"),
                                                    (fill, "the disk is full")], ids=["read-only mount", "full disk"])
def test_run_on_a_disk_that_cannot_take_the_history_is_one_line_naming_why(disk, capsys, make_unwritable, cause):
    home = disk / "home"
    history_with_runs(home, 1)
    before = sha256(home / "history.sqlite3")
    make_unwritable(disk)
    code, out, err = cli(capsys, home, "run", *TRAIN)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("workbench run: cannot open the run history at "), err
    assert cause in err and "the history is intact" in err and "--home" in err and "--no-history" in err
    assert "damaged" not in err and "move it aside" not in err and "not a workbench history" not in err
    assert sha256(home / "history.sqlite3") == before


def test_runs_on_a_read_only_mount_shows_a_dead_run_as_stored_and_on_a_writable_disk_marks_it(disk, capsys):
    home = disk / "home"
    history_with_runs(home, 1)
    with HistoryStore.open(home) as store:
        store.start_run(RunConfig(device="cpu"), name="its process died")
    with sqlite3.connect(home / "history.sqlite3") as conn:
        conn.execute("UPDATE runs SET pid = 999999999 WHERE name = 'its process died'")  # no such process
    conn.close()
    remount_read_only(disk)  # the marking is best effort: a read-only disk keeps the row as it is
    code, out, err = cli(capsys, home, "runs")
    assert (code, err) == (0, "")
    assert "its process died" in out.splitlines()[1] and "running" in out.splitlines()[1]


def test_runs_marks_a_dead_run_interrupted_where_the_disk_takes_the_write(tmp_path, capsys):
    home = tmp_path / "home"
    with HistoryStore.open(home) as store:
        store.start_run(RunConfig(device="cpu"), name="its process died")
    with sqlite3.connect(home / "history.sqlite3") as conn:
        conn.execute("UPDATE runs SET pid = 999999999")
    conn.close()
    code, out, err = cli(capsys, home, "runs")
    assert code == 0 and "interrupted" in out.splitlines()[1]


def test_runs_reads_an_older_schema_without_upgrading_the_file(tmp_path, capsys):
    """`runs` only reads: an older history is read as this version reads it (an upgraded copy in memory); the
    file is upgraded by the next open for writing (a run, the app)."""
    home = tmp_path / "home"
    home.mkdir()
    path = home / "history.sqlite3"
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:3]:
        migration(conn)
    conn.execute("INSERT INTO runs (name, status, source, started_at, config_json) VALUES "
                 "('from schema 3', 'finished', 'cli', 1.0e9, '{\"batch_size\": 64}')")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    before = sha256(path)
    code, out, err = cli(capsys, home, "runs")
    assert (code, err) == (0, "")
    assert "from schema 3" in out.splitlines()[1]
    assert sha256(path) == before
    with HistoryStore.open_for_reading(home) as store:
        assert store.get_run(1).config.batch_size == 64


def test_runs_on_a_home_with_no_history_yet_makes_nothing(tmp_path, capsys):
    home = tmp_path / "never-used"
    code, out, err = cli(capsys, home, "runs")
    assert code == 0 and "No runs recorded yet" in out
    assert not home.exists()


def sqlite_error(message, code=None):
    error = sqlite3.OperationalError(message)
    if code is not None:
        error.sqlite_errorcode = code
    return error


def statvfs(read_only=False, free=10 << 30):
    return lambda path: SimpleNamespace(f_flag=os.ST_RDONLY if read_only else 0, f_bavail=free // 4096, f_frsize=4096)


@pytest.mark.parametrize("with_code", [True, False], ids=["error code", "message only (Python 3.10)"])
@pytest.mark.parametrize("message, code, disk, kind, words", [
    ("file is not a database", 26, {}, HistoryDamaged, "is not a workbench history database"),
    ("database disk image is malformed", 11, {}, HistoryDamaged, "is damaged"),
    ("database or disk is full", 13, {"free": 8192}, HistoryUnwritable, "the disk is full"),
    ("database or disk is full", 13, {}, HistoryUnwritable, "the database or its disk is full"),
    ("disk I/O error", 10, {"free": 0}, HistoryUnwritable, "the disk is full"),
    ("unable to open database file", 14, {"read_only": True}, HistoryUnwritable, "is on a read-only file system"),
    ("attempt to write a readonly database", 8, {}, HistoryUnwritable, "no permission to write"),
    ("access permission denied", 3, {}, HistoryUnwritable, "no permission to write"),
    ("database is locked", 5, {}, HistoryError, "another process holds it"),
])
def test_each_sqlite_failure_gets_its_advice(tmp_path, monkeypatch, with_code, message, code, disk, kind, words):
    monkeypatch.setattr(errors.os, "statvfs", statvfs(**disk))
    path = tmp_path / "history.sqlite3"
    path.write_bytes(b"")
    error = history_error(sqlite_error(message, code if with_code else None), path, "write")
    assert type(error) is kind
    assert words in str(error) and str(path) in str(error)
    if kind is HistoryUnwritable:
        assert "the history is intact" in str(error) and "use --home" in str(error)
    if kind is HistoryDamaged:
        assert "move it aside" in str(error)


def test_a_write_refused_mid_run_by_a_full_disk_is_unwritable_not_damaged(disk):
    home = disk / "home"
    store = HistoryStore.open(home)
    try:
        config = RunConfig(device="cpu")
        recorder = store.start_run(config)
        recorder.record(started(config))
        fill(disk)
        with pytest.raises(HistoryUnwritable, match="the disk is full"):
            for index in range(1, 2000):  # until the log needs a page the disk does not have
                recorder.record(step(index, 2000))
                recorder.flush()
    finally:
        store.close()


def test_runs_on_a_read_only_mount_says_when_the_newest_writes_are_out_of_reach(disk, tmp_path, capsys):
    """Without WAL's shared-memory file beside it, a read-only mount reads the database file alone: runs still
    only in its -wal file cannot be seen, and `runs` says so in one line beside the list."""
    live = tmp_path / "live"
    home = disk / "home"
    home.mkdir()
    with HistoryStore.open(live) as store:
        record_complete_run(store, name="in the file")
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store._conn.execute("PRAGMA wal_autocheckpoint = 0")
        config = RunConfig(device="cpu")
        running = store.start_run(config, name="only in the log")  # still running: its end would checkpoint
        running.record(started(config))
        for name in ("history.sqlite3", "history.sqlite3-wal"):  # as a machine that lost power left them
            shutil.copyfile(live / name, home / name)
    remount_read_only(disk)
    code, out, err = cli(capsys, home, "runs")
    assert code == 0
    assert err.count("\n") == 1 and err.startswith("workbench runs: the newest writes, in ") and "-wal" in err
    assert "in the file" in out and "only in the log" not in out
