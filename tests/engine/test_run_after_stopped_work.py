"""A run started while work a stop abandoned still runs in this process (Stop, then Start in the window; the next
trial of a sequence) waits for that work before its own first step, says which it waits for, and a stop during that
wait lands. (A stopped ceiling probe's step in flight, one case of it: test_run_after_a_stopped_probe.py.)

The abandoned phase blocks until the test releases it: the order of things is seen, never timed.
"""

from __future__ import annotations

import threading

import pytest
import torch
from engine_helpers import NextRun, tiny_config
from torch import nn

from workbench.engine import run
from workbench.engine import train_step as train_step_module
from workbench.engine.events import RunEnded, RunStarted, StatusChanged, StepStats
from workbench.engine.interruptible import HelperCall, Stopped, abandoned_phases, wait_for_abandoned
from workbench.engine.requests import StopRequest

HELD_AT_MOST_S = 10.0  # without the fix the phase gives up after this long, and the test fails rather than hang


class HeldPhase:
    """A phase's first call, held until ``released``: ``held`` once it is in it, ``ended`` once it has returned."""

    def __init__(self) -> None:
        self.held, self.released, self.ended = threading.Event(), threading.Event(), threading.Event()
        self._calls = 0

    def hold_the_first_call(self) -> None:
        self._calls += 1
        if self._calls == 1:
            self.held.set()
            self.released.wait(HELD_AT_MOST_S)
            self.ended.set()


def hold_torch_compile(monkeypatch, phase: HeldPhase) -> None:
    class HeldCompilation(nn.Module):
        """What torch.compile returns, its first call (the compiling one) held."""

        def __init__(self, model, **options):
            super().__init__()
            self.model = model

        def forward(self, images):
            phase.hold_the_first_call()
            return self.model(images)

    monkeypatch.setattr(torch, "compile", HeldCompilation)


def hold_the_model_build(monkeypatch, phase: HeldPhase) -> None:
    build = train_step_module.build_model

    def held_build(*args):
        phase.hold_the_first_call()
        return build(*args)

    monkeypatch.setattr(train_step_module, "build_model", held_build)


# (how the phase is held, the run's settings, how the next run names what it waits for)
PHASES = {
    "torch.compile": (hold_torch_compile, dict(compile=True), "a stopped run's torch.compile"),
    "build": (hold_the_model_build, {}, "a stopped run's model build"),
}


def stop_a_run_in(monkeypatch, name: str) -> tuple[HeldPhase, str]:
    """A run stopped while in phase ``name``, which runs on, held: (the phase, the words for it)."""
    hold, settings, words = PHASES[name]
    phase = HeldPhase()
    hold(monkeypatch, phase)
    stop = StopRequest()
    stopper = threading.Thread(target=lambda: phase.held.wait(HELD_AT_MOST_S) and stop.set())
    stopper.start()
    try:
        ended = list(run(tiny_config(**settings), stop))[-1]
    finally:
        stopper.join()
    assert isinstance(ended, RunEnded) and ended.status == "stopped", ended
    assert not phase.ended.is_set() and abandoned_phases() == [name]
    return phase, words


@pytest.fixture(autouse=True)
def no_leftovers():
    yield
    assert wait_for_abandoned(30.0), "abandoned work did not finish"


@pytest.mark.parametrize("name", PHASES)
def test_a_run_started_after_a_stop_mid_phase_takes_its_first_step_once_that_phase_has_ended(monkeypatch, name):
    """The run's first windows (images/s, step times) were timed while the abandoned phase still ran beside them.
    Now the run says what it waits for, and its first step begins only after that phase has ended."""
    phase, words = stop_a_run_in(monkeypatch, name)
    next_run = NextRun(monkeypatch, "Waiting for", phase.ended.is_set)
    try:
        next_run.starts_waiting(HELD_AT_MOST_S, "the stopped run's phase")
    finally:
        phase.released.set()
    next_run.thread.join(60.0)
    assert next_run.observed == [True]
    events = next_run.events
    said = [event.message for event in events if isinstance(event, StatusChanged)][0]
    assert said == f"Waiting for {words} to end (it would share the device with this run's first steps)…"
    assert isinstance(events[-1], RunEnded) and events[-1].status == "finished", events[-1]


def test_a_stop_while_a_run_waits_for_a_stopped_compilation_ends_the_run_with_the_compilation_in_flight(monkeypatch):
    """The wait is bounded by the run's stop: a compilation that never ends must not keep the run from stopping."""
    phase, _ = stop_a_run_in(monkeypatch, "torch.compile")
    stop = StopRequest()
    events: list = []
    try:
        for event in run(tiny_config(), stop):
            events.append(event)
            if isinstance(event, StatusChanged) and event.message.startswith("Waiting for"):
                threading.Thread(target=stop.set).start()  # asked from another thread, as Stop is
        in_flight = not phase.ended.is_set()
    finally:
        phase.released.set()
    assert in_flight, "the run waited for the compilation despite the stop"
    ended = events[-1]
    assert isinstance(ended, RunEnded) and ended.status == "stopped", ended
    assert ended.reason == "stopped by the user while waiting for a stopped run's torch.compile to end"
    assert not any(isinstance(event, (RunStarted, StepStats)) for event in events)


def abandoned_call(name: str, released: threading.Event, ended_by_others: bool = False) -> None:
    call = HelperCall(lambda: released.wait(HELD_AT_MOST_S), name, ended_by_others=ended_by_others)
    asked = iter([False])  # not yet stopped as it starts; stopped at the first poll, which abandons it
    with pytest.raises(Stopped):
        call.wait(lambda: next(asked, True))


def test_a_run_names_every_phase_it_waits_for():
    released = threading.Event()
    try:
        abandoned_call("torch.compile", released)
        abandoned_call("worker start-up", released)
        stop = StopRequest()
        stop.set(by="SIGTERM")
        events = list(run(tiny_config(), stop))
    finally:
        released.set()
    assert [event.message for event in events if isinstance(event, StatusChanged)] == [
        "Waiting for a stopped run's torch.compile and a stopped run's DataLoader worker start-up to end "
        "(they would share the device with this run's first steps)…"]
    assert events[-1].reason == ("stopped by SIGTERM while waiting for a stopped run's torch.compile and a stopped "
                                 "run's DataLoader worker start-up to end")


def test_a_join_only_other_processes_end_is_not_waited_for():
    """Abandoned, joining a multi-process run's group ends only when the others come, or after torch's 30 minutes:
    it shares no device, and a run waiting for it could wait that long."""
    released = threading.Event()
    try:
        abandoned_call("joining the other processes", released, ended_by_others=True)
        events = list(run(tiny_config()))
    finally:
        released.set()
    assert not any(isinstance(event, StatusChanged) and event.message.startswith("Waiting") for event in events)
    assert events[-1].status == "finished", events[-1]


def test_a_probe_started_after_a_stop_mid_phase_takes_its_first_step_once_that_phase_has_ended(monkeypatch):
    """Measure ceiling, clicked right after stopping a compiling run: the probe timed its chunks against the
    abandoned compile on the same cores or GPU, and could cache a ceiling too low. Now it waits, saying so."""
    from stopped_probe import counting_steps

    from workbench.engine import probe_device
    from workbench.engine.ceiling import measure_ceiling

    phase, words = stop_a_run_in(monkeypatch, "torch.compile")
    ended_at_the_first_step: list[bool] = []
    counting_steps(monkeypatch, before_each=lambda steps: steps == [1] and ended_at_the_first_step.append(
        phase.ended.is_set()))
    said: list[str] = []
    waiting = threading.Event()

    def say(message: str) -> None:
        said.append(message)
        if message.startswith("waiting for"):
            waiting.set()

    measured: list = []
    probe = threading.Thread(target=lambda: measured.append(measure_ceiling(
        tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=0.2, progress=say)))
    probe.start()
    try:
        assert waiting.wait(HELD_AT_MOST_S), said
        assert not ended_at_the_first_step  # no step while the compile runs on
    finally:
        phase.released.set()
        probe.join(60.0)
    assert said[0] == f"waiting for {words} to end (it would share the device with the probe's timed steps)…"
    assert ended_at_the_first_step == [True] and measured and measured[0].images_per_sec > 0


def test_a_stop_lands_while_a_probe_waits_for_a_stopped_runs_phase(monkeypatch):
    from workbench.engine import probe_device
    from workbench.engine.ceiling import measure_ceiling
    from workbench.engine.ceiling_cache import ProbeStopped

    phase, words = stop_a_run_in(monkeypatch, "build")
    stop = StopRequest()
    try:
        with pytest.raises(ProbeStopped, match=f"^stopped while waiting for {words} to end$"):
            measure_ceiling(tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=0.2, stop=stop,
                            progress=lambda message: stop.set())  # stopped as it says it waits
        assert not phase.ended.is_set()  # it did not wait for the build
    finally:
        phase.released.set()
