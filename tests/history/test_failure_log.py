"""logs/failures.log is appended only where it is a regular file inside the home (issue 28 §7): a FIFO there hung
the CLI after any crash, and a symlink appended the traceback outside the home."""

from __future__ import annotations

import os

import pytest
from hostile_paths import fifo_unblocked, make_fifo

from workbench.history import failure_log
from workbench.history.failure_log import failure_log_path, log_failure, log_problem

POSIX_ONLY = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and O_NOFOLLOW are POSIX")


def logs_folder(home):
    folder = home / "logs"
    folder.mkdir(parents=True)
    return folder


@POSIX_ONLY
def test_a_fifo_as_the_log_is_not_written_and_does_not_block(tmp_path):
    fifo = make_fifo(logs_folder(tmp_path) / "failures.log")
    with fifo_unblocked(fifo):  # a writer blocked in open() is freed after a while, and fails the test
        assert log_failure("RuntimeError: boom", "Traceback …", home=tmp_path) is None


@POSIX_ONLY
def test_a_symlink_as_the_log_or_as_its_folder_is_not_followed(tmp_path):
    home, outside = tmp_path / "home", tmp_path / "outside"
    outside.mkdir()
    target = outside / "notes.txt"
    target.write_text("mine\n")
    os.symlink(target, logs_folder(home) / "failures.log")
    assert log_failure("RuntimeError: boom", "Traceback …", home=home) is None
    assert target.read_text() == "mine\n"

    other_home = tmp_path / "other-home"
    other_home.mkdir()
    os.symlink(outside, other_home / "logs")
    assert log_failure("RuntimeError: boom", "Traceback …", home=other_home) is None
    assert sorted(path.name for path in outside.iterdir()) == ["notes.txt"]


def test_the_log_is_appended_and_moves_aside_past_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(failure_log, "MAX_BYTES", 100)
    path = failure_log_path(tmp_path)
    assert log_failure("first", "Traceback 1", home=tmp_path) == path
    assert log_failure("second", "Traceback 2", home=tmp_path) == path
    assert "first" in path.read_text() and "second" in path.read_text()
    assert log_failure("third", "Traceback 3", home=tmp_path) == path  # the file was past 100 bytes
    old = path.with_name("failures.log.1").read_text()
    assert "second" in old and "third" not in old and "third" in path.read_text()


def test_a_problem_is_one_line_whatever_its_reason_holds(tmp_path):
    """A window's read that kept failing is logged as one line: a path in its reason cannot break it."""
    path = failure_log_path(tmp_path)
    assert log_problem("the Runs tab's poll of the history", "cannot read /home/a\nb/history.sqlite3",
                       at=0.0, home=tmp_path) == path
    assert path.read_text(encoding="utf-8") == ("=== 1970-01-01T00:00:00Z the Runs tab's poll of the history failed: "
                                                "cannot read /home/a\\nb/history.sqlite3\n\n")
