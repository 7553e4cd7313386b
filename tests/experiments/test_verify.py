"""Verify: a run's settings against one changed setting, interleaved trials (A B A B …), compared by the one A/B
statistic and kept in the history; bad plans start nothing; stop ends the sequence."""

import threading

import pytest
from builders import CPU, GPU, TimedRuns, probe_of, tiny

from workbench.engine.events import StepStats
from workbench.experiments.events import MemberStarted, RecordingFailed, SequenceEnded, SequenceStarted
from workbench.experiments.recording import HistoryRecording, NoRecording
from workbench.experiments.verify import (
    Change,
    VerifyPlan,
    plan_problems,
    run_verify,
    trial_config,
    trial_steps_for,
    without_unrunnable,
)
from workbench.history.store import HistoryStore

BASE = tiny(max_steps=None, epochs=2, log_every=10, profile=True, channels_last=False, num_workers=0)


def speed(config):
    """channels_last is 1.3× faster; num_workers=1 changes nothing."""
    return 1000.0 * (1.3 if config.channels_last else 1.0)


def verify(runs, plan, stop=lambda: False, recorders=None):
    return list(run_verify(plan, stop, recorders, runs, probe_of(CPU)))


class KeptChanges(NoRecording):
    """A recorder factory that keeps the measured changes in a list."""

    def __init__(self):
        self.changes = []

    def add_measured_change(self, change):
        self.changes.append(change)


def test_trials_alternate_baseline_and_change_and_a_real_1_3x_is_faster():
    runs = TimedRuns(speed, noise=0.03, seed=1, device=CPU)
    kept = KeptChanges()
    events = verify(runs, VerifyPlan(BASE, (Change("channels_last", True, "Try channels_last=true"),), trial_steps=16),
                    recorders=kept)
    # A B A B A B, each a short unprofiled trial of the run's settings (its own length, logging and profiling aside).
    assert [config.channels_last for config in runs.configs] == [False, True] * 3
    assert {(c.max_steps, c.log_every, c.profile) for c in runs.configs} == {(16, 2, False)}
    assert [e.purpose for e in events if isinstance(e, MemberStarted)] == ["baseline", "change"] * 3
    started = next(e for e in events if isinstance(e, SequenceStarted))
    assert started.kind == "verify" and started.planned_members == 6
    ended = events[-1]
    assert isinstance(ended, SequenceEnded) and ended.status == "finished"
    (change,) = ended.result.changes
    assert change.comparison.verdict == "faster" and change.comparison.speedup == pytest.approx(1.3, rel=0.05)
    assert change.comparison.speedup_low > 1.02 and change.comparison.trials == "3+3 trials"
    assert change.text == "Try channels_last=true" and (change.field, change.value) == ("channels_last", True)
    (stored,) = kept.changes  # kept with the run's own settings as the baseline, not a trial's
    assert stored.baseline == BASE and stored.verdict == "faster" and stored.device_name == CPU.name
    assert stored.measured_change.describe().startswith("measured 1.3")


def test_a_verification_with_no_history_measures_and_keeps_nothing():
    runs = TimedRuns(speed, noise=0.03, seed=1, device=CPU)
    ended = verify(runs, VerifyPlan(BASE, (Change("channels_last", True),), trial_steps=16))[-1]
    assert ended.status == "finished" and ended.result.changes[0].comparison.verdict == "faster"


def test_no_effect_is_within_noise_and_a_loss_is_slower():
    runs = TimedRuns(lambda config: 1000.0 * (0.8 if config.channels_last else 1.0), noise=0.03, seed=2, device=CPU)
    plan = VerifyPlan(BASE, (Change("channels_last", True), Change("num_workers", 1)), trial_steps=16)
    result = verify(runs, plan)[-1].result
    slower, same = result.changes
    assert slower.comparison.verdict == "slower" and same.comparison.verdict == "within_noise"
    assert same.text == "set num_workers=1"


def test_several_changes_share_baseline_trials_each_round_holding_one_of_each():
    runs = TimedRuns(speed, noise=0.01, seed=3, device=CPU)
    plan = VerifyPlan(BASE, (Change("channels_last", True), Change("num_workers", 1)), trial_steps=16, repeats=4)
    result = verify(runs, plan)[-1].result
    order = [("B1" if c.channels_last else "B2" if c.num_workers == 1 else "A") for c in runs.configs]
    assert order == ["A", "B1", "B2"] * 4
    first, second = result.changes
    assert first.baseline_run_ids == second.baseline_run_ids and first.comparison.trials == "4+4 trials"


def test_bad_plans_start_nothing_and_say_every_problem():
    runs = TimedRuns(speed, device=CPU)
    plan = VerifyPlan(BASE, (Change("chanels_last", True), Change("profile", False), Change("num_workers", 0),
                             Change("precision", "bf16")), trial_steps=16)
    (ended,) = verify(runs, plan)
    assert ended.status == "failed" and ended.result is None and runs.configs == []
    problems = " | ".join(ended.problems)
    assert "chanels_last is not a setting (did you mean channels_last?)" in problems
    assert "profile decides what a run learns, how long it is or what it records" in problems
    assert "num_workers=0 is already the run's setting" in problems
    assert "precision=bf16: bf16 needs a CUDA GPU" in problems
    (ended,) = verify(runs, VerifyPlan(BASE, (Change("channels_last", True),), trial_steps=2, repeats=2))
    assert ended.problems == ("a verdict needs at least 3 trials of each side (got 2)",
                              "a trial needs at least 4 steps to measure after its warm-up (got trial steps 2)")


def test_a_change_that_does_nothing_on_this_device_is_refused_with_the_reason():
    runs = TimedRuns(speed, device=CPU)
    plan = VerifyPlan(BASE, (Change("fused_optimizer", True), Change("cudnn_benchmark", False)), trial_steps=16)
    (ended,) = verify(runs, plan)
    assert ended.status == "failed" and runs.configs == []
    assert ended.problems == (
        "fused_optimizer=on changes nothing in this run: the fused optimizer kernels are a CUDA remedy for "
        "launch-bound steps: a CPU run uses the default optimizer (the value is kept for GPU runs)",
        "cudnn_benchmark=off changes nothing in this run: cuDNN is NVIDIA's: a CPU run has no cuDNN algorithms to time")
    (ended,) = verify(runs, VerifyPlan(BASE.replace(pipeline="gpu-resident"), (Change("num_workers", 2),), trial_steps=16))
    assert ended.problems == ("num_workers=2 changes nothing in this run: pipeline=gpu-resident uses no DataLoader",)
    # device=auto on a machine without CUDA trains on the CPU, as device=cpu does: identical work on both sides
    (ended,) = verify(runs, VerifyPlan(BASE.replace(device="cpu"), (Change("device", "auto"),), trial_steps=16))
    assert ended.problems == ("device=auto changes nothing in this run: it trains on the CPU here, as device=cpu "
                              "does",)
    assert runs.configs == []
    # where CUDA is, device=auto trains on the GPU: a change from device=cpu that can be measured
    assert not any("changes nothing" in problem for problem in plan_problems(
        VerifyPlan(BASE.replace(device="cpu"), (Change("device", "auto"),), trial_steps=16), GPU))


def test_every_finding_at_once_leaves_out_a_change_the_run_cannot_take_and_measures_the_rest():
    base = BASE.replace(augment="cpu")  # a resident dataset cannot augment in workers
    plan = VerifyPlan(base, (Change("pipeline", "gpu-resident"), Change("channels_last", True)), trial_steps=16)
    kept, left_out = without_unrunnable(plan, CPU)
    assert kept.changes == (Change("channels_last", True),)
    assert left_out == ["pipeline=gpu-resident left out: pipeline=gpu-resident: augment=cpu needs pipeline=dataloader "
                        "(the workers do the CPU augmentation)"]
    # None can run, or the plan itself is bad: the plan stays whole, for its problems to be said.
    alone = VerifyPlan(base, (Change("pipeline", "gpu-resident"),), trial_steps=16)
    assert without_unrunnable(alone, CPU) == (alone, [])
    short = VerifyPlan(BASE, (Change("channels_last", True), Change("num_workers", 1)), trial_steps=2)
    assert without_unrunnable(short, CPU) == (short, [])


def test_a_failing_change_is_dropped_with_its_reason_and_a_failing_baseline_ends_the_sequence():
    runs = TimedRuns(speed, device=CPU, fail=lambda config: "out_of_memory" if config.batch_size == 64 else None)
    plan = VerifyPlan(BASE, (Change("batch_size", 64), Change("channels_last", True)), trial_steps=16)
    ended = verify(runs, plan)[-1]
    big, channels = ended.result.changes
    assert ended.status == "finished" and big.reason == "fake out_of_memory" and big.changed_run_ids == ()
    assert big.comparison.speedup is None and channels.comparison.verdict == "faster"
    assert sum(config.batch_size == 64 for config in runs.configs) == 1  # not tried again

    runs = TimedRuns(speed, device=CPU, fail=lambda config: None if config.channels_last else "error")
    ended = verify(runs, VerifyPlan(BASE, (Change("channels_last", True),), trial_steps=16))[-1]
    assert ended.status == "failed" and ended.reason == "the run's own settings failed in a trial: fake error"
    assert len(runs.configs) == 1


def test_a_history_that_cannot_keep_the_measurement_says_so_and_the_result_stands():
    class Full(NoRecording):
        def add_measured_change(self, change):
            raise OSError("disk full")

    events = verify(TimedRuns(speed, device=CPU), VerifyPlan(BASE, (Change("channels_last", True),), trial_steps=16),
                    recorders=Full())
    failed = [e for e in events if isinstance(e, RecordingFailed)]
    assert len(failed) == 1 and "channels_last=on was not kept: OSError: disk full" in failed[0].reason
    assert events[-1].status == "finished" and events[-1].result.changes[0].comparison.verdict == "faster"


def test_trial_length_follows_the_runs_own_speed():
    config = tiny(batch_size=32)
    assert trial_steps_for(config, 3200.0) == 300  # 3 s at 100 steps/s
    assert trial_steps_for(config, 3200.0, run_steps=40) == 40  # never longer than the run itself
    assert trial_steps_for(config, 3200.0, run_steps=5) == 16  # never shorter than 16 steps
    assert trial_steps_for(config, None) == 16
    assert trial_config(config.replace(profile=True), 40) == config.replace(max_steps=40, log_every=5, profile=False)


def stopped_verification(after_started: int):
    """The SequenceEnded of a verification of channels_last stopped once ``after_started`` runs had started (0:
    before the first); the run under way runs to its end."""
    stop = threading.Event()
    if not after_started:
        stop.set()
    events = []
    for event in run_verify(VerifyPlan(BASE, (Change("channels_last", True),), trial_steps=16), stop.is_set,
                            None, TimedRuns(speed, device=CPU), probe_of(CPU)):
        events.append(event)
        if after_started and sum(isinstance(e, MemberStarted) for e in events) == after_started:
            stop.set()
    return events[-1]


def test_stop_between_trials_ends_the_sequence_with_what_finished():
    ended = stopped_verification(5)
    assert ended.status == "stopped" and ended.reason == "stopped by the user in round 3 of 3"
    # 2 + 2 trials: the baseline's third has no trial of the change in its round; a speedup, no interval, no verdict
    (change,) = ended.result.changes
    assert change.comparison.trials == "2+2 trials" and change.comparison.speedup_low is None


@pytest.mark.slow
def test_stop_mid_trial_ends_the_sequence_and_keeps_nothing(isolated_workbench_home):
    stop = threading.Event()
    events = []
    plan = VerifyPlan(tiny(), (Change("channels_last", True),), trial_steps=40)
    with HistoryRecording() as recording:
        for event in run_verify(plan, stop.is_set, recording):  # the real engine: it checks stop between steps
            events.append(event)
            if isinstance(event, StepStats):
                stop.set()
    ended = events[-1]
    assert ended.status == "stopped" and ended.reason == "stopped by the user in round 1 of 3"
    assert ended.result.changes[0].comparison.speedup is None
    with HistoryStore.open() as store:
        assert [run.status for run in store.sequence_runs(ended.sequence_id)] == ["stopped"]
        assert store.measured_changes(tiny(), "cpu", ended.result.device_name) == []


@pytest.mark.slow
def test_real_tiny_cpu_trials_are_recorded_and_the_measurement_kept(isolated_workbench_home):
    base = tiny(max_steps=None, epochs=1, channels_last=False)
    plan = VerifyPlan(base, (Change("channels_last", True),), trial_steps=8, run_id=None, max_trials=3)
    with HistoryRecording() as recording:
        ended = list(run_verify(plan, lambda: False, recording))[-1]
    assert ended.status == "finished", ended.reason
    (change,) = ended.result.changes
    assert len(change.comparison.baseline_rates) == len(change.comparison.changed_rates) == 3
    assert change.comparison.verdict in ("faster", "slower", "within_noise") and change.comparison.speedup_low
    with HistoryStore.open() as store:
        runs = store.sequence_runs(ended.sequence_id)
        assert [run.config.channels_last for run in runs] == [False, True] * 3
        assert all(run.status == "finished" and run.config.max_steps == 8 for run in runs)
        (kept,) = store.measured_changes(base.replace(epochs=5, seed=3), "cpu", ended.result.device_name)
        assert kept.sequence_id == ended.sequence_id and kept.baseline == base
        assert kept.baseline_run_ids == change.baseline_run_ids == tuple(run.id for run in runs[::2])
        assert kept.speedup == pytest.approx(change.comparison.speedup)



def test_verify_names_its_baseline_trials_by_the_runs_own_values_of_the_changed_setting():
    """Issue 30 §5: the baseline's trials had no values, so the window named them "#1" against "true"."""
    events = verify(TimedRuns(speed, noise=0.03, seed=1, device=CPU),
                    VerifyPlan(BASE, (Change("channels_last", True),), trial_steps=16))
    started = [event.values for event in events if isinstance(event, MemberStarted)]
    assert started == [(("channels_last", False),), (("channels_last", True),)] * 3


def test_an_undecided_change_gets_more_trials_up_to_the_budget_and_says_it_is_too_noisy_to_tell():
    """Issue 30 §4: three verifications of the same change on a busy machine gave three answers, each honest and
    none an answer. An interval that still straddles the noise band earns another round, up to the budget."""
    runs = TimedRuns(lambda config: 1000.0, noise=0.12, seed=4, device=CPU)
    events = verify(runs, VerifyPlan(BASE, (Change("channels_last", True),), trial_steps=16, max_trials=6))
    result = events[-1].result
    change = result.changes[0]
    assert len(runs.configs) == 12 and [config.channels_last for config in runs.configs] == [False, True] * 6
    assert not change.decided
    assert change.undecided_text.startswith("too noisy here to tell: 6+6 trials, the interval spans ")
    # the baseline's own trials spread far more than a quiet machine's: said so
    assert result.busy is not None and "the baseline's own 6 trials" in result.busy


def test_a_decided_change_stops_at_the_planned_trials():
    runs = TimedRuns(speed, noise=0.01, seed=5, device=CPU)
    events = verify(runs, VerifyPlan(BASE, (Change("channels_last", True),), trial_steps=16))
    change = events[-1].result.changes[0]
    assert len(runs.configs) == 6 and change.decided and change.undecided_text is None
    assert events[-1].result.busy is None


def test_a_busy_machine_is_named_from_the_load_and_from_the_baselines_own_spread():
    from workbench.experiments.verify import busy_machine

    assert busy_machine([1000.0, 1010.0, 990.0], (0.5, 2)) is None
    assert busy_machine([1000.0, 1010.0, 990.0], (3.7, 2)) == "this machine is busy: the load average was 3.7 on 2 cores"
    text = busy_machine([700.0, 1000.0, 1050.0], None)
    assert text.startswith("this machine is busy: the baseline's own 3 trials (the same settings each time) spread 35%")



def test_the_busy_spread_is_over_the_median_every_other_output_gives_an_even_count_of_trials():
    """It took the upper middle trial as the median of four: 16 / 107 = 14.95 %, "quiet", where the median the
    comparison itself states (103.5) gives 15.5 %, over the 15 % a busy machine's spread begins at."""
    from workbench.experiments.verify import busy_machine

    text = busy_machine([100.0, 100.0, 107.0, 116.0], None)
    assert text is not None and "spread 15%" in text

def test_a_change_decided_early_is_held_only_against_the_baseline_trials_of_its_own_rounds():
    """channels_last, a real 1.30×, was decided after three rounds and ran no more; the baseline ran on for a noisy
    second change while the machine got busy (100 → 50 img/s), and the final comparison took all eight baseline
    trials against its three: "2.60×: faster", stored in the history so."""
    from builders import ended, started

    calls = []

    def run_function(config, stop):
        calls.append(config)
        yield started(config, CPU)
        load = 1.0 if len(calls) <= 9 else 0.5  # busy from the fourth round on
        wobble = [0.9, 1.1, 1.0, 0.92, 1.08, 0.95, 1.05, 1.0][(len(calls) - 1) // 3 % 8]
        rate = 130.0 if config.channels_last else 100.0 * wobble if config.num_workers == 1 else 100.0
        yield ended("finished", rate * load, device_type=CPU.type, device_name=CPU.name)

    class Kept(NoRecording):
        def __init__(self):
            self.changes = []

        def add_measured_change(self, change):
            self.changes.append(change)

    base = tiny(max_steps=None, epochs=2, log_every=10, channels_last=False, num_workers=0)
    plan = VerifyPlan(base, (Change("channels_last", True), Change("num_workers", 1)), trial_steps=16)
    kept = Kept()
    end = list(run_verify(plan, lambda: False, kept, run_function, probe_of(CPU)))[-1]
    layout, workers = end.result.changes
    assert len(workers.comparison.baseline_rates) == 8  # the baseline did run on
    assert layout.comparison.baseline_rates == (100.0, 100.0, 100.0)  # its own three rounds' baseline
    assert layout.comparison.speedup == pytest.approx(1.30) and layout.decided
    stored = next(change for change in kept.changes if change.field == "channels_last")
    assert stored.speedup == pytest.approx(1.30) and len(stored.baseline_run_ids) == 3


def test_a_verification_stopped_before_an_interval_says_no_verdict_not_within_the_noise():
    """2+2 trials give a speedup but no interval: --json said "within_noise", as if measured inside the noise band."""
    from workbench.cli.verify_command import results_table, verify_json

    ended = stopped_verification(5)
    (finding,) = verify_json(1, ended, ended.result)["findings"]
    assert finding["speedup"] is not None and finding["speedup_low"] is None and finding["verdict"] == "no_verdict"
    assert "no verdict" in results_table(ended.result) and "within" not in results_table(ended.result)


def test_a_stop_between_rounds_says_after_the_last_round_run_not_in_one_never_begun():
    for started_runs, words in ((4, "stopped by the user after round 2 of 3"), (0, "stopped by the user before its "
                                                                                  "first trial")):
        ended = stopped_verification(started_runs)  # the fourth run (round 2's change) still runs to its end
        assert ended.status == "stopped" and ended.reason == words
