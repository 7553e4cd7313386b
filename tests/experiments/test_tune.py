"""The search for faster settings against a fake timing function with noise: it finds the known best,
repeats close calls, stops when a pass gains nothing, and keeps every trial in the history."""

import re

import pytest
from experiment_fakes import CPU, GPU, TimedRuns, probe_of, tiny

from workbench.experiments.events import BestSoFar, MemberStarted, SequenceEnded, TrialResult
from workbench.experiments.recording import HistoryRecording
from workbench.experiments.tune import CALIBRATION_STEPS, TunePlan, candidates, run_tune
from workbench.history.store import HistoryStore

START = tiny(device="auto", pipeline="dataloader", augment="cpu", num_workers=2, precision="fp32",
             channels_last=False, compile=False, max_steps=None, epochs=3)
PLACEMENT = {("dataloader", "cpu"): 1.0, ("dataloader", "gpu"): 1.5, ("gpu-resident", "gpu"): 2.0}
PRECISION = {"fp32": 1.0, "fp16": 1.6, "bf16": 1.8}
WORKERS = {0: 0.6, 1: 0.8, 2: 1.0, 4: 1.0, 8: 1.0, 16: 0.99}


def known_speed(config):
    """images/sec of a setting: the best is gpu-resident + bf16 + compile; channels_last gains 1 %
    (inside the noise), so it must not be kept."""
    speed = 1000 * PLACEMENT[(config.pipeline, config.augment)] * PRECISION[config.precision]
    if config.pipeline == "dataloader":
        speed *= WORKERS[config.num_workers]
    speed *= 1.01 if config.channels_last else 1.0
    speed *= 1.25 if config.compile != "off" else 1.0
    return speed


def tune(runs, plan, device=GPU, **kwargs):
    return list(run_tune(plan, lambda: False, run_function=runs, probe=probe_of(device), **kwargs))


def test_finds_the_known_best_and_leaves_what_is_learned_alone():
    runs = TimedRuns(known_speed, noise=0.01, seed=1)
    events = tune(runs, TunePlan(START, trial_steps=20))
    result = events[-1].result
    assert events[-1].status == "finished"
    assert result.best_changes == {"pipeline": "gpu-resident", "augment": "gpu", "precision": "bf16", "compile": "default"}
    assert result.best_config == START.replace(pipeline="gpu-resident", augment="gpu", precision="bf16", compile="default")
    assert result.speedup == pytest.approx(2.0 * 1.8 * 1.25, rel=0.03)
    # The run's own length, lr and batch are the user's: trials are short, the best settings are not.
    assert result.best_config.epochs == 3 and result.best_config.max_steps is None
    assert {(c.batch_size, c.lr, c.accumulation_steps, c.max_steps) for c in runs.configs} == {(32, START.lr, 1, 20)}
    # The findings arrive as they land: a BestSoFar after each kept change.
    kept = [t for t in result.trials if t.outcome == "kept"]
    bests = [e for e in events if isinstance(e, BestSoFar)]
    assert len(bests) == len(kept) + 1 and bests[-1].config == result.best_config


def test_close_calls_are_measured_again_and_not_kept():
    runs = TimedRuns(known_speed, noise=0.01, seed=2)
    result = tune(runs, TunePlan(START, trial_steps=20))[-1].result
    channels_last = [t for t in result.trials if t.knob == "channels_last"]
    assert channels_last and all(t.outcome == "within noise" and len(t.measurements) == 2 for t in channels_last)
    clear_calls = [t for t in result.trials if t.outcome in ("kept", "slower")]
    assert clear_calls and all(len(t.measurements) == 1 for t in clear_calls)
    assert result.noise_fraction == pytest.approx(0.02, abs=0.01)  # the floor: the fake's spread is ±1 %


def test_stops_when_a_full_pass_gains_less_than_3_percent():
    runs = TimedRuns(known_speed, noise=0.01, seed=3)
    result = tune(runs, TunePlan(START, trial_steps=20, max_passes=5))[-1].result
    assert result.passes == 2  # the second pass found nothing new (re-measuring the best moves its mean a little)
    gain = float(result.stop_reason.removeprefix("a full pass gained ").split("%")[0])
    assert gain < 3 and result.stop_reason.endswith(f"(< 3%; {result.changes_tried} changes tried)")

    flat = TimedRuns(lambda config: 500.0, noise=0.005, seed=4)
    result = tune(flat, TunePlan(START, trial_steps=20, max_passes=5))[-1].result
    assert result.passes == 1 and result.best_config == START and result.speedup == pytest.approx(1.0, abs=0.02)
    assert {t.outcome for t in result.trials} == {"start", "within noise"}


def test_knobs_apply_only_where_they_have_an_effect():
    assert candidates("pin_memory", START, CPU) == []  # no host → GPU copy on a CPU
    assert candidates("precision", START, CPU) == []
    assert candidates("num_workers", START.replace(pipeline="gpu-resident", augment="gpu"), GPU) == []
    assert candidates("prefetch_factor", START.replace(num_workers=0), GPU) == []
    assert candidates("num_workers", START, GPU, cores=6) == [{"num_workers": n} for n in (0, 1, 4, 6)]
    assert candidates("placement", START.replace(augment="none"), GPU) == [{"pipeline": "gpu-resident"}]
    assert "batch_size" not in TunePlan(START).searched_knobs()
    assert "batch_size" not in TunePlan(START, allow=frozenset({"lr"})).searched_knobs()
    assert candidates("batch_size", START, GPU)[1] == {"batch_size": 64}  # lr stays unless allowed
    # batch size only when allowed, and lr then follows it
    plan_knobs = TunePlan(START, allow=frozenset({"batch_size", "lr"})).searched_knobs()
    assert plan_knobs[-1] == "batch_size"
    assert candidates("batch_size", START, GPU, allow=frozenset({"batch_size", "lr"}))[1] == {
        "batch_size": 64, "lr": START.lr * 2}


def test_on_a_cpu_it_tries_only_what_a_cpu_can_run():
    runs = TimedRuns(known_speed, noise=0.01, seed=5, device=CPU)
    tune(runs, TunePlan(START.replace(device="cpu"), trial_steps=20), device=CPU)
    assert {c.precision for c in runs.configs} == {"fp32"}
    assert {c.pin_memory for c in runs.configs} == {True}


def test_a_failing_trial_is_marked_failed_and_the_search_goes_on():
    runs = TimedRuns(known_speed, noise=0.01, seed=6, fail=lambda config: "error" if config.compile != "off" else None)
    result = tune(runs, TunePlan(START, trial_steps=20))[-1].result
    compile_trials = [t for t in result.trials if t.knob == "compile"]
    assert compile_trials[0].outcome == "failed" and compile_trials[0].reason == "fake error"
    assert result.best_changes == {"pipeline": "gpu-resident", "augment": "gpu", "precision": "bf16"}


def test_the_trials_are_sized_by_a_calibration_run():
    runs = TimedRuns(lambda config: 3200.0, noise=0.0)
    result = tune(runs, TunePlan(START, trial_seconds=1.0, knobs=("channels_last",)))[-1].result
    assert runs.configs[0].max_steps == CALIBRATION_STEPS
    assert result.trial_steps == 100  # 1 s at 3,200 images/s in batches of 32
    assert {c.max_steps for c in runs.configs[1:]} == {100}


def test_budget_ends_the_search_with_what_it_found():
    runs = TimedRuns(known_speed, noise=0.01, seed=7)
    events = tune(runs, TunePlan(START, trial_steps=20, budget_seconds=5), clock=lambda: float(len(runs.configs)))
    ended = events[-1]  # every run takes a second
    tried = ended.result.changes_tried
    assert ended.status == "finished" and ended.reason == f"the time budget of 5 s is spent ({tried} changes tried)"
    assert len(runs.configs) == 5 and tried >= 1
    assert ended.result.best_images_per_sec is not None


def test_a_budget_that_cannot_fit_one_change_is_refused_with_the_budget_it_needs():
    """Issue 22: 120 s went on calibration and two runs of the start settings; "1.00× faster" followed."""
    runs = TimedRuns(known_speed, noise=0.01, seed=7)
    clock = lambda: 40.0 * len(runs.configs)  # noqa: E731 (every run takes 40 s: start-up and evaluation)
    events = tune(runs, TunePlan(START, budget_seconds=120), clock=clock)
    ended = events[-1]
    assert [c.max_steps for c in runs.configs] == [CALIBRATION_STEPS]  # the calibration, then nothing
    assert ended.status == "failed" and ended.result is None and len(ended.problems) == 1
    assert ended.problems[0].startswith("the time budget of 120 s cannot fit one trial: a trial of ")
    needed = int(re.search(r"give a budget of (\d+) s or more", ended.problems[0]).group(1))
    assert 160 <= needed <= 180  # the calibration's 40 s, then 3 trials of 40 s and their extra steps
    # Known before anything runs when the trials are sized in seconds.
    assert tune(runs, TunePlan(START, budget_seconds=5, trial_seconds=4))[-1].problems == (
        "the time budget of 5 s cannot fit one trial: the start settings run twice and a change once, each 4 s of "
        "training or more; give a budget of 12 s or more",)
    assert len(runs.configs) == 1


def test_the_settings_max_steps_is_the_trial_length():
    """Issue 22: --max-steps 40 was silently replaced by 16-step trials."""
    runs = TimedRuns(lambda config: 3200.0, noise=0.0)
    result = tune(runs, TunePlan(START.replace(max_steps=40), knobs=("channels_last",)))[-1].result
    assert {c.max_steps for c in runs.configs} == {40} and result.trial_steps == 40  # no calibration run
    assert result.best_config.max_steps == 40
    refused = tune(runs, TunePlan(START.replace(max_steps=3)))[-1]
    assert refused.problems == ("a trial needs at least 4 steps to measure after its warm-up (got max_steps 3)",)


def test_a_search_stopped_before_any_change_never_claims_one_was_tried():
    from workbench.cli.tune_command import summary_text
    from workbench.controller.messages import sequence_ended_text

    runs = TimedRuns(known_speed, noise=0.01, seed=7)
    stopped = []
    events = list(run_tune(TunePlan(START, trial_steps=20), lambda: len(runs.configs) >= 2 and not stopped.append(1)
                           or bool(stopped), run_function=runs, probe=probe_of(GPU)))
    ended = events[-1]
    assert ended.status == "stopped" and ended.result.changes_tried == 0
    assert ended.reason == "stopped by the user (no change was tried)"
    text = summary_text(ended.result)
    assert "faster)" not in text and "no change beat" not in text and "no change was tried" in text
    assert "no change was tried" in sequence_ended_text(ended) and "fastest tried" not in sequence_ended_text(ended)


def test_bad_input_starts_nothing():
    runs = TimedRuns(known_speed)
    events = tune(runs, TunePlan(START.replace(precision="fp16", device="cpu"), knobs=("warp_drive",),
                                 budget_seconds=0), device=CPU)
    assert [type(e) for e in events] == [SequenceEnded] and runs.configs == []
    assert events[0].problems == (
        "fp16 needs a CUDA GPU",
        "warp_drive is not a knob the search can try (knobs: placement, precision, channels_last, num_workers, "
        "pin_memory, non_blocking, persistent_workers, prefetch_factor, fused_optimizer, compile, batch_size, accumulation_steps)",
        "the time budget must be more than 0 seconds (got 0)",
    )


def test_every_trial_is_a_run_in_the_history_tagged_with_the_search(isolated_workbench_home):
    runs = TimedRuns(known_speed, noise=0.01, seed=8)
    with HistoryRecording() as recording:
        events = list(run_tune(TunePlan(START, trial_steps=20, knobs=("placement",)), lambda: False, recording,
                               run_function=runs, probe=probe_of(GPU)))
    members = [e for e in events if isinstance(e, MemberStarted)]
    ended = events[-1]
    with HistoryStore.open() as store:
        runs_in_history = store.sequence_runs(ended.sequence_id)
    assert [r.id for r in runs_in_history] == [m.run_id for m in members] and len(members) == len(runs.configs)
    assert runs_in_history[0].name == "synthetic: tune start"
    assert runs_in_history[-1].name == "synthetic: tune trial, pipeline=gpu-resident, augment=gpu"
    trials = [e for e in events if isinstance(e, TrialResult)]
    assert trials[-1].run_ids == (runs_in_history[-1].id,)
