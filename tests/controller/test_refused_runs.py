"""A run the engine refuses before training (a model spec that gives no model, data that cannot load): the
window says the one-line reason, marks the settings it names, and nothing is recorded (issue 21 §2)."""

from __future__ import annotations

from builders import make_controller

from workbench.engine.events import RunEnded, StatusChanged
from workbench.engine.run_summary import RunSummary

REASON = "model mymodels:raises: raises(num_classes=10) raised ValueError: width must be even"


def refused(config, stop):
    yield StatusChanged(message="Building the model…")
    yield RunEnded(status="failed", summary=RunSummary(status="failed", reason=REASON, failure_kind="config"),
                   reason=REASON, kind="config")


def crashed(config, stop):
    yield StatusChanged(message="Building the model…")
    yield RunEnded(status="failed", summary=RunSummary(status="failed", reason="boom", failure_kind="error"),
                   reason="boom", kind="error")


def test_a_refused_run_marks_the_settings_its_reason_names_and_is_not_recorded():
    controller, view, runner, recording = make_controller(run_function=refused)
    config = view.config.replace(model="mymodels:raises")
    view.config = config
    controller.start_run()
    runner.finish()
    assert view.calls.named("mark_refused") == [(config, REASON)]
    assert view.message[0] == "failed" and view.message[1] == f"Run failed: {REASON}"
    (recorder,) = recording.recorders
    assert isinstance(recorder.events[-1], RunEnded)  # the history's recorder drops a run refused before it started
    assert view.controls.start.enabled  # the fix may be in the user's module: Start again as it is


def test_a_run_that_failed_otherwise_marks_nothing():
    controller, view, runner, _ = make_controller(run_function=crashed)
    controller.start_run()
    runner.finish()
    assert view.calls.named("mark_refused") == [] and view.message[1] == "Run failed: boom"
