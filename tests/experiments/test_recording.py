"""Recording a run's events in the history while the run goes on (experiments.recording, no Qt)."""

from builders import CPU, ended, implementation_problems, started, tiny

from workbench.engine.events import StatusChanged
from workbench.experiments.events import RecordingFailed
from workbench.experiments.recording import (
    HistoryRecording,
    NoRecording,
    Recorder,
    RecorderFactory,
    open_record,
    record_events,
)
from workbench.history.recorder import RunRecorder


def test_the_recorders_take_every_call_their_protocols_allow():
    """What the tests' ListRecording and ListRecorder are held to (builders.ProtocolFake), the real ones implement;
    ``close``, which the jobs look up beside the Protocol, too."""
    assert implementation_problems(RunRecorder, Recorder) == []
    assert implementation_problems(HistoryRecording, RecorderFactory) == []
    assert implementation_problems(NoRecording, RecorderFactory) == []
    assert callable(HistoryRecording.close) and callable(NoRecording.close)


def test_a_recorder_that_fails_mid_run_ends_its_record_and_the_run_goes_on(isolated_workbench_home):
    config = tiny()
    events = [StatusChanged(message="Loading data…"), started(config, CPU), StatusChanged(message="Evaluating…"), ended("finished")]
    with HistoryRecording() as recording:
        recorder, problem = open_record(recording, config, None, None)
        real_record = recorder.record

        def record(event):
            if isinstance(event, StatusChanged) and event.message == "Evaluating…":
                raise OSError("disk full")  # once: the history takes writes again after it
            real_record(event)

        recorder.record = record
        passed = list(record_events(iter(events), recorder, problem))
        [run] = recording.store.list_runs()
    assert [type(event).__name__ for event in passed].count("RecordingFailed") == 1
    assert passed[-1] == events[-1]  # the run went on to its end
    failed = next(event for event in passed if isinstance(event, RecordingFailed))
    assert failed.reason == "OSError: disk full"
    # Not left "running" for as long as the process lives (nor refused deletion as a live run).
    assert run.status == "failed"
    assert "the history stopped taking this run (OSError: disk full)" in run.reason
