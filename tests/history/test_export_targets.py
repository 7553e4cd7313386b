"""What `workbench export --out PATH` may write over (issue 28 §2): it replaced whatever was at PATH, the history
included, a FIFO, /dev/full and a symlink to /proc/self/fd/1. Now: the history and anything in the workbench home
but a CSV the workbench wrote are refused; a FIFO or a character device is written as a stream, never replaced;
only a regular file is replaced (a temporary file beside it, renamed)."""

from __future__ import annotations

import errno
import gc
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from builders import record_complete_run
from hostile_paths import fifo_unblocked, make_fifo

from workbench.cli import main
from workbench.history import export_targets
from workbench.history.export import ExportError, export_steps_csv
from workbench.history.store import HistoryStore

POSIX_ONLY = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and device nodes are POSIX")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "unused-default"))
    home = tmp_path / "home"
    with HistoryStore.open(home) as store:
        record_complete_run(store, name="first")
        record_complete_run(store, name="second")
    return home


def export(capsys, home: Path, target: Path, *more: str) -> tuple[int, str]:
    code = main(["--home", str(home), "export", "--out", str(target), *more])
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") <= 1
    return code, err.strip()


def run_names(home: Path) -> list[str]:
    with HistoryStore.open_for_reading(home) as store:
        return sorted(record.name for record in store.list_runs())


@pytest.mark.parametrize("reach", ["itself", "its -wal name", "a symlink outside the home", "a hard link"])
def test_the_history_is_never_written_over(home, tmp_path, capsys, reach):
    history = home / "history.sqlite3"
    target = {"itself": history, "its -wal name": home / "history.sqlite3-wal",
              "a symlink outside the home": tmp_path / "runs.csv", "a hard link": tmp_path / "backup.sqlite3"}[reach]
    if reach == "a symlink outside the home":
        os.symlink(history, target)
    if reach == "a hard link":
        os.link(history, target)
    before = history.read_bytes()
    code, err = export(capsys, home, target)
    assert code == 2 and err == f"workbench export: cannot write {target}: it is the run history ({history}); give " \
                                "another file name"
    assert history.read_bytes() == before and run_names(home) == ["first", "second"]


def test_in_the_home_only_a_csv_the_workbench_wrote_is_replaced(home, capsys):
    settings = home / "gui-settings.ini"
    settings.write_text("[run]\nconfig=x\n")
    log = home / "logs" / "failures.log"
    log.parent.mkdir()
    log.write_text("=== a failure\n")
    foreign_csv = home / "mine.csv"
    foreign_csv.write_text("a,b\n1,2\n")
    for target in (settings, log, foreign_csv):
        before = target.read_bytes()
        code, err = export(capsys, home, target)
        assert code == 2 and err == (f"workbench export: cannot write {target}: it is in the workbench home ({home}) "
                                     "and is not a CSV the workbench wrote; give another file name")
        assert target.read_bytes() == before
    code, err = export(capsys, home, home / "notes.txt")
    assert code == 2 and "give a name ending in .csv" in err and not (home / "notes.txt").exists()

    ours = home / "exports" / "runs.csv"
    ours.parent.mkdir()
    assert export(capsys, home, ours) == (0, "")  # a new CSV in the home
    assert export(capsys, home, ours, "--steps") == (0, "")  # and one it wrote, written again
    assert ours.read_text(encoding="utf-8").startswith("run_id,step,metric,value")


@POSIX_ONLY
def test_a_fifo_is_written_as_a_stream_and_refused_without_a_reader(home, tmp_path, capsys):
    fifo = make_fifo(tmp_path / "runs.csv")
    with fifo_unblocked(fifo):
        code, err = export(capsys, home, fifo)
    assert code == 2 and err == (f"workbench export: cannot write {fifo}: it is a FIFO (named pipe) that no program "
                                 "is reading; start the reader first, or give a file name")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)

    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a program reading it (the CSV fits the pipe's buffer)
    try:
        assert export(capsys, home, fifo) == (0, "")
        received = os.read(reader, 1 << 16).decode("utf-8")
    finally:
        os.close(reader)
    assert received.startswith("run_id,name,") and received.count("\r\n") == 3
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@POSIX_ONLY
def test_a_reader_that_stops_reading_fails_the_export_instead_of_blocking_it(tmp_path, monkeypatch):
    # The window exports on its GUI thread: a FIFO whose reader takes nothing must not freeze it.
    monkeypatch.setattr(export_targets, "STALLED_AFTER_S", 0.2)
    with HistoryStore.open(tmp_path / "home") as store:
        for _ in range(8):  # more step rows than a pipe's 64 KiB buffer holds
            record_complete_run(store, steps=400)
        fifo = make_fifo(tmp_path / "steps.csv")
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # opened, never read
        try:
            with pytest.raises(ExportError, match=f"^cannot write {fifo}: the program reading it took nothing for "
                                                  "0.2 s$"):
                export_steps_csv(store, fifo)
        finally:
            os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@POSIX_ONLY
def test_a_character_device_is_written_to_and_never_replaced(home, tmp_path, capsys):
    null_link = tmp_path / "null.csv"
    os.symlink(os.devnull, null_link)
    assert export(capsys, home, null_link) == (0, "")
    assert os.readlink(null_link) == os.devnull  # the link stays a link
    full = tmp_path / "full"  # a /dev/full of our own: replacing the machine's would break it for everyone
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("making a device node is not permitted here")
    code, err = export(capsys, home, full)
    assert code == 2 and err == f"workbench export: cannot write {full}: no space left on device"
    assert stat.S_ISCHR(os.lstat(full).st_mode)


@POSIX_ONLY
def test_a_symlink_to_standard_output_writes_the_csv_there_and_stays(home, tmp_path):
    link = tmp_path / "out.csv"
    os.symlink("/proc/self/fd/1", link)
    done = subprocess.run([sys.executable, "-m", "workbench", "--home", str(home), "export", "--out", str(link)],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith("run_id,name,") and done.stdout.endswith(f"Wrote 2 runs to {link}\n")
    assert os.readlink(link) == "/proc/self/fd/1"


def test_a_symlink_to_a_regular_file_replaces_its_target_and_stays(home, tmp_path, capsys):
    (tmp_path / "exports").mkdir()
    target = tmp_path / "exports" / "runs.csv"
    target.write_text("an old export\n")
    link = tmp_path / "latest.csv"
    os.symlink(target, link)
    assert export(capsys, home, link) == (0, "")
    assert os.readlink(link) == str(target) and target.read_text(encoding="utf-8").startswith("run_id,name,")



class _DiskFillsAfter:
    """A file whose writes fail with ENOSPC once ``room`` characters are in it: a disk that fills mid-export."""

    def __init__(self, file, room: int):
        self._file, self._room = file, room

    def write(self, text: str) -> int:
        self._room -= len(text)
        if self._room < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._file.write(text)

    def __getattr__(self, name):
        return getattr(self._file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._file.close()


def test_a_steps_export_that_fails_part_way_says_one_line_and_nothing_after(tmp_path, capsys, monkeypatch):
    """A write that failed mid-file (a full disk) left the rows' generator open past the history's close: its cursor's
    close then raised, and "Exception ignored in: <generator object HistoryReads._rows>" and a traceback followed the
    export's one line, twice."""
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "unused-default"))
    home = tmp_path / "home"
    with HistoryStore.open(home) as store:
        record_complete_run(store, name="long", steps=100)
    monkeypatch.setattr(export_targets, "open", lambda *args, **kwargs: _DiskFillsAfter(open(*args, **kwargs), 4096),
                        raising=False)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    target = tmp_path / "steps.csv"
    code, err = export(capsys, home, target, "--steps")
    gc.collect()
    assert code == 2 and err == f"workbench export: cannot write {target}: no space left on device"
    assert [str(found.exc_value) for found in unraisable] == []
    assert os.listdir(tmp_path) == ["home"]  # nor a temporary left


@pytest.mark.parametrize("flag", [[], ["--out"]], ids=["FILE", "--out"])
@pytest.mark.parametrize("steps", [[], ["--steps"]], ids=["runs", "steps"])
def test_a_dash_writes_the_csv_to_standard_output_and_what_was_written_to_standard_error(
        home, tmp_path, capsys, monkeypatch, flag, steps):
    """`workbench export -` wrote a file named "-" and said "Wrote 2 runs to -"."""
    monkeypatch.chdir(tmp_path)
    assert main(["--home", str(home), "export", str(tmp_path / "runs.csv"), *steps]) == 0
    capsys.readouterr()
    assert main(["--home", str(home), "export", *flag, "-", *steps]) == 0
    out, err = capsys.readouterr()
    assert out.encode("utf-8") == (tmp_path / "runs.csv").read_bytes()  # the bytes a file gets, line ends and all
    assert err == ("Wrote 2 runs" if not steps else f"Wrote {out.count(chr(10)) - 1} step metric rows") + \
        " to standard output\n"
    assert not os.path.lexists(tmp_path / "-")


def test_a_file_named_dash_is_written_as_dot_slash_dash(home, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--home", str(home), "export", "./-"]) == 0
    assert capsys.readouterr().out == "Wrote 2 runs to ./-\n"
    assert (tmp_path / "-").read_text(encoding="utf-8").startswith("run_id,name,")


@pytest.mark.parametrize("flag", [[], ["--out"]], ids=["FILE", "--out"])
def test_an_empty_file_name_is_said_to_be_empty(home, tmp_path, capsys, monkeypatch, flag):
    """It said "cannot write .: it is a folder; give a file name" (Path("") is the current folder); `--out ""`
    alone said to name the file once."""
    monkeypatch.chdir(tmp_path)
    code, err = export_args(capsys, home, *flag, "")
    assert (code, err) == (2, "workbench export: the file name is empty: give the CSV file to write, or - for "
                              "standard output")
    assert os.listdir(tmp_path) == ["home"]


def export_args(capsys, home: Path, *args: str) -> tuple[int, str]:
    code = main(["--home", str(home), "export", *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") <= 1
    return code, err.strip()
