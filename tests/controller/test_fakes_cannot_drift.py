"""The controller's fakes stand in for its Protocols and for nothing more (issue 19 §6): a call the window, the
runner or the recording does not take fails here as it would against the real one, instead of passing unseen."""

from __future__ import annotations

import inspect
from types import FunctionType

import pytest

from builders import (
    TINY_RUN,
    FakeView,
    InPlaceRunner,
    ListRecorder,
    ListRecording,
    ProtocolFake,
    fake_problems,
    for_tests,
    make_controller,
    protocol_members,
    step,
)
from workbench.controller.view import Runner, WindowView
from workbench.experiments.recording import Recorder


@pytest.mark.parametrize("name", ["draw_everything", "save_settings", "mark_done", "show_device_panel",
                                  "history_reloaded", "begin_sequence"])
def test_the_fake_view_refuses_a_method_the_window_view_has_not(name):
    """``save_settings`` is MainWindow's own (Qt calls it), never the controller's: the fake must not take it."""
    view = FakeView()
    assert not hasattr(WindowView, name)
    with pytest.raises(AttributeError, match=f"WindowView has no method '{name}'"):
        getattr(view, name)(TINY_RUN)
    assert view.calls == []


@pytest.mark.parametrize("call", [
    lambda view: view.draw_steps(),  # its steps left out
    lambda view: view.draw_steps([step(1)], [step(2)]),
    lambda view: view.begin_run("#1 synthetic"),  # no key
    lambda view: view.mark_refused(TINY_RUN),  # no reason
    lambda view: view.draw_run_ended(ended=None),  # a name the method has not
    lambda view: view.history_changed(1),
    lambda view: view.show_run_message("failed", "Run failed", "trace", "more"),
    lambda view: view.run_in_background(lambda: 1, print),  # no failed
], ids=["draw_steps()", "draw_steps(a, b)", "begin_run(label)", "mark_refused(config)", "draw_run_ended(ended=)",
        "history_changed(1)", "show_run_message(4 args)", "run_in_background(2 args)"])
def test_the_fake_view_refuses_a_call_the_window_view_would_not_take(call):
    view = FakeView()
    with pytest.raises(TypeError):
        call(view)
    assert view.calls == []


def test_the_fake_view_keeps_each_call_bound_to_the_members_names():
    view = FakeView()
    view.begin_run(label="#1 synthetic", key=1)  # by name, as the controller may call it
    view.begin_run("#2 synthetic", 2)
    view.history_changed()
    view.show_status("Ready")
    assert view.calls.named("begin_run") == [("#1 synthetic", 1), ("#2 synthetic", 2)]
    assert view.calls.named("history_changed") == [()]
    assert view.calls[-1] == ("show_status", "Ready") and view.status == "Ready"


def test_every_method_the_fakes_answer_is_a_member_of_their_protocol():
    view, runner, recording = FakeView(), InPlaceRunner(), ListRecording()
    recorder = recording.start_run(TINY_RUN, "run", None)
    for fake, protocol in ((view, WindowView), (runner, Runner), (recording, ListRecording._protocol),
                           (recorder, Recorder)):
        methods = {name for name in dir(type(fake)) if not name.startswith("_")
                   and isinstance(inspect.getattr_static(type(fake), name), (FunctionType, property))}
        handles = {name for name in methods if getattr(getattr(type(fake), name), "for_tests", False)}
        assert methods - handles - {"close"} <= set(protocol_members(protocol)), type(fake).__name__
        # What it leaves out is answered (kept in its calls), as the Protocol's signature allows.
        assert all(callable(getattr(fake, name)) for name, member in protocol_members(protocol).items()
                   if inspect.isfunction(member)), type(fake).__name__
        # The Protocol's attributes are there too (a Recorder's run_id, label, discarded).
        assert all(hasattr(fake, name) for name in protocol_members(protocol)), type(fake).__name__
    assert recording.close.__func__ is ListRecording.close  # named as the jobs look it up: getattr(..., "close")


def test_a_fake_whose_methods_differ_from_its_protocol_is_refused_when_made():
    with pytest.raises(TypeError) as refused:
        class Drifted(ProtocolFake, protocol=WindowView):
            def show_status(self, words: str) -> None: ...  # renamed parameter
            def show_run_message(self, status, text, details) -> None: ...  # its default dropped
            def draw_everything(self) -> None: ...  # no member

    said = str(refused.value)
    assert "Drifted is no fake of WindowView" in said
    assert "show_status takes (words), not (text)" in said
    assert "show_run_message takes (status, text, details), not (status, text, details=…)" in said
    assert "draw_everything: no member of WindowView" in said

    class NoRunning:
        def start_job(self, job) -> None: ...
        def request_stop(self) -> None: ...
        def request_sample(self) -> None: ...

    assert fake_problems(NoRunning, Runner) == ["running: a property of Runner it does not define"]


def test_the_runners_test_handle_is_refused_to_the_package():
    """``finish`` drives the job for the test; the controller calling it would be a call TrainingThread refuses."""
    controller, view, runner, _ = make_controller()
    controller.start_run()
    namespace = {"__name__": "workbench.controller.lifecycle", "runner": runner}
    exec("def from_the_package():\n    runner.finish()\n", namespace)
    with pytest.raises(AttributeError, match="workbench.controller.lifecycle called InPlaceRunner.finish"):
        namespace["from_the_package"]()
    runner.finish()  # the test's own call
    assert view.message[0] == "finished"

    class Handled(ProtocolFake, protocol=Runner):
        running = property(lambda self: False)

        def start_job(self, job) -> None: ...
        def request_stop(self) -> None: ...
        def request_sample(self) -> None: ...

        @for_tests
        def step_once(self) -> None: ...

    Handled().step_once()


def test_the_recording_fakes_refuse_what_their_protocols_do_not_take():
    recording = ListRecording()
    with pytest.raises(AttributeError):
        recording.open_store()
    with pytest.raises(TypeError):
        recording.start_run(TINY_RUN, "run")  # no sequence id
    recorder = recording.start_run(TINY_RUN, "run", None)
    with pytest.raises(TypeError):
        recorder.record()
    with pytest.raises(TypeError):
        recorder.fail("why", "error", None, "extra")
    assert isinstance(recorder, ListRecorder) and recorder.events == []
