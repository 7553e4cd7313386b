"""The window's lifecycle without a window: RunController against a fake view and a runner that drives each
job in place (as ndv tests its controllers; builders.FakeView and InPlaceRunner, held to the Protocols in
controller/view.py). The engine is faked; the recording and the sequences are real."""

from __future__ import annotations

import pytest
from builders import CPU, GPU, TINY_RUN, FakeRun, make_controller

from workbench.controller.controls import RELEASE_DURING_RUN, RELEASE_ON_CPU
from workbench.controller.driving import Job, drive
from workbench.engine.events import EpochStats, ProfileSample, RunEnded, RunStarted, StepStats
from workbench.engine.requests import JobRequests
from workbench.engine.run_summary import Finding, RunSummary
from workbench.experiments.events import MemberStarted, SequenceEnded, SequenceStarted
from workbench.experiments.sweep import SweepAxis


def test_a_run_is_recorded_named_by_the_history_drawn_and_ends_with_idle_controls():
    controller, view, runner, recording = make_controller()
    assert view.controls.start.enabled and not view.controls.stop.enabled and view.controls.form_editable
    controller.start_run()
    assert runner.running and controller.running
    # While it goes: Start and the form locked, Stop open, the settings saved for the next session.
    assert not view.controls.start.enabled and view.controls.stop.enabled and not view.controls.form_editable
    assert view.calls.named("save_config") == [TINY_RUN]
    runner.finish()

    [recorder] = recording.recorders
    assert recording.opened == recording.closed == 1  # the job's recorder factory is closed on its thread
    assert [type(event).__name__ for event in recorder.events][:2] == ["StatusChanged", "RunStarted"]
    assert isinstance(recorder.events[-1], RunEnded) and recorder.events[-1].status == "finished"
    assert view.calls.named("begin_run") == [("#1 synthetic", 1)]  # named and keyed as the history names it
    assert sum(len(steps) for steps in view.calls.named("draw_steps")) == 6
    assert [event.status for event in view.calls.named("draw_run_ended")] == ["finished"]
    assert view.message[0] == "finished" and view.message[1].startswith("Finished")
    assert view.progress.status == "finished" and view.progress.value == view.progress.maximum == 6
    assert view.calls.named("history_changed")  # the Runs tab reads the record again
    assert not controller.running and view.controls.start.enabled and view.controls.form_editable


def test_bad_settings_start_nothing_and_start_says_why():
    controller, view, runner, recording = make_controller(config=TINY_RUN.replace(batch_size=0))
    controller.start_run()
    assert not runner.running and not recording.recorders
    assert not view.controls.start.enabled and "batch" in view.controls.start.tooltip.lower()


def test_a_run_that_crashes_is_a_failed_run_with_its_traceback_and_its_record_says_so():
    controller, view, runner, recording = make_controller(FakeRun(steps=6, raise_at=4))
    controller.start_run()
    runner.finish()
    [ended] = view.calls.named("draw_run_ended")
    assert ended.status == "failed" and "boom at step 4" in ended.reason
    assert ended.summary.steps == 3  # the figures it had measured are kept
    status, text, details = view.message
    assert status == "failed" and "boom at step 4" in text and "RuntimeError" in details
    assert len(recording.recorders[0].fails) == 1 and "boom at step 4" in recording.recorders[0].failed
    assert view.controls.start.enabled


def test_the_release_is_disabled_during_a_run_with_the_reason_and_runs_off_the_gui_thread_after():
    controller, view, runner, _ = make_controller(device=GPU)
    assert view.controls.release.enabled
    controller.start_run()
    assert view.controls.release == RELEASE_DURING_RUN and "stalls" in view.controls.release.tooltip
    controller.release_memory()  # a click that got through anyway does nothing
    assert view.background == []
    runner.finish()
    controller.release_memory()
    [(function, done, _failed)] = view.background
    assert not view.controls.release.enabled  # releasing…
    done(function())
    assert view.controls.release.enabled and view.controls.release.note == "reserved 3.0 GiB → 1.0 GiB"
    assert [release.message for release in view.calls.named("mark_release")] == ["reserved 3.0 GiB → 1.0 GiB"]


def test_no_release_on_a_cpu_with_the_reason():
    controller, view, _, _ = make_controller(device=CPU)
    assert view.controls.release == RELEASE_ON_CPU


def test_closing_mid_run_stops_the_run_then_closes_the_window():
    controller, view, runner, recording = make_controller(FakeRun(steps=50))
    controller.start_run()

    def close_at_step_3(event):
        if isinstance(event, StepStats) and event.step == 3 and not controller._closing:
            assert controller.request_close() is False  # not yet: the thread must end first
            assert not view.closed
            assert not view.controls.stop.enabled and view.controls.stop.tooltip == "Stopping…"

    runner.during = close_at_step_3
    runner.finish()
    assert view.closed
    [ended] = view.calls.named("draw_run_ended")
    assert ended.status == "stopped"
    assert recording.recorders[0].events[-1].status == "stopped"
    assert controller.request_close() is True  # idle: close at once


def test_a_sweep_runs_every_member_on_the_one_job_recorded_with_one_sweep_id():
    run = FakeRun(steps=3)
    controller, view, runner, recording = make_controller(run)
    controller.start_sweep([SweepAxis("batch_size", (16, 32, 64))], {"max_steps": 3})
    assert not view.controls.sweep.enabled and not view.controls.start.enabled
    runner.finish()

    assert [config.batch_size for config in run.configs] == [16, 32, 64]
    assert recording.sequences == [("sweep", recording.sequences[0][1])]
    assert {recorder.sequence_id for recorder in recording.recorders} == {41}
    assert recording.opened == recording.closed == 1
    sequence = [type(event).__name__ for event in view.calls.named("draw_sequence_event")
                if isinstance(event, (SequenceStarted, MemberStarted, SequenceEnded))]
    assert sequence == ["SequenceStarted"] + ["MemberStarted"] * 3 + ["SequenceEnded"]
    # Each member is its own run on the plots, named as the history names it.
    assert [key for _label, key in view.calls.named("begin_run")] == [1, 2, 3]
    assert "batch_size=64" in view.calls.named("begin_run")[2][0]
    assert view.message[0] == "finished" and "3 members ran" in view.message[1]
    assert view.controls.sweep.enabled and view.controls.start.enabled


def test_stop_ends_the_whole_sweep():
    run = FakeRun(steps=4)
    controller, view, runner, recording = make_controller(run)
    controller.start_sweep([SweepAxis("seed", (1, 2, 3, 4))], {"max_steps": 4})

    def stop_in_the_second_member(event):
        if isinstance(event, StepStats) and len(run.configs) == 2 and event.step == 2:
            controller.stop()

    runner.during = stop_in_the_second_member
    runner.finish()
    assert [config.seed for config in run.configs] == [1, 2]  # the third member never started
    [ended] = [event for event in view.calls.named("draw_sequence_event") if isinstance(event, SequenceEnded)]
    assert ended.status == "stopped"
    assert [recorder.events[-1].status for recorder in recording.recorders] == ["finished", "stopped"]


def test_an_invalid_sweep_value_starts_nothing_and_says_every_problem():
    run = FakeRun(steps=3)
    controller, view, runner, recording = make_controller(run)
    controller.start_sweep([SweepAxis("batch_size", (16, 0, -1))], {"max_steps": 3})
    runner.finish()
    assert run.configs == [] and recording.recorders == []
    assert view.progress.text == "Nothing ran"
    assert view.message[0] == "failed" and "nothing ran" in view.message[1]


def test_a_sweep_of_a_model_that_cannot_be_built_starts_nothing_and_says_why(user_module):
    """From the window as from the CLI (issue 21 §2): a sequence whose model spec gives no model is refused with
    the engine's words, nothing recorded; before, every member ran, failed and was recorded."""
    run = FakeRun(steps=3)
    controller, view, runner, recording = make_controller(run, config=TINY_RUN.replace(model="mymodels:raises"))
    controller.start_sweep([SweepAxis("batch_size", (16, 32))], {"max_steps": 3})
    runner.finish()
    assert run.configs == [] and recording.recorders == [] and recording.sequences == []
    assert view.message[0] == "failed" and "raises(num_classes=10) raised ValueError: width must be even" in (
        view.message[1])


def test_largest_batch_is_refused_on_a_cpu_visibly_and_starts_nothing():
    controller, view, runner, _ = make_controller(device=CPU)
    assert not view.controls.max_batch.enabled and view.controls.max_batch.note == "Needs a CUDA GPU"
    controller.start_max_batch()
    assert not runner.running
    assert "needs a CUDA GPU" in view.status and "swaps" in view.status


def test_sample_now_opens_once_training_runs_and_asks_the_runner_once():
    controller, view, runner, _ = make_controller(FakeRun(steps=6))
    assert not view.controls.sample_now.enabled
    controller.start_run()
    notes = []

    def ask_at_step_2(event):
        notes.append(view.controls.sample_now.note)
        if isinstance(event, StepStats) and event.step == 2:
            controller.request_sample()
            assert not view.controls.sample_now.enabled and view.controls.sample_now.note == "Sample asked for"

    runner.during = ask_at_step_2
    runner.finish()
    assert runner.samples_asked == 1 and runner.controls.profile_requests.pending
    assert notes[0] == "Waiting for training to start"  # the StatusChanged before RunStarted
    assert not view.controls.sample_now.enabled and view.controls.sample_now.note == "No run is training"


def test_a_profile_sample_and_the_findings_reach_the_view_and_apply_sets_the_form():
    finding = Finding(kind="input-bound", headline="Waiting for data 40 % of the time.",
                      text="Augment on the GPU.", figure=0.4, figure_name="data wait", threshold=0.2,
                      field="augment", value="gpu")
    sample = ProfileSample(first_step=3, last_step=4, device_type="cpu", steps=2, window_seconds=0.5,
                           images_per_sec=128.0, host_data_wait_seconds=0.2)

    def run(config, stop):
        yield RunStarted(config=config, device=CPU, dataset_name="synthetic", train_size=64, test_size=8,
                         num_classes=10, steps_per_epoch=4, total_steps=4, parameter_count=1, started_at=0.0)
        yield sample
        yield RunEnded(status="finished", summary=RunSummary(status="finished", steps=4, findings=(finding,)))

    controller, view, runner, recording = make_controller(run)
    controller.start_run()
    controller.apply_setting("augment", "gpu")  # refused during a run: the form is locked
    assert view.config == TINY_RUN and "Stop" in view.status
    runner.finish()
    assert view.calls.named("draw_sample") == [sample] and sample in recording.recorders[0].events
    assert view.calls.named("draw_findings") == [(finding,)]
    controller.apply_setting("augment", "cpu")
    assert view.config == TINY_RUN.replace(augment="cpu") and "augment=cpu" in view.status


def test_the_ceiling_probe_runs_as_a_job_between_runs_only():
    measured = []

    class Ceiling:
        images_per_sec, steady, key = 12_345.0, True, {"device": "cpu"}

    def measure(config, stop):
        measured.append(config)
        return Ceiling()

    controller, view, runner, _ = make_controller(FakeRun(steps=3), measure_ceiling=measure)
    controller.start_run()
    assert not view.controls.ceiling.enabled and "share the device" in view.controls.ceiling.tooltip
    controller.measure_ceiling()
    assert measured == [] and "share the device" in view.status
    runner.finish()
    controller.measure_ceiling()
    runner.finish()
    assert measured == [TINY_RUN] and "12,345 images/s" in view.ceiling
    assert len(view.calls.named("draw_run_ended")) == 1  # no failed run owed for the probe
    assert view.calls.named("begin_run") == [("#1 synthetic", 1)]  # the probe is no run: nothing drawn, nothing recorded


def test_a_ceiling_the_home_could_not_keep_is_shown_with_why_later_runs_will_not_find_it():
    class Ceiling:
        images_per_sec, steady, key = 12_345.0, True, {"device": "cpu"}
        not_kept = "not kept in /home/ceilings.json: read-only file system"

    controller, view, runner, _ = make_controller(FakeRun(steps=3), measure_ceiling=lambda config, stop: Ceiling())
    controller.measure_ceiling()
    runner.finish()
    assert "12,345 images/s" in view.ceiling
    assert ("It was not kept in /home/ceilings.json: read-only file system: runs will not show their pipeline "
            "efficiency against it.") in view.ceiling
    assert "now show" not in view.ceiling


def test_a_stopped_ceiling_probe_reads_stopped_not_failed():
    """Stop during the probe showed "Ceiling not measured: RuntimeError: the ceiling probe was stopped before it
    timed a step" on a red "failed" bar: the user's own stop read as a fault."""
    from workbench.engine.ceiling_cache import ProbeStopped

    def measure(config, stop):
        assert stop()  # asked by the probe before its next step
        raise ProbeStopped("stopped while warming up (2 of 5 warm-up steps done)")

    controller, view, runner, _ = make_controller(FakeRun(steps=3), measure_ceiling=measure)
    controller.measure_ceiling()
    controller.stop()
    runner.finish()
    assert view.ceiling == "Ceiling not measured: Stopped (stopped while warming up (2 of 5 warm-up steps done))."
    assert view.status == view.ceiling and "Error" not in view.ceiling
    assert view.progress.status == "stopped" and view.progress.text == "Ceiling stopped"


@pytest.mark.parametrize("failure", ["raise", "silent"])
def test_a_sequence_whose_generator_breaks_still_ends_with_a_failed_sequence_and_run(failure):
    def events(controls):
        yield SequenceStarted(kind="sweep", sequence_id=None, name="sweep seed", base=TINY_RUN, planned_members=2, fields=("seed",))
        yield MemberStarted(index=0, config=TINY_RUN, values=(("seed", 1),), run_id=None)
        if failure == "raise":
            raise RuntimeError("the sequence broke")

    emitted = []
    drive(Job("sweep", "sweep seed", events), JobRequests(), emitted.append, emitted.append)
    assert isinstance(emitted[-2], RunEnded) and emitted[-2].status == "failed"
    assert isinstance(emitted[-1], SequenceEnded) and emitted[-1].status == "failed"
    if failure == "raise":
        assert "the sequence broke" in emitted[-1].reason and "RuntimeError" in emitted[-2].traceback


def test_steps_are_batched_and_kept_in_order_before_the_end():
    emitted = []
    now = iter(x * 0.01 for x in range(1000))
    job = Job("run", "run", lambda controls: FakeRun(steps=20)(TINY_RUN, controls))
    drive(job, JobRequests(), lambda steps: emitted.append(list(steps)), emitted.append, step_interval_s=0.05,
          clock=lambda: next(now))
    batches = [item for item in emitted if isinstance(item, list)]
    assert [stats.step for batch in batches for stats in batch] == list(range(1, 21))
    assert len(batches) < 20  # batched: at most one emit per 50 ms of the clock
    assert isinstance(emitted[-3], list) and isinstance(emitted[-2], EpochStats)  # the last steps before the epoch
    assert isinstance(emitted[-1], RunEnded)


def test_a_release_that_fails_says_so_and_opens_the_button_again():
    controller, view, runner, _ = make_controller(device=GPU)
    controller.release_memory()
    [(_function, _done, failed)] = view.background
    failed(RuntimeError("driver gone"))
    assert view.controls.release.enabled and "driver gone" in view.controls.release.note


def test_the_progress_bar_says_what_the_run_does_before_its_first_step():
    """Issue 30 §8: "step 0/237" 12 s into a resnet18 run read as a hang: loading, building and compiling are said
    on the bar, and after the start that the first steps are under way."""
    from builders import started

    from workbench.engine.events import StatusChanged

    def run(config, stop):
        yield StatusChanged(message="Loading synthetic data…")
        yield StatusChanged(message="Building resnet18 on cpu…")
        yield started(config, CPU, total_steps=237)
        yield StatusChanged(message="Compiling the model: the first steps are slow")
        yield RunEnded(status="stopped", summary=RunSummary(status="stopped"), reason="stopped")

    controller, view, runner, recording = make_controller(run_function=run)
    shown = []
    view.show_progress = shown.append
    controller.start_run()
    runner.finish()
    texts = [progress.text for progress in shown]
    assert "Loading synthetic data…" in texts and "Building resnet18 on cpu…" in texts
    first_steps = next(progress for progress in shown if progress.text.startswith("Epoch 1/"))
    assert first_steps.text.endswith("step 0/237 · first steps (the loader starts, the first batches warm up)…")
    compiling = next(progress for progress in shown if progress.text.startswith("Compiling"))
    assert compiling.maximum == 237 and compiling.value == 0  # the bar keeps its length while it says the phase


def test_a_run_without_a_steady_window_says_why_it_has_no_rate_or_verdict():
    """Its steps all fell in the warm-up window: no img/s and no verdict, and the run's message says why."""
    controller, view, runner, recording = make_controller(FakeRun(steps=6))  # its summary has no img/s
    controller.start_run()
    runner.finish()
    assert view.message[0] == "finished" and view.message[1].splitlines()[-1].startswith("no steady window: ")
