"""`workbench runs` and `workbench export`, called in-process through workbench.cli.main. No Qt."""

from __future__ import annotations

import csv

import pytest
from builders import record_complete_run, trace_record

from workbench.cli import main
from workbench.config import FIELD_NAMES, RunConfig
from workbench.history.export import RUNS_CSV_COLUMNS, export_runs_csv
from workbench.history.store import HistoryStore


@pytest.fixture
def home(tmp_path, monkeypatch):
    # main() exports --home as WORKBENCH_HOME; monkeypatch puts the variable back after the test.
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "unused-default"))
    return tmp_path / "home"


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as file:
        return list(csv.DictReader(file))


def test_runs_on_an_empty_history_says_so(home, capsys):
    assert main(["--home", str(home), "runs"]) == 0
    assert "No runs recorded yet" in capsys.readouterr().out


def test_runs_lists_cli_and_gui_runs_of_the_same_history_newest_first(home, capsys):
    with HistoryStore.open(home) as store:
        cli_run = record_complete_run(store, name="from the terminal", source="cli")
        gui_run = record_complete_run(store, name="from the app", source="gui")
    assert main(["--home", str(home), "runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["ID", "NAME", "STATUS", "FROM"]
    assert lines[1].split()[:5] == [str(gui_run), "from", "the", "app", "finished"]
    assert lines[2].split()[:5] == [str(cli_run), "from", "the", "terminal", "finished"]
    assert "1,006" in lines[1] and "25.0 %" in lines[1] and "42.0 %" in lines[1]  # img/s, data wait, accuracy


def test_runs_limit_shows_the_newest(home, capsys):
    with HistoryStore.open(home) as store:
        ids = [record_complete_run(store) for _ in range(3)]
    assert main(["--home", str(home), "runs", "--limit", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].split()[0] == str(ids[-1])


def test_export_writes_the_same_bytes_as_the_library(home, tmp_path, capsys):
    with HistoryStore.open(home) as store:
        first = record_complete_run(store, name="a, with comma")
        record_complete_run(store, name="b")
        export_runs_csv(store, tmp_path / "library.csv", [first])
    assert main(["--home", str(home), "export", "--out", str(tmp_path / "cli.csv"), "--runs", str(first)]) == 0
    assert capsys.readouterr().out.strip() == f"Wrote 1 run to {tmp_path / 'cli.csv'}"
    assert (tmp_path / "cli.csv").read_bytes() == (tmp_path / "library.csv").read_bytes()


def test_export_steps_writes_the_long_file(home, tmp_path, capsys):
    with HistoryStore.open(home) as store:
        run_id = record_complete_run(store, steps=3)
    assert main(["--home", str(home), "export", "--out", str(tmp_path / "steps.csv"), "--steps"]) == 0
    rows = read_rows(tmp_path / "steps.csv")
    assert {row["run_id"] for row in rows} == {str(run_id)}
    assert [row["value"] for row in rows if row["metric"] == "loss"] == ["2.5", "1.25", "0.8333333333333334"]
    assert f"Wrote {len(rows)} step metric rows" in capsys.readouterr().out


def test_export_to_an_unwritable_path_is_one_line_and_exit_2(home, tmp_path, capsys):
    with HistoryStore.open(home) as store:
        record_complete_run(store)
    target = tmp_path / "missing-folder" / "runs.csv"
    assert main(["--home", str(home), "export", "--out", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("workbench export: cannot write") and "folder does not exist" in captured.err
    assert not target.parent.exists()


def test_export_of_unknown_runs_is_exit_2(home, tmp_path, capsys):
    with HistoryStore.open(home) as store:
        record_complete_run(store)
    assert main(["--home", str(home), "export", "--out", str(tmp_path / "x.csv"), "--runs", "1", "5"]) == 2
    assert "no run with id 5" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


def test_export_takes_the_file_as_its_argument_too(home, tmp_path, capsys):
    """Issue 30 §8: `workbench export file.csv` failed; --out was the only way."""
    with HistoryStore.open(home) as store:
        record_complete_run(store)
    assert main(["--home", str(home), "export", str(tmp_path / "runs.csv")]) == 0
    assert capsys.readouterr().out.strip() == f"Wrote 1 run to {tmp_path / 'runs.csv'}"
    assert read_rows(tmp_path / "runs.csv")


@pytest.mark.parametrize("arguments", [["export"], ["export", "--out", "x.csv", "--runs", "abc"], ["runs", "--limit", "0"],
                                       ["export", "a.csv", "--out", "b.csv"]])
def test_bad_arguments_are_exit_2(home, capsys, arguments):
    assert main(["--home", str(home), *arguments]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_history_from_a_newer_workbench_is_one_line(home, capsys):
    import sqlite3

    HistoryStore.open(home).close()
    conn = sqlite3.connect(home / "history.sqlite3")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    assert main(["--home", str(home), "runs"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "written by a newer workbench (schema 99" in err


def test_two_cli_runs_differing_in_one_setting_export_rows_differing_in_that_setting(home, tmp_path, capsys):
    """Issue 4, done-when 1: real `workbench run`s (CPU, tiny), then `workbench export`."""
    base = ["--home", str(home), "run", "--dataset", "synthetic", "--synthetic-size", "256", "--max-steps", "4",
            "--epochs", "1", "--device", "cpu", "--num-workers", "0", "--log-every", "1"]
    assert main([*base, "--batch-size", "32"]) == 0
    assert main([*base, "--batch-size", "64"]) == 0
    capsys.readouterr()
    out = tmp_path / "runs.csv"
    assert main(["--home", str(home), "export", "--out", str(out)]) == 0

    first, second = read_rows(out)
    assert list(first) == list(RUNS_CSV_COLUMNS)
    assert [name for name in FIELD_NAMES if first[name] != second[name]] == ["batch_size"]
    assert (first["batch_size"], second["batch_size"]) == ("32", "64")
    assert first["status"] == second["status"] == "finished"
    for row in (first, second):
        assert float(row["images_per_sec"]) > 0
        assert 0 <= float(row["test_accuracy"]) <= 1
        assert float(row["final_loss"]) > 0
        assert row["device_name"] and row["torch_version"]
    with HistoryStore.open(home) as store:
        records = store.list_runs()
        assert [record.source for record in records] == ["cli", "cli"]
        assert all(store.step_metrics(record.id)["step"].tolist() == [1, 2, 3, 4] for record in records)
        assert records[0].config == RunConfig.from_dict({**records[1].config.to_dict(), "batch_size": 64})


def test_tags_are_added_removed_listed_and_exported(home, tmp_path, capsys):
    """Issue 30 §9: users looked for tags on runs (notes and renaming existed)."""
    with HistoryStore.open(home) as store:
        run = record_complete_run(store, name="first try")
    assert main(["--home", str(home), "tag", str(run), "baseline", "fp16 try", "baseline"]) == 0
    assert capsys.readouterr().out.strip() == f"#{run}: baseline, fp16 try"
    assert main(["--home", str(home), "tag", str(run), "keep", "--remove", "fp16 try"]) == 0
    assert capsys.readouterr().out.strip() == f"#{run}: baseline, keep"
    assert main(["--home", str(home), "runs"]) == 0
    assert "first try [baseline, keep]" in capsys.readouterr().out
    assert main(["--home", str(home), "export", str(tmp_path / "runs.csv")]) == 0
    assert read_rows(tmp_path / "runs.csv")[0]["tags"] == "baseline;keep"
    assert main(["--home", str(home), "tag", str(run), "a;b"]) == 2  # the CSV's separator: it would not read back
    assert "without ';'" in capsys.readouterr().err
    with HistoryStore.open(home) as store:
        assert store.get_run(run).tags == ("baseline", "keep")


def test_no_escape_sequence_a_name_or_tag_holds_reaches_the_terminal(home, capsys):
    """`tag 1 $'evil\\e[2J'` was kept, and `runs` and `tag` printed the escape raw: the terminal cleared."""
    with HistoryStore.open(home) as store:
        run = record_complete_run(store, name="plain \x1b[31mred")  # the window's rename keeps what it is given
    assert main(["--home", str(home), "tag", str(run), "evil\x1b[2J"]) == 2
    assert "control characters" in capsys.readouterr().err
    assert main(["--home", str(home), "runs"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "plain \\x1b[31mred" in out


def test_runs_says_which_rows_are_traces(home, capsys):
    with HistoryStore.open(home) as store:
        run = record_complete_run(store, name="a run")
        trace, _ = store.add_trace(trace_record())
    assert main(["--home", str(home), "runs"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    kind = header.index("KIND")
    by_id = {int(row.split()[0]): row for row in rows}
    assert by_id[run][kind:].strip() == "run" and by_id[trace][kind:].strip() == "trace"
    world = header.index("WORLD SIZE")
    assert by_id[trace][world:world + len("WORLD SIZE")].strip() == ""  # a trace's ranks are no run's processes
    status = header.index("STATUS")  # stored "finished": opened, not run
    assert by_id[trace][status:].split()[0] == "opened" and by_id[run][status:].split()[0] == "finished"
    duration = header.index("DURATION")  # opened, not run: blank, as in the window (it read "--:--")
    assert by_id[trace][duration:kind].strip() == "" and by_id[run][duration:kind].strip() not in ("", "--:--")
