"""The primitive under every sequence (experiments.rounds): arms run interleaved, round after round; what a failed
run means for its arm; more rounds while asked; stop."""

from builders import GPU, TimedRuns, tiny

from workbench.experiments.events import MemberEnded, MemberStarted
from workbench.experiments.members import MemberRunner
from workbench.experiments.recording import NoRecording
from workbench.experiments.rounds import Arm, Rounds, run_rounds

BASE = tiny(max_steps=8)


def arms_of(*num_workers, **options):
    return [Arm(BASE.replace(num_workers=n), (("num_workers", n),), **options) for n in num_workers]


def run(arms, rounds=1, runs=None, stop=lambda: False, **options) -> tuple[list, Rounds]:
    runs = runs or TimedRuns(lambda config: 1000.0 * (1 + config.num_workers))
    runner = MemberRunner(runs, NoRecording(), None)
    events = run_rounds(runner, arms, stop, lambda arm, round_index: f"arm {arm} round {round_index}", rounds,
                        **options)
    seen = []
    while True:
        try:
            seen.append(next(events))
        except StopIteration as end:
            return seen, end.value


def test_arms_run_round_robin_for_the_rounds_asked():
    events, ran = run(arms_of(0, 1, 2), rounds=3)
    assert [m.config.num_workers for m in ran.members] == [0, 1, 2] * 3
    assert ran.status == "finished" and ran.rounds_begun == 3
    assert ran.rates(1) == [m.images_per_sec for m in ran.runs(1)] and len(ran.rates(1)) == 3
    # Each member between MemberStarted and MemberEnded, indexed in the order it ran.
    assert [e.index for e in events if isinstance(e, MemberStarted)] == list(range(9))
    assert [e.index for e in events if isinstance(e, MemberEnded)] == list(range(9))


def fails_at(num_workers):
    return lambda config: "error" if config.num_workers == num_workers else None


def test_a_failed_run_of_an_arm_that_goes_on_runs_again_next_round():
    runs = TimedRuns(lambda config: 1000.0, fail=fails_at(1))
    _, ran = run(arms_of(0, 1), rounds=2, runs=runs)
    assert [m.status for m in ran.members] == ["finished", "failed", "finished", "failed"]
    assert ran.failed is None and not ran.dropped


def test_a_dropped_arm_runs_no_more_and_the_others_go_on():
    runs = TimedRuns(lambda config: 1000.0, fail=fails_at(1))
    _, ran = run(arms_of(0, 1, 2, on_failure="drop"), rounds=3, runs=runs)
    assert [m.config.num_workers for m in ran.members] == [0, 1, 2, 0, 2, 0, 2]
    assert list(ran.dropped) == [1] and ran.failure(1) == "fake error" and ran.failure(0) is None


def test_a_failure_that_ends_stops_everything_and_says_which_arm():
    runs = TimedRuns(lambda config: 1000.0, fail=fails_at(1))
    _, ran = run(arms_of(0, 1, 2, on_failure="end"), rounds=3, runs=runs)
    assert [m.config.num_workers for m in ran.members] == [0, 1]
    assert ran.failed is not None and ran.failed[0] == 1 and ran.status == "failed"  # the sequence ends on it: failed


def test_a_measurement_without_a_rate_is_a_failure_only_where_a_rate_is_needed():
    no_rate = TimedRuns(lambda config: 0.0)
    _, ran = run(arms_of(0, on_failure="end"), rounds=2, runs=no_rate)
    assert len(ran.members) == 2 and ran.failed is None
    _, ran = run(arms_of(0, on_failure="end", needs_rate=True), rounds=2, runs=TimedRuns(lambda config: 0.0))
    assert len(ran.members) == 1 and ran.failed is not None


def test_more_rounds_run_the_arms_asked_for_up_to_the_most_allowed():
    asked = []

    def more(ran):
        asked.append(len(ran.members))
        return [0, 2]  # arm 1 has its answer

    _, ran = run(arms_of(0, 1, 2), rounds=2, max_rounds=4, more=more)
    assert [m.config.num_workers for m in ran.members] == [0, 1, 2, 0, 1, 2, 0, 2, 0, 2]
    assert asked == [6, 8] and ran.rounds_begun == 4
    _, ran = run(arms_of(0, 1), rounds=2, max_rounds=4, more=lambda ran: [])
    assert len(ran.members) == 4 and ran.rounds_begun == 2


def test_stop_before_a_run_and_during_one_are_told_apart():
    calls = []

    def stop_before_third():
        calls.append(1)
        return len(calls) >= 3

    _, ran = run(arms_of(0, 1), rounds=2, stop=stop_before_third)
    assert ran.status == "stopped" and not ran.stopped_during_run and len(ran.members) == 2

    def stopped_run(config, stop):
        from builders import ended, started

        yield started(config, GPU)
        yield ended("stopped")

    _, ran = run(arms_of(0, 1), rounds=2, runs=stopped_run)
    assert ran.status == "stopped" and ran.stopped_during_run and len(ran.members) == 1


def test_each_run_is_seen_as_it_ends_and_a_hook_may_end_the_sequence():
    seen = []

    class Budget(Exception):
        pass

    def after_run(arm, member):
        seen.append((arm, member.status))
        if len(seen) == 3:
            raise Budget

    try:
        run(arms_of(0, 1), rounds=3, after_run=after_run)
    except Budget:
        pass
    assert seen == [(0, "finished"), (1, "finished"), (0, "finished")]
