"""A path the user gave, echoed on stdout by `workbench export` ("Wrote 2 runs to PATH"), `workbench runs` ("No runs
recorded yet in PATH") and `workbench make-npz` ("Wrote PATH: …"), reached the terminal raw: a newline in a file
name forged a line of the output, an escape sequence drove the terminal. They are written as escapes, as every
other line the CLI prints of what a user or a file named."""

from __future__ import annotations

from builders import record_complete_run
from own_images import make_folder

from workbench.cli import main
from workbench.history.store import HistoryStore

HOSTILE = "a\x1b[2Jb\nforged line\r.x"  # clears the screen, then a line of its own


def assert_escaped(out: str, lines: int) -> None:
    assert "\x1b" not in out and "\r" not in out and out.count("\n") == lines, repr(out)
    assert "a\\x1b[2Jb\\nforged line\\r.x" in out


def test_export_writes_the_file_named_and_echoes_its_name_escaped(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "unused-default"))
    home = tmp_path / "home"
    with HistoryStore.open(home) as store:
        record_complete_run(store, name="first")
    target = tmp_path / (HOSTILE + ".csv")
    assert main(["--home", str(home), "export", "--out", str(target)]) == 0
    assert_escaped(capsys.readouterr().out, lines=1)
    assert target.read_text(encoding="utf-8").startswith("run_id,")  # the file is the one named, newline and all


def test_runs_in_a_new_home_echoes_its_path_escaped(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "unused-default"))
    assert main(["--home", str(tmp_path / HOSTILE), "runs"]) == 0
    assert_escaped(capsys.readouterr().out, lines=1)


def test_make_npz_echoes_the_file_it_wrote_escaped(tmp_path, capsys):
    source = make_folder(tmp_path / "images", per_class=5)
    target = tmp_path / (HOSTILE + ".npz")
    assert main(["make-npz", str(source), "--out", str(target)]) == 0
    assert_escaped(capsys.readouterr().out, lines=2)
    assert target.is_file()
