"""What the runner reports, shown in the window (no Qt): the job's events, each by its type.

``RunReports.on_event`` dispatches on the event's class; an event type without a handler raises, so a new
event the window does not show fails its tests instead of vanishing. ``RunController`` (lifecycle.py) is
a RunReports: the reports and the user's actions share one state (the job, the run shown, the controls).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Hashable, Optional, Sequence

from workbench.config import RunConfig
from workbench.controller import messages
from workbench.controller.jobs import CeilingFailed, CeilingMeasured, Recordings
from workbench.controller.shown_findings import FindingsOf, either, read_measured_changes, verified_lookup
from workbench.controller.driving import Job
from workbench.controller.view import Progress, WindowView
from workbench.engine.events import EpochStats, ProfileSample, RunEnded, RunStarted, StatusChanged, StepStats
from workbench.engine.findings import with_measured_changes
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
from workbench.history.measured_changes import lookup
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


class RunReports:
    """The handlers of the runner's reports; RunController holds the state they read and change."""

    # The state the reports share with the user's actions (set in RunController.__init__).
    view: WindowView
    job: Optional[Job]
    sequence: Optional[SequenceStarted]
    best_config: Optional[RunConfig]
    _job_config: Optional[RunConfig]
    _runs_begun: int
    _previous_config: Optional[RunConfig]
    _run: Optional[_Run]
    _member: Optional[MemberStarted]
    _pending_history_error: Optional[str]
    recordings: Recordings
    findings_of: Optional[FindingsOf]  # the run whose findings the GPU time tab shows
    _findings_drawn: int  # counts the draws: a history read that comes back after a newer draw is dropped

    def _update_controls(self) -> None:  # RunController's
        raise NotImplementedError

    def _show_progress(self, progress: Progress) -> None:  # RunController's
        raise NotImplementedError

    _progress: Progress  # RunController's: what the bar shows now

    def on_steps(self, steps: Sequence[StepStats]) -> None:
        if not steps:
            return
        run = self._run or self._begin_unnamed()
        run.skipped_steps += sum(stats.skipped_optimizer_steps for stats in steps)
        self.view.draw_steps(steps)
        if self.sequence is not None:
            self.view.draw_sequence_event(steps[-1])
        last = steps[-1]
        ceiling = run.started.ceiling_images_per_sec if run.started is not None else None
        self._show_progress(Progress(max(1, last.total_steps), last.step,
                                         self._prefix() + messages.progress_text(last, ceiling, run.skipped_steps),
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
        shown = self._progress
        self._show_progress(Progress(shown.maximum, shown.value, self._prefix() + event.message, "running"))

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
        text = (f"Ceiling: {event.images_per_sec:,.0f} images/s for {event.config.model}, batch "
                f"{event.config.batch_size}, {event.config.precision} ({steady}). Runs with these settings now "
                "show their pipeline efficiency.")
        self.view.show_ceiling(text)
        self.view.show_status(text)
        self._show_progress(Progress(1, 1, "Ceiling measured", "finished"))

    @on_event.register
    def _(self, event: CeilingFailed) -> None:
        self.view.show_ceiling(f"Ceiling not measured: {event.reason}")
        self.view.show_status(f"Ceiling not measured: {event.reason}")
        self._show_progress(Progress(1, 0, "Ceiling not measured", "failed"))

    def _recording_failed(self, event: RecordingFailed) -> None:
        if self._run is not None and event.run_id is not None:
            self._run.history_error = event.reason
        else:
            self._pending_history_error = event.reason
        self.view.show_status(f"This run is not being recorded in the history: {event.reason}")

    def _on_run_started(self, event: RunStarted) -> None:
        run = self._current_run()
        run.started = event
        epochs = -(-event.total_steps // max(1, event.steps_per_epoch))  # max_steps may end it early
        self._show_progress(Progress(max(1, event.total_steps), 0,
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
        self._run = None
        text = messages.ended_text(event)
        if event.status == "failed" and event.kind in BAD_INPUT_KINDS and run.started is None:
            # Refused before training (the engine's model check; the data as loaded): nothing is recorded, and
            # the form marks the settings the reason names, as it marks what it can tell before Start.
            self.view.mark_refused(run.config, event.reason or "")
        history_note = f" (not recorded in the history: {run.history_error})" if run.history_error else ""
        self.view.show_status(text + history_note)
        maximum = max(1, run.started.total_steps) if run.started is not None else 1
        value = maximum if event.status == "finished" else (event.summary.steps if run.started is not None else 0)
        self._show_progress(Progress(maximum, min(value, maximum), self._prefix() + event.status.capitalize(),
                                         event.status))
        # The verdict says what bounded the run: the one line a user should read first after the figures.
        verdict = f"\n{event.summary.verdict}" if event.status != "failed" and event.summary.verdict else ""
        self.view.show_run_message(event.status, text + verdict + history_note,
                                   event.traceback if event.status == "failed" else None)
        self.view.draw_run_ended(event)
        if self.job is None or self.job.kind != "verify":  # a verification's trials leave the verified findings
            self._show_findings(FindingsOf(run.config, event.summary, run.key if isinstance(run.key, int) else None))
        if self.sequence is not None:
            self.view.draw_sequence_event(event)
        self.view.history_changed()
        self._update_controls()

    def _on_sequence_ended(self, event: SequenceEnded) -> None:
        self.view.draw_sequence_event(event)
        if isinstance(event.result, VerifyResult) and self.findings_of is not None:
            self._show_findings(self.findings_of, event.result)
        text = messages.sequence_ended_text(event)
        self.view.show_run_message(event.status, text)
        self.view.show_status(text)
        if event.problems:
            self._show_progress(Progress(1, 0, "Nothing ran", "failed"))
        else:
            self._show_progress(Progress(1, 1 if event.status == "finished" else 0,
                                             f"{messages.SEQUENCE_NAMES.get(event.kind, event.kind)} {event.status}",
                                             event.status))
        self.sequence = None
        self._member = None

    def _show_findings(self, source: FindingsOf, verified: Optional[VerifyResult] = None) -> None:
        """Draw ``source``'s findings with what a verification just measured, then, read off the GUI thread,
        with what the history holds for them."""
        self.findings_of = source
        self._findings_drawn += 1
        drawn = self._findings_drawn
        just_measured = verified_lookup(verified)
        self.view.draw_findings(with_measured_changes(source.findings, just_measured))
        if not source.measurable:
            return

        def read_back(changes: list) -> None:
            if drawn == self._findings_drawn:  # nothing newer was drawn meanwhile
                self.view.draw_findings(with_measured_changes(source.findings, either(just_measured, lookup(changes))))

        # A history that cannot be read leaves the findings as drawn (what a verification just measured included).
        self.view.run_in_background(lambda: read_measured_changes(self.recordings, source), read_back,
                                    lambda error: None)

    def _begin(self, label: str, key: Hashable, config: RunConfig, history_error: Optional[str]) -> _Run:
        self._runs_begun += 1
        self._previous_config = config
        self._pending_history_error = None
        run = self._run = _Run(label, key, config, history_error)
        self.view.begin_run(label, key)
        self.view.show_run_message("running", f"Running {label}…")
        self._show_progress(Progress(0, 0, self._prefix() + "Starting…", "running"))
        if history_error is None:
            self.view.show_status(f"Starting run {label}…")
        else:
            self.view.show_status(f"This run is not being recorded in the history: {history_error}")
        return run

    def _begin_unnamed(self) -> _Run:
        """A run nothing recorded: named as the history would name it, numbered in this window."""
        config = self._pending_config()
        number = self._runs_begun + 1
        return self._begin(f"#{number} {run_name(config, self._previous_config)}", f"window run {number}", config,
                           self._pending_history_error)

    def _current_run(self) -> _Run:
        """The run the events now arriving belong to (begun unnamed when nothing recorded it)."""
        return self._run or self._begin_unnamed()

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
