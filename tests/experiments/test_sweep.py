"""Sweeps: members are ordinary runs tagged with one sweep id; bad values start nothing; stop ends the sweep."""

import csv
import threading

from builders import CPU, GPU, TimedRuns, probe_of, tiny

from workbench.engine.events import RunEnded, RunStarted, StepStats
from workbench.experiments.events import MemberEnded, MemberStarted, SequenceEnded, SequenceStarted
from workbench.experiments.recording import HistoryRecording
from workbench.experiments.sweep import SweepAxis, SweepPlan, plan_problems, run_sweep
from workbench.history.export import export_runs_csv
from workbench.history.store import HistoryStore


def test_three_tiny_cpu_members_land_three_runs_with_one_sweep_id(tmp_path, isolated_workbench_home):
    plan = SweepPlan(tiny(max_steps=4, log_every=2), (SweepAxis("batch_size", (16, 32, 64)),))
    with HistoryRecording() as recording:
        events = list(run_sweep(plan, lambda: False, recording))  # the real engine, on the CPU

    started = [e for e in events if isinstance(e, SequenceStarted)]
    ended = events[-1]
    assert len(started) == 1 and isinstance(ended, SequenceEnded) and ended.status == "finished"
    members = ended.result.members
    assert [m.status for m in members] == ["finished"] * 3
    assert [m.values for m in members] == [(("batch_size", 16),), (("batch_size", 32),), (("batch_size", 64),)]
    # Each member's own engine events come between its MemberStarted and MemberEnded.
    kinds = [type(e) for e in events]
    assert kinds.count(RunStarted) == kinds.count(RunEnded) == 3
    first_member = kinds.index(MemberStarted)
    assert kinds[first_member + 1:].index(MemberEnded) > kinds[first_member + 1:].index(StepStats)

    with HistoryStore.open() as store:
        runs = store.sequence_runs(ended.sequence_id)
        assert [run.id for run in runs] == [m.run_id for m in members]
        assert {run.sequence_id for run in runs} == {ended.sequence_id}
        assert [run.config.batch_size for run in runs] == [16, 32, 64]
        assert all(run.status == "finished" and run.summary.images_per_sec for run in runs)
        assert runs[0].sequence_name == "sweep batch_size" and runs[1].name == "synthetic: batch_size=32"
        export_runs_csv(store, tmp_path / "runs.csv")
    with open(tmp_path / "runs.csv", encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    assert [(row["sequence_id"], row["sequence_name"]) for row in rows] == [(str(ended.sequence_id), "sweep batch_size")] * 3


def test_one_invalid_member_value_starts_nothing_and_every_problem_is_listed(isolated_workbench_home):
    runs = TimedRuns(lambda config: 100.0, device=CPU)
    plan = SweepPlan(tiny(), (SweepAxis("precision", ("fp32", "fp16")), SweepAxis("num_workers", (0, 99))))
    with HistoryRecording() as recording:
        events = list(run_sweep(plan, lambda: False, recording, run_function=runs, probe=probe_of(CPU)))
    assert len(events) == 1 and isinstance(events[0], SequenceEnded)
    assert events[0].status == "failed" and events[0].result is None
    assert events[0].problems == (
        "num_workers must be between 0 and 64 (got 99) (num_workers=99)",
        "fp16 needs a CUDA GPU (precision=fp16)",
    )
    assert runs.configs == []
    with HistoryStore.open() as store:
        assert store.list_runs() == []
        assert store._conn.execute("SELECT COUNT(*) FROM sequences").fetchone()[0] == 0


def test_plan_problems_name_unknown_and_repeated_settings():
    plan = SweepPlan(tiny(), (SweepAxis("num_worker", (0,)), SweepAxis("num_worker", (1, 1))))
    assert plan_problems(plan, probe_of(CPU)) == [
        "num_worker is swept twice: give a second, different setting",
        "num_worker is not a setting (did you mean num_workers?)",
        "num_worker is not a setting (did you mean num_workers?)",
        "num_worker lists 1 more than once",
    ]
    assert plan_problems(SweepPlan(tiny(), ()), probe_of(CPU)) == ["a sweep needs a setting to vary and its values"]


def test_a_grid_runs_every_combination_first_setting_slowest():
    runs = TimedRuns(lambda config: 100.0 * (1 + config.num_workers), device=GPU)
    plan = SweepPlan(tiny(device="auto"), (SweepAxis("precision", ("fp32", "bf16")), SweepAxis("num_workers", (0, 2))))
    ended = list(run_sweep(plan, lambda: False, run_function=runs, probe=probe_of(GPU)))[-1]
    assert [(c.precision, c.num_workers) for c in runs.configs] == [("fp32", 0), ("fp32", 2), ("bf16", 0), ("bf16", 2)]
    assert [m.images_per_sec > 250 for m in ended.result.members] == [False, True, False, True]
    assert all(m.run_id is None for m in ended.result.members)  # no recording asked for


def test_a_failed_member_is_marked_failed_and_the_sweep_goes_on():
    runs = TimedRuns(lambda config: 100.0, device=GPU,
                     fail=lambda config: "out_of_memory" if config.batch_size == 64 else None)
    plan = SweepPlan(tiny(device="auto"), (SweepAxis("batch_size", (32, 64, 96)),))
    ended = list(run_sweep(plan, lambda: False, run_function=runs, probe=probe_of(GPU)))[-1]
    assert ended.status == "finished"
    assert [(m.status, m.kind) for m in ended.result.members] == [
        ("finished", None), ("failed", "out_of_memory"), ("finished", None)]


def test_stop_ends_the_whole_sweep(isolated_workbench_home):
    stop = threading.Event()
    plan = SweepPlan(tiny(max_steps=40, log_every=1), (SweepAxis("num_workers", (0, 1, 2)),))
    events = []
    with HistoryRecording() as recording:
        for event in run_sweep(plan, stop.is_set, recording):  # the real engine: it checks stop between steps
            events.append(event)
            if isinstance(event, StepStats) and event.step == 2:
                stop.set()
    ended = events[-1]
    assert ended.status == "stopped" and "during member 1 of 3" in ended.reason
    assert [m.status for m in ended.result.members] == ["stopped"]
    assert sum(isinstance(e, MemberStarted) for e in events) == 1
    with HistoryStore.open() as store:
        assert [run.status for run in store.sequence_runs(ended.sequence_id)] == ["stopped"]


def test_closing_the_sequence_mid_member_fails_that_run_in_the_history(isolated_workbench_home):
    plan = SweepPlan(tiny(max_steps=40, log_every=1), (SweepAxis("num_workers", (0, 1)),))
    with HistoryRecording() as recording:
        sequence = run_sweep(plan, lambda: False, recording)
        for event in sequence:
            if isinstance(event, StepStats):
                break
        sequence.close()
        runs = recording.store.list_runs()
    assert [(run.status, run.reason) for run in runs] == [("failed", "the sequence was closed before this run ended")]


def test_sigterm_stops_a_sweep_the_cli_drives_and_its_reason_names_it(isolated_workbench_home):
    import os
    import signal

    from workbench.cli.sequence_output import drive

    runs = TimedRuns(lambda config: 1000.0)

    def first_member_gets_sigterm(config, stop):
        if not runs.configs:
            os.kill(os.getpid(), signal.SIGTERM)  # as a service manager stops the service
        return runs(config, stop)

    plan = SweepPlan(tiny(device="auto"), (SweepAxis("batch_size", (16, 32, 64)),))
    from workbench.cli.interrupts import exit_saying_so

    try:
        ended = drive(lambda stop: run_sweep(plan, stop, run_function=first_member_gets_sigterm, probe=probe_of(CPU)))
        # Given back, save that a repeat while the process exits ends it with one line, not silently
        assert signal.getsignal(signal.SIGTERM) is exit_saying_so
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    assert (ended.status, ended.reason) == ("stopped", "stopped by SIGTERM after 1 of 3 members")


def test_repeats_run_round_robin_and_each_value_reads_as_the_median_of_its_runs_with_an_interval(
        isolated_workbench_home):
    """Issue 23: --repeats N runs every value N times, interleaved (a b a b …), grouped in one sequence."""
    from workbench.experiments.rate_over_runs import per_value

    speeds = iter([1000, 2000, 1100, 2300, 900, 2100])  # in the order the members run
    runs = TimedRuns(lambda config: next(speeds), noise=0.0, device=GPU)
    plan = SweepPlan(tiny(device="auto"), (SweepAxis("precision", ("fp32", "bf16")),), repeats=3)
    with HistoryRecording() as recording:
        events = list(run_sweep(plan, lambda: False, recording, run_function=runs, probe=probe_of(GPU)))
    ended = events[-1]
    assert [c.precision for c in runs.configs] == ["fp32", "bf16"] * 3
    assert events[0].planned_members == 6 and ended.result.repeats == 3
    fp32, bf16 = per_value(ended.result.members)
    assert fp32.values == (("precision", "fp32"),) and fp32.rate.rates == (1000, 1100, 900)
    assert (fp32.rate.images_per_sec, fp32.rate.images_per_sec_low, fp32.rate.images_per_sec_high) == (1000, 900, 1100)
    assert fp32.rate.confidence == 0.75 and fp32.rate.interval_from == "repeats"  # 3 runs: min to max, said
    assert bf16.rate.images_per_sec == 2100
    with HistoryStore.open() as store:
        history = store.sequence_runs(ended.sequence_id)
        plan_json = store._conn.execute("SELECT plan_json FROM sequences WHERE id = ?", (ended.sequence_id,)).fetchone()[0]
    assert [run.id for run in history] == [m.run_id for m in ended.result.members]  # one sequence: grouped
    assert [run.name for run in history[:3]] == ["synthetic: precision=fp32, repeat 1/3",
                                                 "synthetic: precision=bf16, repeat 1/3",
                                                 "synthetic: precision=fp32, repeat 2/3"]
    assert '"repeats": 3' in plan_json
    assert fp32.run_ids == tuple(run.id for run in history[0::2])


def test_a_sweep_needs_at_least_one_repeat():
    plan = SweepPlan(tiny(), (SweepAxis("num_workers", (0, 1)),), repeats=0)
    assert plan_problems(plan, probe_of(CPU)) == ["repeats must be between 1 and 100 (got 0)"]


def test_a_sweep_with_repeats_keeps_each_value_against_each_other_for_the_findings(isolated_workbench_home):
    """Issue 23 §2: what a sweep measured speaks for the findings of a run at any of its values, both ways."""
    speed = {0: 600.0, 1: 800.0, 2: 1000.0}
    runs = TimedRuns(lambda config: speed[config.num_workers], noise=0.01, seed=4, device=CPU)
    base = tiny(num_workers=0)
    plan = SweepPlan(base, (SweepAxis("num_workers", (0, 1, 2)),), repeats=3)
    with HistoryRecording() as recording:
        assert list(run_sweep(plan, lambda: False, recording, runs, probe_of(CPU)))[-1].status == "finished"
    with HistoryStore.open() as store:
        from_none = store.measured_changes(base, CPU.type, CPU.name)
        from_two = store.measured_changes(base.replace(num_workers=2), CPU.type, CPU.name)
        once = SweepPlan(base, (SweepAxis("num_workers", (0, 1)),), repeats=1)  # one run each: no interval, none kept
        with HistoryRecording() as recording:
            list(run_sweep(once, lambda: False, recording, runs, probe_of(CPU)))
        assert len(store.measured_changes(base, CPU.type, CPU.name)) == 2
    assert {(c.value, c.verdict, round(c.speedup, 1)) for c in from_none} == {(1, "faster", 1.3), (2, "faster", 1.7)}
    assert {(c.value, c.verdict) for c in from_two} == {(0, "slower"), (1, "slower")}
    assert all(c.field == "num_workers" and len(c.changed_run_ids) == 3 for c in from_none + from_two)
