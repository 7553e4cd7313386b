"""TrainingThread / RunWorker: events cross threads in order, steps are batched, stop works, errors surface."""

import threading

import pytest
from builders import TINY_RUN, FakeRun

from workbench.engine.events import EpochStats, RunEnded, RunStarted, StatusChanged, StepStats
from workbench.gui.worker import TrainingThread


class Recorder:
    """Connects to every session signal and keeps what arrived (on the GUI thread), in order."""

    def __init__(self, session: TrainingThread):
        self.events: list = []
        self.step_batches: list[list[StepStats]] = []
        self.threads: set = set()
        session.event.connect(self._add)
        session.steps.connect(self._add_steps)

    def _add(self, event) -> None:
        self.threads.add(threading.get_ident())
        self.events.append(event)

    def _add_steps(self, steps) -> None:
        self.threads.add(threading.get_ident())
        self.step_batches.append(list(steps))
        self.events.extend(steps)

    def ends(self) -> list[RunEnded]:
        return [event for event in self.events if isinstance(event, RunEnded)]


@pytest.fixture
def session(qtbot):
    sessions = []

    def make(run_function, **kwargs):
        made = TrainingThread(run_function, **kwargs)
        sessions.append(made)
        return made

    yield make
    for made in sessions:
        made.request_stop()
        assert made.wait(10_000)
        qtbot.waitUntil(lambda made=made: not made.running)


def run_to_end(qtbot, session: TrainingThread, timeout_ms: int = 10_000) -> None:
    with qtbot.waitSignal(session.finished, timeout=timeout_ms):
        session.start(TINY_RUN)


def test_events_arrive_on_the_gui_thread_in_order_with_steps_batched(qtbot, session):
    fake = FakeRun(steps=400)
    made = session(fake)
    recorder = Recorder(made)
    run_to_end(qtbot, made)
    kinds = [type(event) for event in recorder.events]
    assert kinds[:2] == [StatusChanged, RunStarted]
    assert kinds[2:402] == [StepStats] * 400
    assert kinds[402:] == [EpochStats, RunEnded]
    assert [event.step for event in recorder.events[2:402]] == list(range(1, 401))
    assert len(recorder.step_batches) < 20  # 400 fast steps arrive as a few lists, not 400 signals
    assert recorder.threads == {threading.get_ident()}
    assert recorder.ends()[0].status == "finished"
    assert fake.closed and not made.running


def test_exception_in_the_generator_becomes_a_failed_run(qtbot, session):
    fake = FakeRun(steps=10, raise_at=4)
    made = session(fake)
    recorder = Recorder(made)
    run_to_end(qtbot, made)
    (ended,) = recorder.ends()
    assert ended.status == "failed" and ended.kind == "error"
    assert ended.reason == "RuntimeError: boom at step 4"
    assert ended.summary.status == "failed" and ended.summary.reason == ended.reason
    assert [event.step for event in recorder.events if isinstance(event, StepStats)] == [1, 2, 3]
    assert fake.closed
    # The failed run keeps what it measured before the exception, and the traceback says where it came from.
    assert ended.summary.steps == 3 and ended.summary.samples_seen == 3 * 32
    assert ended.summary.final_loss == 2.5 / 3 and ended.summary.images_per_sec is not None  # builders.step's loss
    assert ended.traceback.startswith("Traceback (most recent call last):")
    assert "raise RuntimeError(f\"boom at step {index}\")" in ended.traceback  # FakeRun's line
    assert ended.traceback.rstrip().endswith("RuntimeError: boom at step 4")


def test_exception_calling_the_run_function_becomes_a_failed_run(qtbot, session):
    def broken(config, stop):
        raise ImportError("no module named torch")

    made = session(broken)
    recorder = Recorder(made)
    run_to_end(qtbot, made)
    assert [(event.status, event.reason) for event in recorder.ends()] == [
        ("failed", "ImportError: no module named torch")]


def test_a_run_that_never_says_how_it_ended_is_reported_as_failed(qtbot, session):
    made = session(FakeRun(steps=3, end=False))
    recorder = Recorder(made)
    run_to_end(qtbot, made)
    (ended,) = recorder.ends()
    assert ended.status == "failed" and "without saying how the run ended" in ended.reason


def test_stop_ends_the_run_promptly_and_closes_the_generator(qtbot, session):
    fake = FakeRun(steps=100_000, step_seconds=0.002)
    made = session(fake)
    recorder = Recorder(made)
    with qtbot.waitSignal(made.steps, timeout=10_000):
        made.start(TINY_RUN)
    # Unstopped, the fake would step for 200 s: finishing within the 30 s allowed (a loaded machine's margin) is
    # the stop's doing.
    with qtbot.waitSignal(made.finished, timeout=30_000):
        made.request_stop()
    assert recorder.ends()[0].status == "stopped"
    assert fake.closed


def test_one_run_at_a_time(qtbot, session):
    made = session(FakeRun(steps=100_000, step_seconds=0.002))
    made.start(TINY_RUN)
    with pytest.raises(RuntimeError, match="already in progress"):
        made.start(TINY_RUN)
