"""The runner's reports reach the window by type: every event a job can yield has its handler, and an event
type without one fails loudly instead of vanishing."""

from __future__ import annotations

import typing

import pytest
from builders import make_controller

from workbench.controller.jobs import CeilingFailed, CeilingMeasured, CeilingStopped
from workbench.controller.reports import RunReports
from workbench.engine.events import StepStats
from workbench.experiments.events import AnyEvent, RecordingFailed, RunRecorded

# What a job yields (engine and sequence events), what recording adds, and the ceiling probe's outcome; steps
# arrive batched through on_steps instead.
REPORTED = {*typing.get_args(AnyEvent), RunRecorded, RecordingFailed, CeilingMeasured, CeilingFailed,
            CeilingStopped} - {StepStats}


def handler_for(event_type: type):
    dispatcher = RunReports.__dict__["on_event"].dispatcher
    return dispatcher.dispatch(event_type)


def test_every_event_a_job_yields_has_its_own_handler():
    fallback = handler_for(object)
    missing = sorted(kind.__name__ for kind in REPORTED if handler_for(kind) is fallback)
    assert missing == []


def test_an_event_type_without_a_handler_fails_loudly():
    class SomethingNew:
        pass

    with pytest.raises(TypeError, match="no handler for SomethingNew events"):
        RunReports(view=None, findings=None, controls_changed=lambda: None).on_event(SomethingNew())  # type: ignore[arg-type]


def log_window(step: int, elapsed_seconds: float, window_seconds: float) -> StepStats:
    return StepStats(step=step, total_steps=100, epoch=1, epochs=1, samples_seen=32 * step, loss=1.0, lr=0.1,
                     images_per_sec=1000.0, data_wait_seconds=0.0, device_span_seconds=0.0,
                     window_seconds=window_seconds, elapsed_seconds=elapsed_seconds)


@pytest.mark.parametrize("batched", [False, True])
def test_the_eta_takes_the_latest_windows_pace_once_the_first_window_is_past(batched):
    """At step 5 the bar said "ETA 3:44" with 52 s to go: the mean since the start charged the loader's start and
    the warm-up (the first window) to every step left."""
    controller, view, _, _ = make_controller()
    first = log_window(5, elapsed_seconds=10.0, window_seconds=10.0)  # 8 s of start-up and warm-up in it
    second = log_window(10, elapsed_seconds=11.0, window_seconds=1.0)  # 5 steps a second from here on
    controller.reports.on_steps([first])
    assert "ETA 3:10" in view.progress.text  # only the first window: the mean since the start, 2 s a step
    if batched:  # both windows in one delivery
        controller.reports.begin_job("run", view.config)
        controller.reports.on_steps([first, second])
    else:
        controller.reports.on_steps([second])
    assert "ETA 0:18" in view.progress.text  # 90 steps left at 0.2 s each (the mean since the start: 1:39)
    controller.reports.begin_job("run", view.config)  # the next run starts from no window again
    controller.reports.on_steps([second])
    assert "ETA 1:39" in view.progress.text
