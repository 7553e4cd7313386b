"""Only runs that started training are history: bad input starts nothing and stores nothing."""

from __future__ import annotations

import json

import pytest
from builders import started, step, summary

from workbench.config import RunConfig
from workbench.engine.events import RunEnded, StatusChanged
from workbench.history.store import HistoryStore


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path) as opened:
        yield opened


@pytest.mark.parametrize("kind", ["config", "data"])
def test_a_run_refused_for_bad_input_before_it_started_is_not_kept(store, kind):
    recorder = store.start_run(RunConfig(), source="gui")
    recorder.record(StatusChanged(message="Loading npz data…"))
    recorder.record(RunEnded(status="failed", summary=summary(0, status="failed"), reason="npz file x: bad labels", kind=kind))
    assert recorder.ended and recorder.discarded
    assert store.list_runs() == []


def test_a_failure_of_the_run_itself_is_kept_with_its_reason(store):
    recorder = store.start_run(RunConfig(), source="cli")
    recorder.record(RunEnded(status="failed", summary=summary(0, status="failed"), reason="could not query the device", kind="error"))
    [record] = store.list_runs()
    assert (record.status, record.reason, recorder.discarded) == ("failed", "could not query the device", False)


def test_a_run_that_started_training_is_kept_whatever_ends_it(store):
    config = RunConfig()
    recorder = store.start_run(config, source="cli")
    recorder.record(started(config))
    recorder.record(step(2))
    recorder.record(RunEnded(status="failed", summary=summary(2, status="failed"), reason="data went bad", kind="data"))
    [record] = store.list_runs()
    assert record.status == "failed" and record.summary.steps == 2


TINY = ["run", "--synthetic-size", "128", "--max-steps", "2", "--device", "cpu", "--num-workers", "0"]


def _runs(home):
    with HistoryStore.open(home) as store:
        return store.list_runs()


def test_cli_batch_larger_than_the_data_stores_nothing_and_prints_one_line(capsys, isolated_workbench_home):
    from workbench.cli import main

    assert main([*TINY, "--batch-size", "256"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip() == "workbench run: batch_size 256 is larger than the training set (128 images)"
    assert _runs(isolated_workbench_home) == []
    # Checked before the record was created, not recorded and removed: the next run is #1.
    assert main([*TINY, "--batch-size", "32", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["run_id"] == 1


def test_cli_npz_refused_only_on_loading_stores_nothing(capsys, isolated_workbench_home, tmp_path):
    """Negative labels pass the header check; the engine refuses them, and the record goes again."""
    import numpy as np

    from workbench.cli import main

    path = tmp_path / "negative.npz"
    images = np.zeros((64, 32, 32, 3), np.uint8)
    np.savez(path, train_images=images, train_labels=np.full(64, -1, np.int64),
             test_images=images[:8], test_labels=np.zeros(8, np.int64))
    assert main([*TINY, "--batch-size", "32", "--dataset", "npz", "--data-path", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no nine-line summary of n/a figures
    assert err.strip() == f"workbench run: npz file {path.resolve()}: train_labels has negative labels"
    assert _runs(isolated_workbench_home) == []


def test_refused_runs_give_their_ids_back_and_a_deleted_runs_id_stays_unused(store):
    """Issue 30 §8: five refused model specs left run ids 9–13 missing."""
    def refused():
        recorder = store.start_run(RunConfig(), source="cli")
        recorder.record(RunEnded(status="failed", summary=summary(0, status="failed"), reason="bad spec", kind="config"))
        return recorder.run_id

    def kept():
        recorder = store.start_run(RunConfig(), source="cli")
        recorder.record(started(RunConfig()))
        recorder.record(RunEnded(status="finished", summary=summary(0)))
        return recorder.run_id

    first = kept()
    assert [refused() for _ in range(3)] == [first + 1] * 3
    second = kept()
    assert second == first + 1
    store.delete(second)  # the user's delete: its id is never given again (an export may name it)
    assert kept() == second + 1
