"""The runner's reports reach the window by type: every event a job can yield has its handler, and an event
type without one fails loudly instead of vanishing."""

from __future__ import annotations

import typing

import pytest

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
