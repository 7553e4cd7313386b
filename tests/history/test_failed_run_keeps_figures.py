"""A failed run keeps every figure it had, and its traceback (in the history and in failures.log)."""

from builders import started, step

from workbench.config import RunConfig
from workbench.engine.events import EpochStats, MemorySnapshot, RunEnded, StatusChanged
from workbench.engine.run_summary import RunSummary
from workbench.history.failure_log import failure_log_path
from workbench.history.store import HistoryStore

TRACEBACK = 'Traceback (most recent call last):\n  File "trainer.py", line 1, in run\nRuntimeError: boom\n'


def record_until_a_crash(store, ended: RunEnded) -> int:
    config = RunConfig(device="cpu")
    recorder = store.start_run(config, source="gui")
    recorder.record(StatusChanged(message="Loading data…"))
    recorder.record(started(config, total_steps=10))
    for index in range(1, 7):
        recorder.record(step(index, memory=MemorySnapshot(nvml_device_used=5 * 2**30, nvml_process_used=2 * 2**30)))
    recorder.record(EpochStats(epoch=1, epochs=2, step=6, train_loss=1.5, train_accuracy=0.4, test_loss=1.6,
                               test_accuracy=0.37, images_per_sec=990.0, data_wait_fraction=0.25, train_seconds=0.4,
                               eval_seconds=0.1))
    recorder.record(ended)
    return recorder.run_id


def test_a_crash_reported_without_the_runs_figures_does_not_erase_them(tmp_path):
    """What a GUI worker reported for an exception escaping the engine: a RunEnded with an empty summary."""
    empty = RunEnded(status="failed", summary=RunSummary(status="failed", reason="RuntimeError: boom", failure_kind="error"),
                     reason="RuntimeError: boom", kind="error", traceback=TRACEBACK)
    with HistoryStore.open(tmp_path) as store:
        record = store.get_run(record_until_a_crash(store, empty))
    assert (record.status, record.reason, record.failure_kind) == ("failed", "RuntimeError: boom", "error")
    assert record.summary.steps == 6 and record.summary.samples_seen == 6 * 32 and record.summary.epochs_completed == 1
    assert record.summary.final_loss == 2.5 / 6 and record.summary.test_accuracy == 0.37
    assert record.summary.images_per_sec is not None and record.summary.data_wait_fraction is not None
    assert record.summary.peak_nvml_device_used_bytes == 5 * 2**30 and record.summary.peak_nvml_process_used_bytes == 2 * 2**30
    assert record.traceback == TRACEBACK


def test_a_failures_traceback_goes_to_the_log_in_the_workbench_home(tmp_path):
    ended = RunEnded(status="failed", summary=RunSummary(status="failed"), reason="RuntimeError: boom", kind="error", traceback=TRACEBACK)
    with HistoryStore.open(tmp_path) as store:
        run_id = record_until_a_crash(store, ended)
    log = failure_log_path(tmp_path)
    assert log == tmp_path / "logs" / "failures.log"
    text = log.read_text(encoding="utf-8")
    assert f"run #{run_id} (gui) failed [error]: RuntimeError: boom" in text
    assert '"batch_size": 128' in text and TRACEBACK.rstrip() in text


def test_figures_the_engine_sent_win_and_user_errors_have_no_log(tmp_path):
    engine_summary = RunSummary(status="failed", reason="diverged", failure_kind="diverged", final_loss=None, steps=6,
                                samples_seen=192, epochs_completed=1, images_per_sec=1234.0, wall_seconds=9.0)
    ended = RunEnded(status="failed", summary=engine_summary, reason="diverged", kind="diverged")
    with HistoryStore.open(tmp_path) as store:
        record = store.get_run(record_until_a_crash(store, ended))
    assert record.summary.images_per_sec == 1234.0 and record.summary.wall_seconds == 9.0  # the engine's own figures
    assert record.traceback is None and not failure_log_path(tmp_path).exists()
