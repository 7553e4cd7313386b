"""What the runner reports, shown in the window (no Qt): the job's events, each by its type.

``RunReports.on_event`` dispatches on the event's class; an event type without a handler raises, so a new
event the window does not show fails its tests instead of vanishing. It follows the job as it runs (the run and
member now running, the progress bar); ``RunController`` (lifecycle.py) does what the user asks and starts and
ends the jobs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Hashable, Optional, Sequence

from workbench.config import RunConfig
from workbench.controller import messages
from workbench.controller.jobs import CeilingFailed, CeilingMeasured, CeilingStopped
from workbench.controller.shown_findings import FindingsOf, ShownFindings
from workbench.controller.view import Progress, WindowView
from workbench.engine.events import EpochStats, ProfileSample, RunEnded, RunStarted, StatusChanged, StepStats
from workbench.experiments.events import (
    BatchTrial,
    BestSoFar,
    MemberEnded,
    MemberStarted,
    RecordingFailed,
    RunRecorded,
    SequenceEnded,
    SequenceStarted,
    TrialResult,
    VerifyResult,
)
from workbench.history.naming import run_name
from workbench.history.recorder import BAD_INPUT_KINDS


@dataclass
class _Run:
    """The run the window is showing now (a lone run, or the current member of a sequence)."""

    label: str
    key: Hashable
    config: RunConfig
    history_error: Optional[str] = None
    started: Optional[RunStarted] = None
    skipped_steps: int = 0
    sample_pending: bool = False
    last_window: Optional[StepStats] = None  # the latest log window shown: the next one's ETA takes its pace after it


class RunReports:
    """What the job reports as it runs, shown: the run and the member running now, the progress bar, the sequence's
    own view. RunController starts and ends the jobs (``begin_job``, ``end_job``) and owns this."""

    def __init__(self, view: WindowView, findings: ShownFindings, controls_changed: Callable[[], None]):
        self.view, self.findings, self._update_controls = view, findings, controls_changed
        self.job_kind: Optional[str] = None
        self.sequence: Optional[SequenceStarted] = None
        self.best_config: Optional[RunConfig] = None  # the search's best settings, for "Apply best settings"
        self.run: Optional[_Run] = None  # the run the events now arriving belong to
        self._job_config: Optional[RunConfig] = None
        self._member: Optional[MemberStarted] = None
        self.runs_begun = 0
        self._previous_config: Optional[RunConfig] = None
        self._pending_history_error: Optional[str] = None
        self.busy = False  # the progress bar shows "busy" (a job whose length is not known yet)
        self.progress = Progress(1, 0, "", "idle")  # what the bar shows now

    def begin_job(self, kind: str, config: RunConfig) -> None:
        self.job_kind, self._job_config = kind, config
        self.run = self._member = self.sequence = None
        self._pending_history_error = None
        self.show_progress(Progress(0, 0, "Starting…", "running"))

    def end_job(self) -> None:
        """The training thread has ended: nothing runs, and the bar must not stay busy with nothing running."""
        self.job_kind = None
        self.run = self._member = self.sequence = None
        if self.busy:  # the job ended without saying how
            self.show_progress(Progress(1, 0, "Ended", "stopped"))

    def show_progress(self, progress: Progress) -> None:
        self.busy = progress.maximum == 0
        self.progress = progress
        self.view.show_progress(progress)

    def on_steps(self, steps: Sequence[StepStats]) -> None:
        if not steps:
            return
        run = self.run or self._begin_unnamed()
        run.skipped_steps += sum(stats.skipped_optimizer_steps for stats in steps)
        self.view.draw_steps(steps)
        if self.sequence is not None:
            self.view.draw_sequence_event(steps[-1])
        last = steps[-1]
        previous = steps[-2] if len(steps) > 1 else run.last_window
        run.last_window = last
        ceiling = run.started.ceiling_images_per_sec if run.started is not None else None
        self.show_progress(Progress(max(1, last.total_steps), last.step,
                                    self._prefix() + messages.progress_text(last, ceiling, run.skipped_steps, previous),
                                    "running"))

    @functools.singledispatchmethod
    def on_event(self, event: object) -> None:
        """Each event the job yields, in order, by its type (steps come batched to ``on_steps``)."""
        raise TypeError(f"the window has no handler for {type(event).__name__} events: add one in "
                        "controller/reports.py")

    @on_event.register
    def _(self, event: RunRecorded) -> None:
        self._begin(event.label, event.run_id, self._pending_config(), self._pending_history_error)
        self.view.history_changed()

    @on_event.register
    def _(self, event: RecordingFailed) -> None:
        self._recording_failed(event)

    @on_event.register
    def _(self, event: StatusChanged) -> None:
        self._current_run()
        self.view.show_status(event.message)
        # The bar says what the run is doing where no step moves it (loading, building, compiling, evaluating):
        # "step 0/237" for 12 s read as a hang.
        shown = self.progress
        self.show_progress(Progress(shown.maximum, shown.value, self._prefix() + event.message, "running"))

    @on_event.register
    def _(self, event: RunStarted) -> None:
        self._on_run_started(event)

    @on_event.register
    def _(self, event: EpochStats) -> None:
        self._current_run()
        self.view.draw_epoch(event)
        self.view.show_status(messages.epoch_text(event))

    @on_event.register
    def _(self, event: ProfileSample) -> None:
        run = self._current_run()
        run.sample_pending = False
        self.view.draw_sample(event)
        self.view.show_status(messages.sample_text(event))
        self._update_controls()

    @on_event.register
    def _(self, event: RunEnded) -> None:
        self._on_run_ended(event)

    @on_event.register
    def _(self, event: SequenceStarted) -> None:
        self.sequence = event
        self.view.draw_sequence_event(event)
        self.view.show_status(f"{messages.SEQUENCE_NAMES.get(event.kind, event.kind)} started: {event.name}")

    @on_event.register
    def _(self, event: MemberStarted) -> None:
        self._member = event
        self.view.draw_sequence_event(event)

    @on_event.register
    def _(self, event: SequenceEnded) -> None:
        self._on_sequence_ended(event)

    @on_event.register
    def _(self, event: BestSoFar) -> None:
        self.best_config = event.config  # "Apply best settings" puts it in the form
        self.view.draw_sequence_event(event)

    @on_event.register(MemberEnded)
    @on_event.register(TrialResult)
    @on_event.register(BatchTrial)
    def _(self, event: object) -> None:  # a sequence's members and a search's trials: its view draws them
        self.view.draw_sequence_event(event)

    @on_event.register
    def _(self, event: CeilingMeasured) -> None:
        steady = "steady" if event.steady else "not steady within the time budget"
        later = (f"It was {event.not_kept}: runs will not show their pipeline efficiency against it."
                 if event.not_kept else "Runs with these settings now show their pipeline efficiency.")
        text = (f"Ceiling: {event.images_per_sec:,.0f} images/s for {event.config.model}, batch "
                f"{event.config.batch_size}, {event.config.precision} ({steady}). {later}")
        self.view.show_ceiling(text)
        self.view.show_status(text)
        self.show_progress(Progress(1, 1, "Ceiling measured", "finished"))

    @on_event.register
    def _(self, event: CeilingFailed) -> None:
        self.view.show_ceiling(f"Ceiling not measured: {event.reason}")
        self.view.show_status(f"Ceiling not measured: {event.reason}")
        self.show_progress(Progress(1, 0, "Ceiling not measured", "failed"))

    @on_event.register
    def _(self, event: CeilingStopped) -> None:  # read as a stopped run reads: "Stopped (why)", the bar "stopped"
        text = f"Ceiling not measured: Stopped ({event.reason})."
        self.view.show_ceiling(text)
        self.view.show_status(text)
        self.show_progress(Progress(1, 0, "Ceiling stopped", "stopped"))

    def _recording_failed(self, event: RecordingFailed) -> None:
        if self.run is not None and event.run_id is not None:
            self.run.history_error = event.reason
        else:
            self._pending_history_error = event.reason
        self.view.show_status(f"This run is not being recorded in the history: {event.reason}")

    def _on_run_started(self, event: RunStarted) -> None:
        run = self._current_run()
        run.started = event
        epochs = -(-event.total_steps // max(1, event.steps_per_epoch))  # max_steps may end it early
        self.show_progress(Progress(max(1, event.total_steps), 0,
                                         self._prefix() + f"Epoch 1/{epochs} · step 0/{event.total_steps:,} · "
                                         "first steps (the loader starts, the first batches warm up)…",
                                         "running"))
        self.view.show_status(messages.started_text(event))
        notes = " · ".join(event.notes)
        batch = messages.effective_batch_text(event)
        self.view.show_run_message("running", f"Running {run.label}, {batch}." + (f" Notes: {notes}" if notes else ""))
        self.view.draw_run_started(event)
        if self.sequence is not None:
            self.view.draw_sequence_event(event)
        self._update_controls()

    def _on_run_ended(self, event: RunEnded) -> None:
        run = self._current_run()
        self.run = None
        text = messages.ended_text(event)
        if event.status == "failed" and event.kind in BAD_INPUT_KINDS and run.started is None:
            # Refused before training (the engine's model check; the data as loaded): nothing is recorded, and
            # the form marks the settings the reason names, as it marks what it can tell before Start.
            self.view.mark_refused(run.config, event.reason or "")
        history_note = f" (not recorded in the history: {run.history_error})" if run.history_error else ""
        self.view.show_status(text + history_note)
        maximum = max(1, run.started.total_steps) if run.started is not None else 1
        value = maximum if event.status == "finished" else (event.summary.steps if run.started is not None else 0)
        self.show_progress(Progress(maximum, min(value, maximum), self._prefix() + event.status.capitalize(),
                                         event.status))
        # The verdict says what bounded the run: the one line a user should read first after the figures.
        said = event.summary.verdict or event.summary.no_steady_state_reason  # the latter: why there is no verdict
        verdict = f"\n{said}" if event.status != "failed" and said else ""
        self.view.show_run_message(event.status, text + verdict + history_note,
                                   event.traceback if event.status == "failed" else None)
        self.view.draw_run_ended(event)
        if self.job_kind != "verify":  # a verification's trials leave the verified findings
            self.findings.show(FindingsOf(run.config, event.summary, run.key if isinstance(run.key, int) else None))
        if self.sequence is not None:
            self.view.draw_sequence_event(event)
        self.view.history_changed()
        self._update_controls()

    def _on_sequence_ended(self, event: SequenceEnded) -> None:
        self.view.draw_sequence_event(event)
        if isinstance(event.result, VerifyResult) and self.findings.source is not None:
            self.findings.show(self.findings.source, event.result)
        text = messages.sequence_ended_text(event)
        self.view.show_run_message(event.status, text)
        self.view.show_status(text)
        if event.problems:
            self.show_progress(Progress(1, 0, "Nothing ran", "failed"))
        else:
            self.show_progress(Progress(1, 1 if event.status == "finished" else 0,
                                             f"{messages.SEQUENCE_NAMES.get(event.kind, event.kind)} {event.status}",
                                             event.status))
        self.sequence = None
        self._member = None

    def _begin(self, label: str, key: Hashable, config: RunConfig, history_error: Optional[str]) -> _Run:
        self.runs_begun += 1
        self._previous_config = config
        self._pending_history_error = None
        run = self.run = _Run(label, key, config, history_error)
        self.view.begin_run(label, key)
        self.view.show_run_message("running", f"Running {label}…")
        self.show_progress(Progress(0, 0, self._prefix() + "Starting…", "running"))
        if history_error is None:
            self.view.show_status(f"Starting run {label}…")
        else:
            self.view.show_status(f"This run is not being recorded in the history: {history_error}")
        return run

    def _begin_unnamed(self) -> _Run:
        """A run nothing recorded: named as the history would name it, numbered in this window."""
        config = self._pending_config()
        number = self.runs_begun + 1
        return self._begin(f"#{number} {run_name(config, self._previous_config)}", f"window run {number}", config,
                           self._pending_history_error)

    def _current_run(self) -> _Run:
        """The run the events now arriving belong to (begun unnamed when nothing recorded it)."""
        return self.run or self._begin_unnamed()

    def _pending_config(self) -> RunConfig:
        if self._member is not None:
            return self._member.config
        return self._job_config or self.view.form_config()

    def _prefix(self) -> str:
        member, sequence = self._member, self.sequence
        if member is None or sequence is None:
            return ""
        planned = f"/{sequence.planned_members}" if sequence.planned_members else ""
        return f"Run {member.index + 1}{planned} · "
