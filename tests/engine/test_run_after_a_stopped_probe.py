"""A run started while a stopped ceiling probe's step in flight runs on (Stop, then Start in the window; the next
trial of a sequence) waits for that step before its own first step, and a stop during that wait lands.

The probe's step blocks until the test releases it (stopped_probe.py): the order of things is seen, never timed.
"""

import threading

import pytest
from engine_helpers import NextRun, tiny_config
from stopped_probe import STEP_BLOCKS_AT_MOST_S, stopped_in_step

from workbench.engine import probe_device, run
from workbench.engine.ceiling import measure_ceiling
from workbench.engine.ceiling_cache import ProbeStopped
from workbench.engine.events import RunEnded, RunStarted, StatusChanged, StepStats
from workbench.engine.interruptible import wait_for_abandoned
from workbench.engine.requests import StopRequest

WAITING = "Waiting for a stopped ceiling probe's last step to end"


def stop_the_probe_in_its_first_step(monkeypatch, probe_steps_ended: list[int]):
    """A probe stopped in its first warm-up step, which blocks until ``released`` is set: (probe steps, released)."""
    steps, stop, stopper, released = stopped_in_step(
        monkeypatch, 1, after_each=lambda steps: probe_steps_ended.append(len(steps)))
    try:
        with pytest.raises(ProbeStopped):
            measure_ceiling(tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=30.0, stop=stop)
    finally:
        stopper.join()
    return steps, released


def test_a_run_started_after_a_stopped_probe_takes_its_first_step_once_the_probes_step_has_ended(monkeypatch):
    """The run's first windows (images/s, step times) were timed on a device the abandoned probe step still
    shared. Now the run says it waits, and its first step begins only after that step has ended."""
    probe_steps_ended: list[int] = []
    next_run = NextRun(monkeypatch, WAITING, lambda: list(probe_steps_ended))
    steps, released = stop_the_probe_in_its_first_step(monkeypatch, probe_steps_ended)
    try:
        next_run.starts_waiting(STEP_BLOCKS_AT_MOST_S, "the stopped probe's step")
    finally:
        released.set()
    next_run.thread.join(60.0)
    assert next_run.observed == [[1]]  # the probe's one step had ended, and it started no other
    assert steps == [1]
    events = next_run.events
    assert isinstance(events[-1], RunEnded) and events[-1].status == "finished", events[-1]
    assert wait_for_abandoned(30.0)


def test_a_stop_while_a_run_waits_for_a_stopped_probes_step_ends_the_run_with_the_step_still_in_flight(monkeypatch):
    """The wait is bounded by the run's stop: a probe step that never ends must not keep the run from stopping."""
    probe_steps_ended: list[int] = []
    _, released = stop_the_probe_in_its_first_step(monkeypatch, probe_steps_ended)
    stop = StopRequest()
    events: list = []
    try:
        for event in run(tiny_config(), stop):
            events.append(event)
            if isinstance(event, StatusChanged) and event.message.startswith(WAITING):
                threading.Thread(target=stop.set).start()  # asked from another thread, as Stop is
        in_flight = probe_steps_ended == []
    finally:
        released.set()
    assert in_flight, "the run waited for the probe's step despite the stop"
    ended = events[-1]
    assert isinstance(ended, RunEnded) and ended.status == "stopped", ended
    assert ended.reason == "stopped by the user while waiting for a stopped ceiling probe's last step to end"
    assert not any(isinstance(event, (RunStarted, StepStats)) for event in events)
    assert wait_for_abandoned(30.0)
