"""A history that stops taking a run's writes mid-run (a full disk) does not stop the run: the run goes on without
it and says so once, and the record names the cause. The write-ahead log stays bounded during a long run and is
empty after it. No Qt."""

from __future__ import annotations

import sqlite3

import pytest
from builders import complete_run_events, started, step

from workbench.cli import main
from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.experiments.events import RecordingFailed
from workbench.experiments.recording import record_events
from workbench.history.database import JOURNAL_SIZE_LIMIT_BYTES
from workbench.history.errors import HistoryDamaged, HistoryUnwritable
from workbench.history.recorder import RunRecorder
from workbench.history.run_writes import RunWrites
from workbench.history.store import HistoryStore

STEPS = 300  # step rows enough for several new pages: the database cannot hold them without growing


@pytest.fixture
def full_after_start(monkeypatch):
    """Every store's file stops growing once a run is started in it: SQLITE_FULL, as on a full disk."""
    start_run = HistoryStore.start_run

    def start_then_fill(store, *args, **kwargs):
        recorder = start_run(store, *args, **kwargs)
        pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        return recorder

    monkeypatch.setattr(HistoryStore, "start_run", start_then_fill)


def test_workbench_run_goes_on_when_the_history_fills_mid_run_and_its_record_names_why(
        tmp_path, capsys, monkeypatch, full_after_start):
    monkeypatch.setattr("workbench.engine.run", lambda config, stop, **options: complete_run_events(config, STEPS),
                        raising=False)
    home = tmp_path / "home"
    code = main(["--home", str(home), "run", "--dataset", "synthetic", "--device", "cpu", "--num-workers", "0"])
    out, err = capsys.readouterr()
    assert code == 0  # the run finished; the history's trouble is said, and does not fail it
    said = [line for line in err.splitlines() if "history" in line]
    assert len(said) == 1 and "Traceback" not in err, err
    assert said[0].startswith("workbench run: the history stopped taking run #1 (") and "is full" in said[0]
    assert said[0].endswith("the run goes on without it")
    assert "finished" in out or "Finished" in out  # the end-of-run summary is printed as ever
    with HistoryStore.open_for_reading(home) as store:
        record = store.get_run(1)
    assert record.status == "failed"
    assert "the history stopped taking this run" in record.reason and "is full" in record.reason


@pytest.mark.slow
def test_a_real_run_trains_to_its_end_when_its_history_fills(tmp_path, capsys, full_after_start):
    home = tmp_path / "home"
    with HistoryStore.open(home):
        pass
    with sqlite3.connect(home / "history.sqlite3") as conn:  # the last page of step metrics nearly full
        conn.executemany("INSERT INTO step_metrics (run_id, step, loss) VALUES (999, ?, 1.0)", [(n,) for n in range(150)])
    conn.close()
    code = main(["--home", str(home), "run", "--dataset", "synthetic", "--synthetic-size", "64", "--batch-size", "4",
                 "--max-steps", "40", "--log-every", "1", "--epochs", "1", "--device", "cpu", "--num-workers", "0",
                 "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert '"status": "finished"' in out.splitlines()[-1] and '"steps": 40' in out.splitlines()[-1]
    assert len([line for line in err.splitlines() if "history stopped taking run #1" in line]) == 1
    with HistoryStore.open_for_reading(home) as store:
        record = store.get_run(1)
    assert record.status == "failed" and "is full" in record.reason


def test_when_even_the_end_cannot_be_written_the_next_open_says_only_what_it_knows(tmp_path, monkeypatch):
    """The row stays "running" while its process lives; once that has gone, it is marked interrupted, saying the
    record stops at its last write, not that the run itself was cut short."""
    def refuse(writes, *args):
        raise HistoryUnwritable("cannot write the run history: the disk is full")

    monkeypatch.setattr(RunWrites, "progress", refuse)
    monkeypatch.setattr(RunWrites, "bare_end", refuse)
    config = RunConfig(device="cpu")
    with HistoryStore.open(tmp_path) as store:
        recorder = store.start_run(config)
        events = list(record_events(complete_run_events(config, 5), recorder))
        assert [event for event in events if isinstance(event, RecordingFailed)][0].run_id == recorder.run_id
        assert isinstance(events[-1], RunEnded) and events[-1].status == "finished"  # the run went on
        assert store.get_run(recorder.run_id).status == "running"
        store._conn.execute("UPDATE runs SET pid = 999999999")  # its process has gone
    monkeypatch.undo()
    with HistoryStore.open(tmp_path) as store:
        record = store.get_run(1)
    assert record.status == "interrupted"
    assert "ended without finishing its record, so how the run ended is unknown" in record.reason
    assert "the record stops at its last write (step 0)" in record.reason


class Writes:
    """RunWrites that refuse every write as a damaged history does, and count what was tried."""

    run_id, home = 7, None

    def __init__(self):
        self.tried = []

    def __getattr__(self, name):
        def write(*args):
            self.tried.append(name)
            if name != "checkpoint":
                raise HistoryDamaged("the run history is damaged (database disk image is malformed)")
        return write


def test_a_history_found_damaged_mid_run_is_not_written_again():
    writes = Writes()
    recorder = RunRecorder(writes)  # type: ignore[arg-type]
    config = RunConfig(device="cpu")
    with pytest.raises(HistoryDamaged):
        recorder.record(started(config))
    with pytest.raises(HistoryDamaged):
        recorder.fail("the history stopped taking this run")
    assert writes.tried == ["started"]  # no full end, no bare end into a damaged file


def test_the_write_ahead_log_stays_bounded_during_a_long_run_and_is_empty_after_it(tmp_path):
    config = RunConfig(device="cpu")
    log = tmp_path / "history.sqlite3-wal"
    largest = 0
    with HistoryStore.open(tmp_path) as store:
        recorder = store.start_run(config)
        recorder.flush_interval_s = 0  # every step is a commit of ~5 pages: 1,000 pages in all
        recorder.record(started(config, total_steps=200))
        for index in range(1, 201):
            recorder.record(step(index, 200))
            largest = max(largest, log.stat().st_size)
        recorder.record(RunEnded(status="finished", summary=store.get_run(recorder.run_id).summary))
        assert log.stat().st_size == 0  # checkpointed and cut at the run's end
        assert store.step_metrics(recorder.run_id)["step"].size == 200
    # SQLite's default (a checkpoint every 1,000 pages, the log never cut) lets it reach about 4 MiB here.
    assert largest <= JOURNAL_SIZE_LIMIT_BYTES
