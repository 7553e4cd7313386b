"""The window and the training thread are what the controller's Protocols say (issue 19 §6): every member of
WindowView on MainWindow and of Runner on TrainingThread, taking every call the Protocol allows (parameters by
name and kind, a default where the Protocol has one). With the fakes held to the same Protocols
(tests/controller/test_fakes_cannot_drift.py), a call the tests make through a fake is one the window takes.
Classes only: no window is made."""

from __future__ import annotations

import pytest

from builders import implementation_problems, protocol_members
from workbench.controller.view import Runner, WindowView
from workbench.gui.main_window import MainWindow
from workbench.gui.worker import TrainingThread


def test_the_main_window_implements_every_window_view_member_as_the_controller_calls_it():
    assert implementation_problems(MainWindow, WindowView) == []


def test_the_training_thread_is_a_runner():
    assert implementation_problems(TrainingThread, Runner) == []


@pytest.mark.parametrize("name", sorted(protocol_members(WindowView)))
def test_a_main_window_without_one_member_fails_the_check(name):
    stripped = type("StrippedWindow", (MainWindow,), {name: None})  # as if the method were deleted
    assert implementation_problems(stripped, WindowView) == [f"StrippedWindow.{name}: no method"]


def test_the_check_finds_each_way_a_method_stops_taking_the_calls():
    class Window:
        def form_config(self, fresh): ...  # a parameter no caller passes
        def show_status(self, words: str) -> None: ...  # renamed
        def show_run_message(self, status, text, details) -> None: ...  # its default dropped
        def begin_run(self, key, label) -> None: ...  # swapped
        def draw_steps(self, *, steps) -> None: ...  # keyword-only
        def save_config(self, config, now=False) -> None: ...  # an extra with a default: every call still taken
        running = property(lambda self: True)

    problems = implementation_problems(Window, WindowView)
    assert "Window.form_config needs 'fresh', which no caller passes" in problems
    assert "Window.show_status has no parameter 'text'" in problems
    assert "Window.show_run_message needs 'details', which may be left out" in problems
    assert "Window.begin_run takes 'label' at position 2, not 1" in problems
    assert "Window.draw_steps takes 'steps' as keyword-only, not positional or keyword" in problems
    assert "Window.draw_epoch: no method" in problems
    assert not [problem for problem in problems if problem.startswith("Window.save_config")]
    assert implementation_problems(type("NoProperty", (), {"running": True, "start_job": lambda self, job: None,
                                                           "request_stop": lambda self: None,
                                                           "request_sample": lambda self: None}), Runner) == [
        "NoProperty.running: no property"]
