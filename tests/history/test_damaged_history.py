"""A damaged history (garbage in a page, a table or column missing, a newer schema, not a database at all): every
command says one line, exits non-zero, and writes nothing into the file. No Qt."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
from builders import record_complete_run

from workbench.cli import main
from workbench.history.store import HistoryDamaged, HistoryStore, HistoryTooNew

TRAIN = ["--dataset", "synthetic", "--synthetic-size", "64", "--batch-size", "16", "--max-steps", "2", "--device", "cpu",
         "--num-workers", "0"]


def garbage_in_a_page_of_runs(path):
    conn = sqlite3.connect(path)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(path, "r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\xa5" * page_size)


def table_dropped(path):
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE step_metrics")
    conn.close()


def column_dropped(path):
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE step_metrics DROP COLUMN loss_scale")
    conn.close()


def newer_schema(path):
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()


def garbage_file(path):
    path.write_bytes(os.urandom(16384))


DAMAGE = {
    garbage_in_a_page_of_runs: "is damaged (database disk image is malformed)",
    table_dropped: "is damaged (no table step_metrics)",
    column_dropped: "is damaged (table step_metrics has no column loss_scale)",
    newer_schema: "was written by a newer workbench (schema 999",
    garbage_file: "is not a workbench history database (file is not a database)",
}
COMMANDS = {
    "runs": ["runs"],
    "export": ["export", "--out", "{tmp}/runs.csv"],
    "run": ["run", *TRAIN],
    "sweep": ["sweep", "--param", "batch_size", "--values", "8,16", *TRAIN],
}


def damaged_home(tmp_path, damage):
    home = tmp_path / "home"
    with HistoryStore.open(home) as store:
        for _ in range(3):
            record_complete_run(store)
    path = home / "history.sqlite3"
    damage(path)
    assert not path.with_name(path.name + "-wal").exists()  # everything is in the file the hash covers
    return home, path


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("damage", list(DAMAGE), ids=lambda damage: damage.__name__)
def test_a_damaged_history_is_one_line_a_non_zero_exit_and_left_as_it_is(tmp_path, capsys, damage, command):
    home, path = damaged_home(tmp_path, damage)
    before = sha256(path)
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in COMMANDS[command]]
    code = main(["--home", str(home), *args])
    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1 and err.startswith(f"workbench {command}: "), err
    assert DAMAGE[damage] in err and str(path) in err
    assert ("update the workbench" if damage is newer_schema else "move it aside") in err
    assert "Traceback" not in err and out == ""  # nothing trained, nothing listed or exported
    assert sha256(path) == before
    assert not (tmp_path / "runs.csv").exists()


def test_run_on_a_damaged_history_refuses_before_torch_is_imported(tmp_path):
    """The history is checked first: a damaged one costs no torch import, and leaves no "running" row."""
    import subprocess
    import sys

    home, path = damaged_home(tmp_path, table_dropped)
    code = ("import sys\nfrom workbench.cli import main\n"
            f"code = main(['--home', {str(home)!r}, 'run', *{TRAIN!r}])\n"
            "sys.exit(10 + code if 'torch' in sys.modules else code)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "no table step_metrics" in result.stderr


def test_a_damaged_run_table_is_found_on_open_before_a_run_is_recorded(tmp_path):
    home, path = damaged_home(tmp_path, garbage_in_a_page_of_runs)
    with pytest.raises(HistoryDamaged, match="database disk image is malformed"):
        HistoryStore.open(home)
    with pytest.raises(HistoryDamaged, match="database disk image is malformed"):
        HistoryStore.open_for_reading(home)


def test_a_reader_that_skips_the_page_check_is_still_told_of_a_damaged_page_it_reads(tmp_path):
    """check_pages=False (the Runs tab's reads after its first, every 2 s during a run): the open reads no page of
    runs, and the read that meets the damage says so, as the open would have."""
    home, path = damaged_home(tmp_path, garbage_in_a_page_of_runs)
    with HistoryStore.open_for_reading(home, check_pages=False) as store:
        with pytest.raises(HistoryDamaged, match="database disk image is malformed"):
            store.changes_since(None)


def test_a_newer_history_is_refused_for_reading_too(tmp_path):
    home, path = damaged_home(tmp_path, newer_schema)
    with pytest.raises(HistoryTooNew, match="schema 999; this version reads up to"):
        HistoryStore.open_for_reading(home)


def test_a_database_of_other_tables_without_a_schema_version_is_not_taken_for_a_new_history(tmp_path):
    path = tmp_path / "history.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.close()
    before = sha256(path)
    with pytest.raises(HistoryDamaged, match=r"it holds tables \(photos\) but no workbench schema version"):
        HistoryStore.open(tmp_path)
    assert sha256(path) == before


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_history_that_is_a_fifo_or_a_home_that_is_a_file_is_said_in_one_line(tmp_path, capsys):
    """`workbench runs` and `export` blocked for good opening a FIFO (deaf to Ctrl-C); a home that is a file read
    as "No runs recorded yet"."""
    from hostile_paths import fifo_unblocked, make_fifo

    home = tmp_path / "home"
    home.mkdir()
    fifo = make_fifo(home / "history.sqlite3")
    with fifo_unblocked(fifo):
        for command in (["runs"], ["export", "--out", str(tmp_path / "runs.csv")], ["run", *TRAIN]):
            assert main(["--home", str(home), *command]) != 0, command
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "is a FIFO" in err[0] and "move it aside" in err[0], (command, err)
    with pytest.raises(HistoryDamaged, match="is a FIFO"):
        HistoryStore.open(home)
    file_home = tmp_path / "a-file"
    file_home.write_text("")
    assert main(["--home", str(file_home), "runs"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot be kept in {file_home}: it is a file, not a folder" in err[0], err


def test_a_symlink_loop_as_the_history_or_the_home_is_said_and_nothing_is_written(tmp_path, capsys):
    """A loop read as "No runs recorded yet" (Path.exists() is False on ELOOP), and `export` replaced the CSV it
    was given with a header and no runs, exit 0."""
    from hostile_paths import make_symlink_loop

    home = tmp_path / "home"
    home.mkdir()
    make_symlink_loop(home / "history.sqlite3")
    looped_home = make_symlink_loop(tmp_path / "looped-home")
    kept = tmp_path / "runs.csv"
    kept.write_text("run_id,name\n1,kept\n")
    for where, words in ((home, f"{home / 'history.sqlite3'} is a symlink loop"),
                         (looped_home, f"the workbench home {looped_home} is a symlink loop")):
        for command in (["runs"], ["export", "--out", str(kept)], ["run", *TRAIN]):
            assert main(["--home", str(where), *command]) == 1, command
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and words in err[0] and "the run history cannot be reached" in err[0], (command, err)
    assert kept.read_text() == "run_id,name\n1,kept\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
@pytest.mark.parametrize("kind", ["fifo", "folder", "loop"])
def test_a_file_sqlite_keeps_beside_the_history_that_is_of_another_kind_is_named(tmp_path, capsys, suffix, kind):
    """A write said "the file system refused (disk I/O error)" or, for a folder at -shm, "no permission to write",
    naming neither the file nor what it is."""
    from hostile_paths import make_fifo, make_symlink_loop

    home = tmp_path / "home"
    with HistoryStore.open(home) as store:
        run = record_complete_run(store)
    side = home / f"history.sqlite3{suffix}"
    {"fifo": make_fifo, "folder": Path.mkdir, "loop": make_symlink_loop}[kind](side)
    words = {"fifo": "is a FIFO", "folder": "is a folder", "loop": "is a symlink loop"}[kind]
    assert main(["--home", str(home), "tag", str(run), "x"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{side}, the file SQLite keeps beside it, {words}" in err[0], err
