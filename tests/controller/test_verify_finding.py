"""A finding's Verify from the window's controller: one verification job on the training thread, its trials'
findings leave the verified ones in place, the findings then read the measurement (also when read back from the
history off the GUI thread), Stop ends it, and what cannot be verified is refused before anything runs."""

from __future__ import annotations

from builders import CPU, TINY_RUN, make_controller

from workbench.engine.events import RunEnded, RunStarted, StepStats
from workbench.engine.run_summary import Finding, RunSummary
from workbench.experiments.events import MemberStarted, SequenceEnded, SequenceStarted

HEAD = "Compute-bound: kernels ran 90% of the sampled time."
FINDING = Finding(kind="compute-bound", headline=HEAD, text=f"{HEAD} Try channels_last=true: the tensor cores' layout.",
                  figure=0.9, figure_name="kernel_busy_fraction", field="channels_last", value=True)
OTHER = Finding(kind="compute-bound", headline=HEAD, text=f"{HEAD} Try compile=default: fused kernels.", figure=0.9,
                figure_name="kernel_busy_fraction", field="compile", value="default")


class Trials:
    """A run function: channels_last is 1.3× faster (a 1 % wobble); every run reports the two findings."""

    def __init__(self):
        self.configs = []

    def __call__(self, config, stop):
        self.configs.append(config)
        rate = 1000.0 * (1.3 if config.channels_last else 1.0) * (1 + 0.01 * (len(self.configs) % 3 - 1))
        yield RunStarted(config=config, device=CPU, dataset_name="synthetic", train_size=64, test_size=8,
                         num_classes=10, steps_per_epoch=4, total_steps=4, parameter_count=1, started_at=0.0)
        yield StepStats(step=1, total_steps=4, epoch=1, epochs=1, samples_seen=32, loss=1.0, lr=0.1,
                        images_per_sec=rate, data_wait_seconds=0.0, device_span_seconds=0.0, window_seconds=0.03,
                        elapsed_seconds=0.03)
        if stop():
            yield RunEnded(status="stopped", summary=RunSummary(status="stopped", steps=1), reason="stopped")
            return
        yield RunEnded(status="finished", summary=RunSummary(
            status="finished", steps=4, images_per_sec=rate, device_type="cpu", device_name=CPU.name,
            findings=(FINDING, OTHER)))


def finished_run():
    trials = Trials()
    controller, view, runner, recording = make_controller(trials)
    controller.start_run()
    runner.finish()
    return controller, view, runner, recording, trials


def test_verify_measures_the_finding_and_its_text_reads_the_measurement():
    controller, view, runner, recording, trials = finished_run()
    assert view.calls.named("draw_findings") == [(FINDING, OTHER)]
    assert len(view.background) == 1  # the history is read off the GUI thread: nothing measured yet
    function, done, _failed = view.background.pop()
    done(function())
    assert view.calls.named("draw_findings")[-1] == (FINDING, OTHER)

    controller.verify_finding(FINDING)
    assert controller.job.kind == "verify" and not view.controls.start.enabled and view.controls.stop.enabled
    runner.finish()
    assert recording.sequences == [("verify", "verify #1: channels_last=on")]
    assert [config.channels_last for config in trials.configs[1:]] == [False, True] * 3
    assert {config.max_steps for config in trials.configs[1:]} == {16}
    # The trials' own findings never replaced the verified ones; the verified one now reads its measurement, first.
    drawn = view.calls.named("draw_findings")[1:]
    assert len(drawn) == 2 and drawn[-1][0].field == "channels_last"
    text = drawn[-1][0].text
    assert text.startswith(FINDING.text.rstrip(".")) and "measured 1.30×: faster (" in text and "3+3 trials" in text
    assert "Verification finished: channels_last=on measured 1.30×: faster" in view.status
    (kept,) = recording.measured
    assert kept.baseline == TINY_RUN and kept.field == "channels_last" and kept.verdict == "faster"

    # Read back from the history off the GUI thread, the same measurement.
    function, done, _failed = view.background.pop()
    done(function())
    assert view.calls.named("draw_findings")[-1] == drawn[-1]
    assert view.background == []


def test_a_later_run_of_the_same_settings_shows_the_measurement_from_the_history():
    controller, view, runner, recording, trials = finished_run()
    view.background.clear()
    controller.verify_finding(FINDING)
    runner.finish()
    view.background.clear()
    controller.start_run()  # the same settings again: its findings read the kept measurement
    runner.finish()
    assert view.calls.named("draw_findings")[-1] == (FINDING, OTHER)  # drawn at once, then the history's answer
    function, done, _failed = view.background.pop()
    done(function())
    assert "measured 1.30×: faster" in view.calls.named("draw_findings")[-1][0].text


def test_a_history_answer_after_a_newer_draw_is_dropped():
    controller, view, runner, recording, trials = finished_run()
    stale_function, stale_done, _ = view.background.pop()
    stale_answer = stale_function()  # read before the verification: nothing measured
    controller.verify_finding(FINDING)
    runner.finish()
    measured = view.calls.named("draw_findings")[-1]
    assert measured[0].measured is not None
    stale_done(stale_answer)  # ... and delivered after it
    assert view.calls.named("draw_findings")[-1] == measured


def test_stop_ends_the_verification_and_the_findings_stay():
    controller, view, runner, recording, trials = finished_run()
    controller.verify_finding(FINDING)
    runner.during = lambda event: controller.stop() if isinstance(event, MemberStarted) and event.index == 2 else None
    runner.finish()
    ended = [e for _, e in view.calls if isinstance(e, SequenceEnded)]
    assert len(ended) == 1 and ended[0].status == "stopped"
    assert len(trials.configs) == 1 + 3  # the run, then two trials and the stopped third
    assert view.calls.named("draw_findings")[-1] == (FINDING, OTHER)
    assert view.status.startswith("Verification stopped (stopped by the user in round 2 of 3): channels_last=on ")
    assert view.status.endswith("(no interval: 1+1 trials).") and controller.job is None


def test_what_cannot_be_verified_is_refused_before_anything_runs():
    controller, view, runner, recording, trials = finished_run()
    controller.verify_finding(FINDING.__class__(kind="x", headline="h", text="t", figure=None, figure_name="f",
                                                field="num_workers", value=7))
    assert controller.job is None and "no longer shown" in view.status
    bf16 = Finding(kind="compute-bound", headline=HEAD, text="Try precision=bf16.", figure=0.9, figure_name="k",
                   field="precision", value="bf16")
    controller.findings.source = controller.findings.source.__class__(TINY_RUN, RunSummary(status="finished", findings=(bf16,)),
                                                              1)
    controller.verify_finding(bf16)
    assert controller.job is None and view.status.startswith("Cannot verify: precision=bf16: bf16 needs a CUDA GPU")
    controller.start_run()
    controller.verify_finding(FINDING)
    assert controller.job.kind == "run" and "Stop the current run" in view.status
    runner.finish()
    assert not [e for _, e in view.calls if isinstance(e, SequenceStarted)]


def test_a_history_that_cannot_be_read_leaves_the_findings_as_drawn():
    controller, view, runner, recording, trials = finished_run()
    _function, _done, failed = view.background.pop()
    drawn = list(view.calls.named("draw_findings"))
    failed(OSError("database is locked"))
    assert view.calls.named("draw_findings") == drawn == [(FINDING, OTHER)]
