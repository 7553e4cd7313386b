"""`workbench sweep | tune | max-batch` as a user runs them: a process, exit codes, the --json last line."""

import csv

import pytest
from builders import last_json, workbench_cli

TINY = ["--dataset", "synthetic", "--synthetic-size", "256", "--max-steps", "4", "--log-every", "2",
        "--device", "cpu", "--num-workers", "0"]


@pytest.mark.slow  # several seconds of processes or training: the fast tier stays under 5 minutes
def test_sweep_of_three_members_prints_a_table_and_json_and_lands_in_history_and_csv(tmp_path):
    done = workbench_cli("sweep", "--param", "batch_size", "--values", "16,32,64", *TINY, "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["BATCH_SIZE", "RUN", "STATUS"] and len(lines) == 5
    # The table has the peak RSS of each member: on a CPU the process's resident memory (issue 22).
    header, *rows = lines[:4]
    assert "PEAK RSS" in header
    column = header.index("PEAK RSS")
    assert all("MiB" in row[column - 4:column + 12] for row in rows), done.stdout
    result = last_json(done.stdout)
    assert isinstance(result["sequence_id"], int) and result["status"] == "finished"
    members = result["members"]
    assert [m["batch_size"] for m in members] == [16, 32, 64]
    assert [m["values"] for m in members] == [{"batch_size": 16}, {"batch_size": 32}, {"batch_size": 64}]
    for member in members:
        assert member["status"] == "finished" and member["images_per_sec"] > 0
        assert set(member) >= {"run_id", "data_wait_fraction", "peak_memory_bytes", "test_accuracy"}
        peaks = member["peak_memory_bytes"]
        assert {name: peaks[name] for name in ("torch_allocated", "torch_reserved", "nvml_device_used")} == dict.fromkeys(
            ("torch_allocated", "torch_reserved", "nvml_device_used"))
        assert peaks["process_rss"] > 0  # on a CPU the process's resident memory (issue 22)

    exported = workbench_cli("export", "--out", str(tmp_path / "runs.csv"))
    assert exported.returncode == 0, exported.stderr
    with open(tmp_path / "runs.csv", encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file))
    assert [(int(r["run_id"]), r["sequence_id"], r["sequence_name"]) for r in rows] == [
        (m["run_id"], str(result["sequence_id"]), "sweep batch_size") for m in members]
    listed = workbench_cli("runs")
    assert "SEQUENCE" in listed.stdout.splitlines()[0]
    assert listed.stdout.count(f"{result['sequence_id']} sweep batch_size") == 3


@pytest.mark.parametrize("args, line", [
    (["sweep", "--param", "precision", "--values", "fp32,fp16", *TINY],
     "workbench sweep: fp16 needs a CUDA GPU (precision=fp16)"),
    (["sweep", "--param", "num_workers", "--values", "0,two", *TINY],
     "workbench sweep: num_workers takes whole numbers (got 'two')"),
    (["sweep", "--param", "num-workers", "--values", "0", "--param2", "batch_size", *TINY],
     "workbench sweep: --param2 and --values2 go together"),
    (["sweep", "--param", "batchsize", "--values", "8", *TINY],
     "workbench sweep: batchsize is not a setting (did you mean batch_size?)"),
    (["tune", *TINY, "--knobs", "turbo"],
     "workbench tune: turbo is not a knob the search can try (knobs: placement, precision, channels_last, "
     "num_workers, pin_memory, non_blocking, persistent_workers, prefetch_factor, fused_optimizer, compile, batch_size, "
     "accumulation_steps)"),
    (["tune", *TINY, "--batch-size", "0"], "workbench tune: batch_size must be between 1 and 65536 (got 0)"),
    (["tune", *TINY, "--knobs", ""], "workbench tune: no knob to search: name one or more (knobs: placement, "
     "precision, channels_last, num_workers, pin_memory, non_blocking, persistent_workers, prefetch_factor, "
     "fused_optimizer, compile, batch_size, accumulation_steps)"),
    (["tune", *TINY, "--trial-steps", "100000000000"], "workbench tune: trial steps 100,000,000,000: max_steps must "
     "be between 1 and 100000000 (got 100000000000)"),
    (["max-batch", *TINY, "--memory-budget-gib", "0"], "workbench max-batch: --memory-budget-gib must be more "
     "than 0 (got 0)"),
])
def test_bad_input_exits_2_with_one_line_and_records_nothing(capsys, args, line):
    from workbench.cli import main
    from workbench.history.store import HistoryStore

    code = main(args)  # in this process: the same code path as the command, without a second torch import
    out, err = capsys.readouterr()
    assert (code, err.strip(), out) == (2, line, "")
    with HistoryStore.open() as store:
        assert store.list_runs() == []


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_max_batch_on_a_cpu_exits_2_with_the_reason():
    done = workbench_cli("max-batch", "--model", "resnet18", "--json")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("workbench max-batch: the largest batch that fits is found on a CUDA GPU, "
                                          "and this run would train on the CPU")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # several seconds of training: the fast tier stays under 5 minutes
def test_tune_prints_its_trials_and_the_json_contract(capsys):
    from workbench.cli import main

    # in this process: the command's own entry point, without a second torch import (the sweep above is the process)
    code = main(["tune", *TINY, "--batch-size", "32", "--trial-steps", "4", "--knobs", "channels_last", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = last_json(out)
    assert set(result) >= {"start_images_per_sec", "best_images_per_sec", "speedup", "best_config", "trials",
                           "sequence_id"}
    assert result["start_images_per_sec"] > 0 and result["speedup"] > 0
    assert result["best_config"]["max_steps"] == 4  # the user's settings, not the trials' length
    (trial,) = result["trials"]  # one change: 3 + 3 runs interleaved with the start settings
    assert trial["changes"] == {"channels_last": True} and isinstance(trial["images_per_sec"], float)
    assert len(trial["run_ids"]) == len(trial["baseline_run_ids"]) == 3
    assert trial["verdict"] in ("faster", "slower", "within_noise")
    assert trial["outcome"] == ("kept" if trial["verdict"] == "faster" else trial["verdict"])
    assert trial["speedup_low"] <= trial["speedup"] <= trial["speedup_high"]
    assert (result["trials_per_side"], result["confidence"], result["min_effect"]) == (3, 0.9, 0.02)
    assert "TRIAL" in out.splitlines()[0]


def test_a_member_the_history_cannot_take_is_said_and_the_sweep_goes_on():
    import io

    from workbench.cli.sequence_output import SequenceProgress
    from workbench.experiments.events import RecordingFailed

    stream = io.StringIO()
    output = SequenceProgress(stream)
    output.show(RecordingFailed(run_id=7, reason="OperationalError: disk I/O error"))
    output.show(RecordingFailed(run_id=None, reason="OperationalError: database is locked"))
    output.close()
    assert stream.getvalue().splitlines() == [
        "  run #7 is not being recorded in the history: OperationalError: disk I/O error",
        "  this run is not being recorded in the history: OperationalError: database is locked"]


def test_a_sequence_name_with_control_characters_reaches_the_terminal_escaped(capsys):
    """`--name $'evil\\x1b[2J\\nFORGED: 9999 img/s'` cleared the screen and printed a forged line."""
    from workbench.cli import main

    assert main(["sweep", "--param", "channels_last", "--values", "off", "--name", "evil\x1b[2J\nFORGED: 9999 img/s",
                 *TINY, "--batch-size", "16", "--no-evaluate"]) == 0
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err and "\nFORGED" not in out + err
    assert "evil\\x1b[2J\\nFORGED: 9999 img/s" in err
