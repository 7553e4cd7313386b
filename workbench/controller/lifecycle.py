"""The window's run lifecycle in one place (no Qt): start, stop, sequences of runs, recording, the release
policy, Apply, the ceiling probe, closing mid-run.

One job at a time runs on the runner's training thread: a lone run, or a whole sweep / search /
largest-batch search as ONE generator, so Stop ends all of it. Every run (lone or a member) is
recorded on that thread as the CLI records one; the window learns each run's history name from the
``RunRecorded`` it yields, and names a run itself only when nothing records it. What the window
shows is decided here and handed to the view; what the user does comes back as method calls.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from workbench.config import RunConfig
from workbench.controller import messages
from workbench.controller.controls import Controls, WindowState, controls_for
from workbench.controller.driving import Job
from workbench.controller.jobs import (
    MeasureCeiling,
    Probe,
    Recordings,
    RunFunction,
    SequencePlan,
    ceiling_job,
    no_recording,
    run_job,
    sequence_job,
)
from workbench.controller.reports import RunReports
from workbench.controller.shown_findings import ShownFindings
from workbench.controller.view import Runner, WindowView
from workbench.device_info import DeviceInfo
from workbench.engine.events import MemoryRelease
from workbench.engine.run_summary import Finding
from workbench.experiments.max_batch import MaxBatchPlan
from workbench.experiments.sweep import SweepAxis, SweepPlan
from workbench.experiments.tune import TunePlan
from workbench.experiments.verify import VerifyPlan, finding_change, plan_problems

READY = "Ready. Set the knobs and press Start."


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
        self._stopping = False
        self._closing = False
        self._releasing = False
        self._release_outcome = ""
        self._shown_controls: Optional[Controls] = None
        self.findings = ShownFindings(view, self.recordings)  # what Verify measures against
        self.reports = RunReports(view, self.findings, self._update_controls)
        self.on_event = self.reports.on_event  # the runner's reports, each by its type
        self.on_steps = self.reports.on_steps

    # == what the user does =====================================================================
    @property
    def running(self) -> bool:
        return self.job is not None

    def start_run(self) -> None:
        if self.running or self.view.form_problems():
            return
        config = self.view.form_config()
        self._start(run_job(config, self.run_function, self.recordings), config)

    def start_sweep(self, axes: Sequence[SweepAxis], length: Optional[dict[str, Any]] = None, name: str = "",
                    repeats: int = 1) -> None:
        """A sweep from the form's settings: ``axes`` the settings varied, ``length`` e.g. {"max_steps": 40},
        every value run ``repeats`` times, interleaved."""
        if self.running or self.view.form_problems():
            return
        base = self.view.form_config().replace(**(length or {}))
        plan = SweepPlan(base, tuple(axes), name, repeats)
        self._start_sequence(plan)

    def start_tune(self, allow: frozenset[str] = frozenset(), budget_seconds: Optional[float] = None,
                   trial_steps: Optional[int] = None) -> None:
        if self.running or self.view.form_problems():
            return
        base = self.view.form_config()
        plan = TunePlan(base, allow=allow, budget_seconds=budget_seconds, trial_steps=trial_steps)
        self.reports.best_config = None
        self._start_sequence(plan)

    def start_max_batch(self, memory_budget_bytes: Optional[int] = None, steps_per_trial: int = 5) -> None:
        action = self.controls().max_batch
        if not action.enabled:
            self.view.show_status(action.tooltip)  # refused, visibly: the reason, not silence
            return
        base = self.view.form_config()
        plan = MaxBatchPlan(base, memory_budget_bytes=memory_budget_bytes, steps_per_trial=steps_per_trial)
        self._start_sequence(plan)

    def _start_sequence(self, plan: SequencePlan) -> None:
        self._start(sequence_job(plan, self.run_function, self.recordings, self._probe()), plan.base)

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
        run = self.reports.run
        if not self.controls().sample_now.enabled or run is None:
            return
        run.sample_pending = True
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

    def verify_finding(self, finding: Finding) -> None:
        """A finding's Verify: its change against the shown run's settings, interleaved short trials (a job)."""
        source = self.findings.source
        if self.running:
            self.view.show_status("Stop the current run before verifying a finding.")
            return
        # The run's own finding (the one shown may carry a measurement in its text).
        own = next((shown for shown in source.findings if finding.field is not None
                    and (shown.field, shown.value) == (finding.field, finding.value)), None) if source else None
        if source is None or own is None:
            self.view.show_status("That finding is no longer shown: verify a finding of the last run.")
            return
        plan = VerifyPlan.for_run(source.config, source.summary, (finding_change(own),), source.run_id)
        problems = plan_problems(plan, self.device) if self.device is not None else []
        if problems:  # refused before anything runs: said, not started (e.g. a setting this machine cannot run)
            self.view.show_status("Cannot verify: " + "; ".join(problems))
            return
        self._start_sequence(plan)

    def apply_best(self) -> None:
        """Put the search's best settings into the form."""
        best = self.reports.best_config
        if best is None:
            return
        if self.running:
            self.view.show_status("Stop the current run before applying settings.")
            return
        self.view.set_form_config(best)
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

    # == what the runner reports (its events: controller/reports.py) ================================================================
    def on_finished(self) -> None:
        """The training thread has ended: the next job may start, or the window close."""
        job, self.job = self.job, None
        self._stopping = False
        self.reports.end_job()
        if job is not None and job.kind != "ceiling":
            self.view.history_changed()
        self._update_controls()
        if self._closing:
            self.view.close_window()

    # == the controls ===========================================================================
    def controls(self) -> Controls:
        run = self.reports.run
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
        self.job = job
        self._stopping = False
        self.view.save_config(self.view.form_config())
        self.reports.begin_job(job.kind, config)
        if job.kind == "ceiling":
            self.view.show_status(f"Measuring the compute ceiling of {config.model} (batch {config.batch_size}, "
                                  f"{config.precision}): the model alone, on batches already on the device…")
        elif job.kind != "run":
            self.view.show_status(f"Starting {messages.SEQUENCE_NAMES.get(job.kind, job.kind).lower()}…")
        self.runner.start_job(job)
        self._update_controls()

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
