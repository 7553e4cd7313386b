"""What the controller asks of a window and of a runner (Protocols; no Qt).

The window (``workbench.gui.main_window``) implements ``WindowView`` with widgets; the tests implement
it with lists. ``Runner`` is the training thread (``workbench.gui.worker.TrainingThread``) or, in tests,
a synchronous stand-in; it reports back through the controller's ``on_steps``/``on_event``/``on_finished``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol, Sequence

from workbench.config import RunConfig
from workbench.controller.controls import Controls
from workbench.controller.driving import Job
from workbench.device_info import DeviceInfo
from workbench.engine.events import EpochStats, ProfileSample, RunEnded, RunStarted, StepStats
from workbench.engine.run_summary import Finding


@dataclass(frozen=True)
class Progress:
    """The progress bar: ``maximum`` 0 is busy (the length is not known yet)."""

    maximum: int
    value: int
    text: str
    status: str  # idle, running, finished, stopped, failed: the bar's colour


class WindowView(Protocol):
    # -- the form -------------------------------------------------------------------------------
    def form_config(self) -> RunConfig: ...
    def form_problems(self) -> list[str]: ...
    def set_form_config(self, config: RunConfig) -> None: ...
    def save_config(self, config: RunConfig) -> None: ...

    # -- words and controls ---------------------------------------------------------------------
    def show_controls(self, controls: Controls) -> None: ...
    def show_status(self, text: str) -> None: ...
    def show_run_message(self, status: str, text: str, details: str | None = None) -> None:
        """The line above the plots; ``details`` (a traceback) is offered to read and copy."""
    def show_progress(self, progress: Progress) -> None: ...
    def show_device(self, device: DeviceInfo) -> None: ...
    def show_ceiling(self, text: str) -> None: ...

    # -- drawing --------------------------------------------------------------------------------
    def begin_run(self, label: str, key: Hashable) -> None: ...
    def draw_run_started(self, event: RunStarted) -> None: ...
    def draw_steps(self, steps: Sequence[StepStats]) -> None: ...
    def draw_epoch(self, stats: EpochStats) -> None: ...
    def draw_sample(self, sample: ProfileSample) -> None: ...
    def draw_findings(self, findings: Sequence[Finding]) -> None: ...
    def draw_run_ended(self, event: RunEnded) -> None: ...
    def draw_sequence_event(self, event: Any) -> None:
        """A sequence's own events (and its members' engine events), for the sequence's view."""
    def mark_release(self, release: Any) -> None: ...
    def mark_refused(self, config: RunConfig, reason: str) -> None:
        """The engine refused ``config`` before training (a model that cannot be built, say): the form marks the
        settings ``reason`` names while it holds that config."""
    def history_changed(self) -> None:
        """A run's record appeared or changed: the Runs tab may read it again."""

    # -- the window -----------------------------------------------------------------------------
    def run_in_background(self, function: Callable[[], Any], done: Callable[[Any], None],
                          failed: Callable[[Exception], None]) -> None:
        """Call ``function`` off the GUI thread; ``done(result)`` or ``failed(error)`` back on it."""
    def close_window(self) -> None: ...


class Runner(Protocol):
    @property
    def running(self) -> bool: ...
    def start_job(self, job: Job) -> None: ...
    def request_stop(self) -> None: ...
    def request_sample(self) -> None: ...
