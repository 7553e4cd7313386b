"""`workbench verify RUN_ID` as a user runs it: real CPU trials for a finding, kept in the history and shown with the
run's findings; bad input is one line and exit 2, before anything runs."""

import json
import sqlite3
from types import SimpleNamespace

import pytest
from builders import GPU, last_json, started, step, trace_record

from workbench.cli import main
from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.engine.run_summary import Finding, RunSummary
from workbench.history.measured_changes import MeasuredChangeRecord
from workbench.history.store import HistoryStore

TINY = RunConfig(dataset="synthetic", synthetic_size=256, batch_size=32, max_steps=8, log_every=1, num_workers=0,
                 device="cpu", channels_last=False)
HEAD = "Compute-bound: kernels ran 90% of the sampled time."
FINDINGS = (
    Finding(kind="balanced", headline="No single bottleneck.", text="No single bottleneck.", figure=0.5,
            figure_name="kernel_busy_fraction"),
    Finding(kind="compute-bound", headline=HEAD, text=f"{HEAD} Try channels_last=true: the layout tensor cores want.",
            figure=0.9, figure_name="kernel_busy_fraction", field="channels_last", value=True),
)


def this_machine():
    from workbench.engine import probe_device

    return probe_device("cpu")


def record_run(device, config=TINY, findings=FINDINGS, images_per_sec=1000.0) -> int:
    """A finished run of ``config`` on ``device`` with these findings (built by hand: no training)."""
    with HistoryStore.open() as store:
        recorder = store.start_run(config)
        recorder.record(started(config, device=device, total_steps=8))
        for index in range(1, 9):
            recorder.record(step(index, 8))
        recorder.record(RunEnded(status="finished", summary=RunSummary(
            status="finished", images_per_sec=images_per_sec, steps=8, device_type=device.type, device_name=device.name,
            findings=findings)))
        return recorder.run_id


def refused(capsys, *args) -> str:
    """The one line `workbench verify ARGS` says when it refuses (exit 2)."""
    assert main(["verify", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


def test_bad_input_is_one_line_and_starts_nothing(capsys, isolated_workbench_home):
    run = str(record_run(this_machine()))
    gpu_run = str(record_run(GPU))
    assert refused(capsys, "99") == (f"workbench verify: no run with id 99 in "
                                     f"{isolated_workbench_home / 'history.sqlite3'}")
    assert refused(capsys, run, "--finding", "1").startswith(
        f"workbench verify: finding 1 of run #{run} names no setting to change (“No single bottleneck.”)")
    assert refused(capsys, run, "--finding", "3") == (f"workbench verify: run #{run} has 2 findings: --finding "
                                                      "takes 1 to 2 (got 3)")
    assert refused(capsys, run, "--set", "chanels_last=on") == (
        "workbench verify: --set chanels_last=on: chanels_last is not a setting (did you mean channels_last?)")
    assert refused(capsys, run, "--set", "batch_size=big") == (
        "workbench verify: --set batch_size=big: batch_size takes whole numbers (got 'big')")
    assert refused(capsys, run, "--set", "channels_last") == (
        "workbench verify: --set takes FIELD=VALUE, such as channels_last=on (got 'channels_last')")
    assert refused(capsys, run, "--set", "channels_last=off") == (
        "workbench verify: channels_last=off is already the run's setting: there is nothing to compare")
    assert refused(capsys, run, "--set", "precision=bf16").startswith(
        "workbench verify: precision=bf16: bf16 needs a CUDA GPU")
    assert refused(capsys, run, "--set", "profile=on").startswith(
        "workbench verify: profile decides what a run learns, how long it is or what it records, not how fast it "
        "trains")
    assert refused(capsys, run, "--set", "lr=0.5").startswith("workbench verify: lr decides what a run learns")
    assert refused(capsys, run, "--finding", "2", "--repeats", "2", "--trial-steps", "3") == (
        "workbench verify: a verdict needs at least 3 trials of each side (got 2); a trial needs at least 4 steps "
        "to measure after its warm-up (got trial steps 3)")
    assert "not allowed with argument" in refused(capsys, run, "--finding", "2", "--set", "channels_last=on")
    assert refused(capsys, gpu_run, "--finding", "2").startswith(
        f"workbench verify: run #{gpu_run} ran on NVIDIA Test GPU (cuda), and its settings train on ")
    no_fields = str(record_run(this_machine(), findings=FINDINGS[:1]))
    assert refused(capsys, no_fields) == (f"workbench verify: no finding of run #{no_fields} names a setting whose "
                                          "speed can be measured: give --set FIELD=VALUE to verify a change you "
                                          "suspect")
    with HistoryStore.open() as store:
        assert len(store.list_runs()) == 3  # nothing ran
        assert store._conn.execute("SELECT COUNT(*) FROM sequences").fetchone()[0] == 0


def test_a_trace_record_is_refused_not_verified_with_the_default_settings(capsys, isolated_workbench_home):
    """A trace record keeps no settings ("{}" reads back as the defaults): verifying it would train the workbench's
    default model and call that its baseline."""
    with HistoryStore.open() as store:
        trace_id, _ = store.add_trace(trace_record())
    for args in ([], ["--set", "batch_size=64"]):
        assert refused(capsys, str(trace_id), *args) == (
            f"workbench verify: #{trace_id} is a profiler trace, not a run of the workbench: it holds no settings to "
            "verify; try its findings' changes in your script and compare two traces (workbench trace BEFORE AFTER)")
    with HistoryStore.open() as store:
        assert [record.id for record in store.list_runs()] == [trace_id]  # nothing ran


def verify(capsys, *args: str) -> SimpleNamespace:
    """`workbench verify ARGS` through the command's own entry point, in this process (no second torch import): its
    exit code, stdout and stderr."""
    code = main(["verify", *args])
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


def keep_a_measured_loss(config):
    device = this_machine()
    with HistoryStore.open() as store:
        store.add_measured_change(MeasuredChangeRecord(
            sequence_id=None, device_type=device.type, device_name=device.name, baseline=config, field="channels_last",
            value=True, speedup=0.86, speedup_low=0.8, speedup_high=0.9, verdict="slower", baseline_run_ids=(1, 3, 5),
            changed_run_ids=(2, 4, 6)))
    return device


def test_a_run_end_reads_what_its_findings_measured_on_this_device(isolated_workbench_home):
    from workbench.cli.run_command import with_measured_findings

    device = keep_a_measured_loss(TINY.replace(max_steps=99))
    summary = RunSummary(status="finished", images_per_sec=1000.0, device_type=device.type, device_name=device.name,
                         findings=FINDINGS[1:] + FINDINGS[:1])
    ended = with_measured_findings(RunEnded(status="finished", summary=summary), TINY)
    assert [f.field for f in ended.summary.findings] == [None, "channels_last"]  # a measured loss is never first
    assert ended.summary.findings[1].text.endswith("; measured 0.86×: slower here, not recommended (0.80–0.90, "
                                                   "3+3 trials).")
    other = with_measured_findings(RunEnded(status="finished", summary=summary), TINY.replace(batch_size=64))
    assert other.summary == summary  # other settings: that measurement does not speak for them


@pytest.mark.slow
def test_workbench_run_shows_what_a_finding_measured_on_this_device(capsys, monkeypatch):
    import workbench.engine.summary

    # A CPU run's rules name no setting: these findings stand in for a GPU run's (the run itself is real).
    monkeypatch.setattr(workbench.engine.summary, "find", lambda facts: FINDINGS[1:] + FINDINGS[:1])
    keep_a_measured_loss(TINY.replace(max_steps=99))
    flags = ["--dataset", "synthetic", "--synthetic-size", "256", "--batch-size", "32", "--max-steps", "4",
             "--log-every", "1", "--device", "cpu", "--num-workers", "0"]
    assert main(["run", *flags, "--json"]) == 0
    findings = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["findings"]
    assert [f["field"] for f in findings] == [None, "channels_last"]  # a measured loss is never first
    assert findings[1]["text"].endswith("; measured 0.86×: slower here, not recommended (0.80–0.90, 3+3 trials).")
    assert findings[1]["measured"] == {"speedup": 0.86, "low": 0.8, "high": 0.9, "verdict": "slower",
                                       "baseline_trials": 3, "changed_trials": 3}


@pytest.mark.slow
def test_verify_runs_real_cpu_trials_for_a_finding_and_keeps_them(capsys, isolated_workbench_home):
    device = this_machine()
    run = record_run(device)
    done = verify(capsys, str(run), "--finding", "2", "--trial-steps", "8", "--max-trials", "3", "--json")
    assert done.returncode == 0, done.stderr
    result = last_json(done.stdout)
    assert result["run_id"] == run and result["status"] == "finished"
    (verified,) = result["findings"]
    assert set(verified) >= {"text", "field", "value", "baseline_images_per_sec", "changed_images_per_sec", "speedup",
                             "speedup_low", "speedup_high", "verdict", "run_ids"}
    assert (verified["field"], verified["value"], verified["text"]) == ("channels_last", True, FINDINGS[1].text)
    assert verified["verdict"] in ("faster", "slower", "within_noise")
    assert verified["speedup"] == pytest.approx(verified["changed_images_per_sec"] / verified["baseline_images_per_sec"])
    assert verified["speedup_low"] <= verified["speedup"] <= verified["speedup_high"]
    assert len(verified["run_ids"]) == 6  # --max-trials 3: no extra rounds, whatever the interval said
    assert isinstance(verified["decided"], bool) and (result["busy"] is None or result["busy"].startswith(
        "this machine is busy: "))
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["CHANGE", "BASELINE", "IMG/S"] and lines[1].startswith("channels_last=on")
    shown = next(line for line in lines if "Try channels_last=true" in line)
    assert f"measured {verified['speedup']:.2f}×" in shown  # the run's finding now reads its measurement

    with sqlite3.connect(isolated_workbench_home / "history.sqlite3") as conn:
        sequences = conn.execute("SELECT id, kind, name FROM sequences").fetchall()
        assert sequences == [(result["sequence_id"], "verify", f"verify #{run}: channels_last=on")]
        trials = conn.execute("SELECT id, config_json FROM runs WHERE sequence_id = ? ORDER BY id",
                              (result["sequence_id"],)).fetchall()
        assert [row[0] for row in trials] == verified["run_ids"]
        assert [json.loads(row[1])["channels_last"] for row in trials] == [False, True] * 3
        (kept,) = conn.execute("SELECT field, value_json, verdict, speedup, device_name, baseline_json "
                               "FROM measured_changes").fetchall()
    assert kept[:5] == ("channels_last", "true", verified["verdict"], pytest.approx(verified["speedup"]), device.name)
    assert json.loads(kept[5]) == TINY.to_dict()


@pytest.mark.slow
def test_verify_with_no_finding_named_measures_every_finding_the_run_can_take(capsys, isolated_workbench_home):
    # A finding stored by an older version proposed pipeline=gpu-resident for a run that augments in its workers:
    # that change alone cannot run, and is left out with the reason; the run's other finding is still measured.
    head = "Input-bound: training waited for the next batch 40% of the time (threshold 15%)."
    findings = tuple(Finding(kind="input-bound", headline=head, text=f"{head} Try {field}={value}.", figure=0.4,
                             figure_name="data_wait_fraction", field=field, value=value)
                     for field, value in (("pipeline", "gpu-resident"), ("channels_last", True)))
    run = record_run(this_machine(), TINY.replace(augment="cpu"), findings)
    done = verify(capsys, str(run), "--trial-steps", "4", "--json")
    assert done.returncode == 0, done.stderr
    assert ("workbench verify: pipeline=gpu-resident left out: pipeline=gpu-resident: augment=cpu needs "
            "pipeline=dataloader") in done.stderr
    assert [(f["field"], f["value"]) for f in last_json(done.stdout)["findings"]] == [("channels_last", True)]


def test_a_finding_verified_again_is_named_by_its_own_words_not_its_last_measurement():
    from argparse import Namespace

    from workbench.cli.verify_command import changes_from_args
    from workbench.engine.finding_measurements import with_measured_changes
    from workbench.engine.run_summary import MeasuredChange

    gain = MeasuredChange(speedup=1.3, low=1.2, high=1.4, verdict="faster", baseline_trials=3, changed_trials=3)
    shown = with_measured_changes(FINDINGS, lambda field, value: gain if field == "channels_last" else None)
    assert shown[0].field == "channels_last" and "measured 1.30×" in shown[0].text  # a measured gain is shown first
    (change,) = changes_from_args(Namespace(finding=1), 1, shown, FINDINGS)
    assert (change.field, change.value, change.text) == ("channels_last", True, FINDINGS[1].text)
    (change,) = changes_from_args(Namespace(), 1, shown, FINDINGS)
    assert change.text == FINDINGS[1].text


def test_a_history_that_cannot_be_read_leaves_a_run_ends_findings_as_they_were(monkeypatch, capsys):
    from workbench.cli.run_command import with_measured_findings
    from workbench.history.store import HistoryError

    def locked(*args, **kwargs):
        raise HistoryError("cannot open the run history: database is locked")

    monkeypatch.setattr(HistoryStore, "open", locked)
    summary = RunSummary(status="finished", device_type="cpu", device_name="AMD EPYC (2 cores)", findings=FINDINGS)
    ended = RunEnded(status="finished", summary=summary)
    assert with_measured_findings(ended, TINY) is ended
    assert main(["verify", "1"]) == 1  # said in one line, nothing claimed
    assert capsys.readouterr().err == "workbench verify: cannot open the run history: database is locked\n"
