"""`workbench run --repeats N`: the same run N times, grouped as one "repeats" sequence in the history, read as
the median of the runs' images/sec and its interval; bad input exits 2 with one line."""

import json
import statistics

import pytest
from builders import CPU, TimedRuns, probe_of, tiny

from workbench.experiments.events import SequenceEnded, SequenceStarted
from workbench.experiments.recording import HistoryRecording
from workbench.experiments.repeats import RepeatsPlan, run_repeats
from workbench.history.store import HistoryStore

TINY = ["--dataset", "synthetic", "--synthetic-size", "64", "--max-steps", "4", "--log-every", "1",
        "--device", "cpu", "--num-workers", "0", "--batch-size", "16"]


def test_repeats_are_one_sequence_in_the_history_and_read_as_their_median():
    speeds = iter([1000.0, 1300.0, 900.0])
    runs = TimedRuns(lambda config: next(speeds), noise=0.0, device=CPU)
    with HistoryRecording() as recording:
        events = list(run_repeats(RepeatsPlan(tiny(), 3), lambda: False, recording, runs, probe_of(CPU)))
    started, ended = events[0], events[-1]
    assert isinstance(started, SequenceStarted) and (started.kind, started.planned_members) == ("repeats", 3)
    assert ended.kind == "repeats" and ended.status == "finished" and ended.result.repeats == 3
    assert runs.configs == [tiny()] * 3
    with HistoryStore.open() as store:
        history = store.sequence_runs(ended.sequence_id)
        kind, plan = store._conn.execute("SELECT kind, plan_json FROM sequences WHERE id = ?",
                                         (ended.sequence_id,)).fetchone()
    assert kind == "repeats" and json.loads(plan)["repeats"] == 3
    assert [run.id for run in history] == [m.run_id for m in ended.result.members]
    assert [run.name for run in history] == [f"synthetic: repeat {n}/3" for n in (1, 2, 3)]
    from workbench.controller.messages import sequence_ended_text
    assert sequence_ended_text(ended) == ("Repeats finished: 3 members ran: 1,000 img/s (median of 3 runs, "
                                          "900–1,300 (75 %)).")


def test_a_failed_repeat_ends_the_repeats_and_stop_ends_them_too():
    runs = TimedRuns(lambda config: 100.0, device=CPU, fail=lambda config: "out_of_memory" if len(runs.configs) == 2 else None)
    ended = list(run_repeats(RepeatsPlan(tiny(), 5), lambda: False, run_function=runs, probe=probe_of(CPU)))[-1]
    assert [m.status for m in ended.result.members] == ["finished", "failed"]
    assert ended.status == "failed"  # it read "finished", with the failure as its reason (--json "status" too)
    assert ended.reason == "run 2 of 5 failed (fake out_of_memory); the other 3 were not run"
    runs = TimedRuns(lambda config: 100.0, device=CPU, fail=lambda config: "out_of_memory" if len(runs.configs) == 1 else None)
    ended = list(run_repeats(RepeatsPlan(tiny(), 2), lambda: False, run_function=runs, probe=probe_of(CPU)))[-1]
    assert ended.reason == "run 1 of 2 failed (fake out_of_memory); the other 1 was not run"

    runs = TimedRuns(lambda config: 100.0, device=CPU)
    ended = list(run_repeats(RepeatsPlan(tiny(), 3), lambda: len(runs.configs) == 1, run_function=runs,
                             probe=probe_of(CPU)))[-1]
    assert ended.status == "stopped" and ended.reason == "stopped by the user after 1 of 3 runs"


def test_bad_repeats_start_nothing():
    runs = TimedRuns(lambda config: 100.0, device=CPU)
    for plan, problem in ((RepeatsPlan(tiny(), 0), "repeats must be between 1 and 100 (got 0)"),
                          (RepeatsPlan(tiny(precision="fp16"), 3), "fp16 needs a CUDA GPU")):
        events = list(run_repeats(plan, lambda: False, run_function=runs, probe=probe_of(CPU)))
        assert [type(e) for e in events] == [SequenceEnded] and events[0].problems == (problem,)
    assert runs.configs == []


def test_run_with_repeats_prints_the_runs_and_one_json_object_over_them(capsys):
    """Issue 23: `workbench run … --repeats N --json` prints one object with run_ids and the median images/sec
    and its interval over the N runs; the runs are one sequence in the history."""
    from workbench.cli import main

    code = main(["run", *TINY, "--repeats", "3", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["REPEAT", "RUN", "STATUS", "IMG/S"] and len(lines) == 6
    assert lines[4].startswith("median: ") and "over 3 runs, interval " in lines[4] and "(75 %" in lines[4]
    result = json.loads(lines[-1])
    assert len(result["run_ids"]) == 3 and all(isinstance(run_id, int) for run_id in result["run_ids"])
    with HistoryStore.open() as store:
        history = store.sequence_runs(result["sequence_id"])
    assert [run.id for run in history] == result["run_ids"]
    rates = [run.summary.images_per_sec for run in history]
    assert result["images_per_sec"] == pytest.approx(statistics.median(rates))
    assert (result["images_per_sec_low"], result["images_per_sec_high"]) == (pytest.approx(min(rates)),
                                                                              pytest.approx(max(rates)))
    assert result["interval_confidence"] == 0.75 and result["interval_from"] == "repeats"
    # Each run's own summary, in the single run's --json shape (images_per_sec a number there too).
    assert [run["run_id"] for run in result["runs"]] == result["run_ids"]
    assert result["runs"][0]["images_per_sec"] == pytest.approx(rates[0])
    assert result["config"]["max_steps"] == 4 and result["status"] == "finished"


@pytest.mark.parametrize("args, line", [
    (["--repeats", "0"], "workbench run: --repeats must be between 1 and 100 (got 0)"),
    (["--repeats", "-2"], "workbench run: --repeats must be between 1 and 100 (got -2)"),
    (["--repeats", "three"], "workbench run: argument --repeats: invalid int value: 'three'"),
    (["--repeats", "1000000000000"], "workbench run: --repeats must be between 1 and 100 (got 1,000,000,000,000)"),
    (["--repeats", "3", "--precision", "fp16"], "workbench run: fp16 needs a CUDA GPU"),
    (["--vary-seed"], "workbench run: --vary-seed gives each repeat its own seed: it needs --repeats N"),
])
def test_bad_repeats_exit_2_with_one_line_and_record_nothing(capsys, args, line):
    from workbench.cli import main

    code = main(["run", *TINY, *args])
    out, err = capsys.readouterr()
    assert (code, err.strip(), out) == (2, line, "")
    with HistoryStore.open() as store:
        assert store.list_runs() == []
        assert store._conn.execute("SELECT COUNT(*) FROM sequences").fetchone()[0] == 0


def test_a_sweep_with_repeats_prints_each_value_over_its_runs_and_the_json_carries_them(capsys):
    from workbench.cli import main

    code = main(["sweep", "--param", "batch_size", "--values", "8,16", "--repeats", "3", *TINY, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].split()[:3] == ["BATCH_SIZE", "RUN", "STATUS"]
    assert [line.split()[0] for line in lines[1:7]] == ["8", "16"] * 3  # round-robin
    header = lines[8].split()
    assert header[:4] == ["BATCH_SIZE", "RUNS", "MEDIAN", "IMG/S"] and "VERDICT" in header
    assert lines[10].split()[:2] == ["16", "3/3"] and lines[10].split()[-1] in ("faster", "slower", "noise")
    result = json.loads(lines[-1])
    assert result["repeats"] == 3 and len(result["members"]) == 6
    first, second = result["per_value"]
    assert (first["batch_size"], second["values"]) == (8, {"batch_size": 16})
    assert len(first["run_ids"]) == 3 and first["run_ids"] == [m["run_id"] for m in result["members"][0::2]]
    rates = [m["images_per_sec"] for m in result["members"][0::2]]
    assert first["images_per_sec"] == pytest.approx(statistics.median(rates))
    assert (first["images_per_sec_low"], first["images_per_sec_high"]) == (pytest.approx(min(rates)),
                                                                            pytest.approx(max(rates)))
    assert first["interval_confidence"] == 0.75 and first["verdict"] is None
    assert second["verdict"] in ("faster", "slower", "within_noise")
    assert second["speedup_low"] <= second["speedup"] <= second["speedup_high"]


def test_a_sweep_with_no_repeats_is_refused_with_one_line(capsys):
    from workbench.cli import main

    code = main(["sweep", "--param", "batch_size", "--values", "8,16", "--repeats", "0", *TINY])
    out, err = capsys.readouterr()
    assert (code, err.strip(), out) == (2, "workbench sweep: --repeats must be between 1 and 100 (got 0)", "")
    code = main(["sweep", "--param", "batch_size", "--values", "16", "--repeats", "1000000000000", *TINY])
    out, err = capsys.readouterr()  # the list of its runs was a MemoryError, with a traceback
    assert (code, err.strip(), out) == (
        2, "workbench sweep: --repeats must be between 1 and 100 (got 1,000,000,000,000)", "")


def test_repeats_without_history_still_read_as_their_median_and_two_give_no_interval(capsys):
    from workbench.cli import main

    code = main(["run", *TINY, "--repeats", "2", "--no-history", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["run_ids"] == [None, None] and result["sequence_id"] is None
    rates = [run["images_per_sec"] for run in result["runs"]]
    assert result["images_per_sec"] == pytest.approx(statistics.median(rates))
    assert (result["images_per_sec_low"], result["images_per_sec_high"], result["interval_from"]) == (None, None, None)
    assert "median: " in out and ": no interval under 3 runs" in out
    with HistoryStore.open() as store:
        assert store.list_runs() == []


def test_repeats_over_seeds_give_each_run_its_seed_and_the_accuracy_its_spread(capsys):
    """Issue 30 §7: every repeat reused one seed and reached the same accuracy; a question about accuracy needs
    repeats over seeds."""
    from workbench.cli import main

    tiny_epochs = ["--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "32", "--epochs", "1",
                   "--num-workers", "0", "--device", "cpu", "--seed", "7"]
    code = main(["run", *tiny_epochs, "--repeats", "3", "--vary-seed", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["seeds"] == [7, 8, 9]
    with HistoryStore.open() as store:
        history = store.sequence_runs(result["sequence_id"])
    assert [run.config.seed for run in history] == [7, 8, 9]
    accuracies = [run.summary.test_accuracy for run in history]
    assert result["test_accuracy_median"] == pytest.approx(statistics.median(accuracies))
    assert (result["test_accuracy_min"], result["test_accuracy_max"]) == (min(accuracies), max(accuracies))
    assert "test accuracy over 3 seeds: median " in out and "1 (seed 7)" in out


def test_repeats_that_finished_without_a_steady_window_are_not_said_as_none_finished():
    """`run --repeats 2 --max-steps 3` with log_every 10: both runs finished, their steps all in the warm-up window;
    the median line said "no run finished" under a table of two finished runs."""
    from workbench.cli.repeats import median_line
    from workbench.engine.run_summary import NO_STEADY_WINDOW, RunSummary
    from workbench.experiments.rate_over_runs import rate_over

    rate = rate_over([RunSummary(status="finished", steps=3), RunSummary(status="finished", steps=3)])
    assert rate.images_per_sec is None
    assert median_line(rate, 2) == (f"median: n/a (no finished run had a steady-state img/s (2 finished; "
                                    f"{NO_STEADY_WINDOW}))")
    assert rate_over([RunSummary(status="failed", steps=3)]).describe() == "no run finished"
