"""The window's run lifecycle in one place (no Qt): start, stop, sequences of runs, recording, the release
policy, Apply, the ceiling probe, closing mid-run.

One job at a time runs on the runner's training thread: a lone run, or a whole sweep / search /
largest-batch search as ONE generator, so Stop ends all of it. Every run (lone or a member) is
recorded on that thread as the CLI records one; the window learns each run's history name from the
``RunRecorded`` it yields, and names a run itself only when nothing records it. What the window
shows is decided here and handed to the view; what the user does comes back as method calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Optional, Sequence

from workbench.config import RunConfig
from workbench.controller import messages
from workbench.controller.controls import Controls, WindowState, controls_for
from workbench.controller.driving import Job
from workbench.controller.jobs import (
    CeilingFailed,
    CeilingMeasured,
    MeasureCeiling,
    Probe,
    Recordings,
    RunFunction,
    ceiling_job,
    max_batch_job,
    no_recording,
    run_job,
    sweep_job,
    tune_job,
)
from workbench.controller.view import Progress, Runner, WindowView
from workbench.device_info import DeviceInfo
from workbench.engine.events import (
    EpochStats,
    MemoryRelease,
    ProfileSample,
    RunEnded,
    RunStarted,
    StatusChanged,
    StepStats,
)
from workbench.experiments.events import (
    BestSoFar,
    MemberStarted,
    RecordingFailed,
    RunRecorded,
    SequenceEnded,
    SequenceStarted,
)
from workbench.experiments.max_batch import MaxBatchPlan
from workbench.experiments.sweep import SweepAxis, SweepPlan
from workbench.experiments.tune import TunePlan
from workbench.history.naming import run_name

READY = "Ready. Set the knobs and press Start."


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


class RunController:
    def __init__(
        self,
        view: WindowView,
        runner: Runner,
        run_function: RunFunction,
        recordings: Optional[Recordings] = None,
        probe: Optional[Probe] = None,
        release: Optional[Callable[[], MemoryRelease]] = None,
        measure_ceiling: Optional[MeasureCeiling] = None,
    ):
        self.view, self.runner = view, runner
        self.run_function = run_function
        self.recordings: Recordings = recordings or no_recording
        self.probe = probe
        self.release_function = release
        self.measure_ceiling_function = measure_ceiling
        self.device: Optional[DeviceInfo] = None
        self.job: Optional[Job] = None
        self.sequence: Optional[SequenceStarted] = None
        self.best_config: Optional[RunConfig] = None  # the search's best settings, for "Apply best settings"
        self._job_config: Optional[RunConfig] = None
        self._stopping = False
        self._closing = False
        self._releasing = False
        self._release_outcome = ""
        self._runs_begun = 0
        self._previous_config: Optional[RunConfig] = None
        self._run: Optional[_Run] = None
        self._member: Optional[MemberStarted] = None
        self._pending_history_error: Optional[str] = None
        self._shown_controls: Optional[Controls] = None
        self._busy = False  # the progress bar shows "busy" (a job whose length is not known yet)

    # == what the user does =====================================================================
    @property
    def running(self) -> bool:
        return self.job is not None

    def start_run(self) -> None:
        if self.running or self.view.form_problems():
            return
        config = self.view.form_config()
        self._start(run_job(config, self.run_function, self.recordings), config)

    def start_sweep(self, axes: Sequence[SweepAxis], length: Optional[dict[str, Any]] = None, name: str = "") -> None:
        """A sweep from the form's settings: ``axes`` the settings varied, ``length`` e.g. {"max_steps": 40}."""
        if self.running or self.view.form_problems():
            return
        base = self.view.form_config().replace(**(length or {}))
        plan = SweepPlan(base, tuple(axes), name)
        self._start(sweep_job(plan, self.run_function, self.recordings, self._probe()), base)

    def start_tune(self, allow: frozenset[str] = frozenset(), budget_seconds: Optional[float] = None,
                   trial_steps: Optional[int] = None) -> None:
        if self.running or self.view.form_problems():
            return
        base = self.view.form_config()
        plan = TunePlan(base, allow=allow, budget_seconds=budget_seconds, trial_steps=trial_steps)
        self.best_config = None
        self._start(tune_job(plan, self.run_function, self.recordings, self._probe()), base)

    def start_max_batch(self, memory_budget_bytes: Optional[int] = None, steps_per_trial: int = 5) -> None:
        action = self.controls().max_batch
        if not action.enabled:
            self.view.show_status(action.tooltip)  # refused, visibly: the reason, not silence
            return
        base = self.view.form_config()
        plan = MaxBatchPlan(base, memory_budget_bytes=memory_budget_bytes, steps_per_trial=steps_per_trial)
        self._start(max_batch_job(plan, self.run_function, self.recordings, self._probe()), base)

    def measure_ceiling(self) -> None:
        action = self.controls().ceiling
        if not action.enabled or self.measure_ceiling_function is None:
            self.view.show_status(action.tooltip)
            return
        config = self.view.form_config()
        self.view.show_ceiling(f"Measuring the ceiling of {config.model} (batch {config.batch_size}, "
                               f"{config.precision})…")
        self._start(ceiling_job(config, self.measure_ceiling_function), config)

    def stop(self) -> None:
        if self.running and not self._stopping:
            self._stopping = True
            self.runner.request_stop()
            what = "run" if self.job is not None and self.job.lone_run else messages.SEQUENCE_NAMES.get(
                self.job.kind if self.job else "", "job").lower()
            self.view.show_status(f"Stopping the {what} after the current step…")
            self._update_controls()

    def request_sample(self) -> None:
        if not self.controls().sample_now.enabled or self._run is None:
            return
        self._run.sample_pending = True
        self.runner.request_sample()
        self.view.show_status("A profiler sample was asked for: it comes within a few steps (GPU time tab).")
        self._update_controls()

    def apply_setting(self, field: str, value: Any) -> None:
        """A finding's Apply: set one setting in the form (never during a run: the form is locked)."""
        if self.running:
            self.view.show_status("Stop the current run before applying a setting.")
            return
        self.view.set_form_config(self.view.form_config().replace(**{field: value}))
        self.view.show_status(f"Applied {field}={value} to the settings: press Start to try it.")

    def apply_best(self) -> None:
        """Put the search's best settings into the form."""
        if self.best_config is None:
            return
        if self.running:
            self.view.show_status("Stop the current run before applying settings.")
            return
        self.view.set_form_config(self.best_config)
        self.view.show_status("Applied the fastest settings found: press Start to train with them.")

    def load_settings(self, config: RunConfig) -> None:
        """Fill the form with a run's settings (from the history); refused while a run is going."""
        if self.running:
            self.view.show_status("Stop the current run before loading other settings.")
            return
        self.view.set_form_config(config)
        self.view.show_status("Settings loaded: press Start to rerun them.")

    def release_memory(self) -> None:
        if not self.controls().release.enabled or self.release_function is None:
            return
        self._releasing = True
        self._update_controls()
        self.view.run_in_background(self.release_function, self._on_released, self._on_release_failed)

    def request_close(self) -> bool:
        """True: the window may close now. False: a job runs; it is stopped and the window closes after it."""
        if not self.running:
            return True
        self._closing = True
        self.runner.request_stop()
        self.view.show_status("Stopping the run before closing…")
        self._update_controls()
        return False

    def config_changed(self) -> None:
        self._update_controls()

    def device_known(self, device: DeviceInfo) -> None:
        self.device = device
        self.view.show_device(device)
        self._update_controls()

    # == what the runner reports ================================================================
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

    def on_event(self, event: Any) -> None:
        if isinstance(event, RunRecorded):
            self._begin(event.label, event.run_id, self._pending_config(), self._pending_history_error)
            self.view.history_changed()
        elif isinstance(event, RecordingFailed):
            self._recording_failed(event)
        elif isinstance(event, StatusChanged):
            self._current_run()
            self.view.show_status(event.message)
        elif isinstance(event, RunStarted):
            self._on_run_started(event)
        elif isinstance(event, EpochStats):
            self._current_run()
            self.view.draw_epoch(event)
            self.view.show_status(messages.epoch_text(event))
        elif isinstance(event, ProfileSample):
            run = self._current_run()
            run.sample_pending = False
            self.view.draw_sample(event)
            self.view.show_status(messages.sample_text(event))
            self._update_controls()
        elif isinstance(event, RunEnded):
            self._on_run_ended(event)
        elif isinstance(event, SequenceStarted):
            self.sequence = event
            self.view.draw_sequence_event(event)
            self.view.show_status(f"{messages.SEQUENCE_NAMES.get(event.kind, event.kind)} started: {event.name}")
        elif isinstance(event, MemberStarted):
            self._member = event
            self.view.draw_sequence_event(event)
        elif isinstance(event, SequenceEnded):
            self._on_sequence_ended(event)
        elif isinstance(event, CeilingMeasured):
            steady = "steady" if event.steady else "not steady within the time budget"
            text = (f"Ceiling: {event.images_per_sec:,.0f} images/s for {event.config.model}, batch "
                    f"{event.config.batch_size}, {event.config.precision} ({steady}). Runs with these settings now "
                    "show their pipeline efficiency.")
            self.view.show_ceiling(text)
            self.view.show_status(text)
            self._show_progress(Progress(1, 1, "Ceiling measured", "finished"))
        elif isinstance(event, CeilingFailed):
            self.view.show_ceiling(f"Ceiling not measured: {event.reason}")
            self.view.show_status(f"Ceiling not measured: {event.reason}")
            self._show_progress(Progress(1, 0, "Ceiling not measured", "failed"))
        else:
            if isinstance(event, BestSoFar):
                self.best_config = event.config
            self.view.draw_sequence_event(event)  # a search's trials and findings

    def on_finished(self) -> None:
        """The training thread has ended: the next job may start, or the window close."""
        job, self.job = self.job, None
        self._stopping = False
        self._run = None
        self._member = None
        self.sequence = None
        if job is not None and job.kind != "ceiling":
            self.view.history_changed()
        if self._busy:  # the job ended without saying how: the bar must not stay busy with nothing running
            self._show_progress(Progress(1, 0, "Ended", "stopped"))
        self._update_controls()
        if self._closing:
            self.view.close_window()

    # == the controls ===========================================================================
    def controls(self) -> Controls:
        run = self._run
        return controls_for(WindowState(
            job=self.job.kind if self.job is not None else None,
            stopping=self._stopping,
            closing=self._closing,
            problems=tuple(self.view.form_problems()),
            device=self.device,
            config=self.view.form_config(),
            releasing=self._releasing,
            release_outcome=self._release_outcome,
            run_training=run is not None and run.started is not None,
            run_world_size=run.started.world_size if run is not None and run.started is not None else 1,
            sample_pending=run is not None and run.sample_pending,
        ))

    def _update_controls(self) -> None:
        controls = self.controls()
        if controls != self._shown_controls:
            self._shown_controls = controls
            self.view.show_controls(controls)

    # == inside ================================================================================
    def _probe(self) -> Probe:
        if self.probe is not None:
            return self.probe
        from workbench.experiments.members import probe_device

        return probe_device

    def _start(self, job: Job, config: RunConfig) -> None:
        self.job, self._job_config = job, config
        self._stopping = False
        self._run = self._member = None
        self.sequence = None
        self._pending_history_error = None
        self.view.save_config(self.view.form_config())
        self._show_progress(Progress(0, 0, "Starting…", "running"))
        if job.kind == "ceiling":
            self.view.show_status(f"Measuring the compute ceiling of {config.model} (batch {config.batch_size}, "
                                  f"{config.precision}): the model alone, on batches already on the device…")
        elif job.kind != "run":
            self.view.show_status(f"Starting {messages.SEQUENCE_NAMES.get(job.kind, job.kind).lower()}…")
        self.runner.start_job(job)
        self._update_controls()

    def _show_progress(self, progress: Progress) -> None:
        self._busy = progress.maximum == 0
        self.view.show_progress(progress)

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
                                         self._prefix() + f"Epoch 1/{epochs} · step 0/{event.total_steps:,}",
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
        self.view.draw_findings(event.summary.findings)
        if self.sequence is not None:
            self.view.draw_sequence_event(event)
        self.view.history_changed()
        self._update_controls()

    def _on_sequence_ended(self, event: SequenceEnded) -> None:
        self.view.draw_sequence_event(event)
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

    def _on_released(self, release: MemoryRelease) -> None:
        self._releasing = False
        self._release_outcome = release.message
        self.view.show_status(f"Released cached memory: {release.message}")
        self.view.mark_release(release)
        self._update_controls()

    def _on_release_failed(self, error: Exception) -> None:
        self._releasing = False
        self._release_outcome = f"Release failed: {error}"
        self._update_controls()
