"""The truth table's arithmetic (benchmarks/_truth.py) on the committed H100 timelines: every column of a run
from that one run and its steady windows, HTA's shares equal to the analysed sample's own fractions, ours
adding up to 1 with the host's signed remainder, repeats interleaved, median and range over repeats."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _truth import cell, hta_shares, interleaved, measure_run, our_shares, spread, steady_windows, summarise, table

from workbench.engine import kineto, timeline
from workbench.engine.events import MemorySnapshot, RunEnded, StepStats
from workbench.engine.run_summary import RunSummary

DATA = Path(__file__).resolve().parents[1] / "engine" / "data"
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ("kineto_launchbound_smallcnn_b32_fp32_h100.json.gz", "kineto_heavy_resnet18_b512_bf16_cl_h100_trimmed.json.gz")
SHARES = ("kernel_busy_seconds", "memcpy_seconds", "memset_seconds", "idle_waiting_for_data_seconds",
          "idle_waiting_for_host_seconds", "idle_other_seconds")


def analysed(name):
    with gzip.open(DATA / name, "rt", encoding="utf-8") as file:
        dump = json.load(file)
    window = (min(r["start_ns"] for r in dump["events"]), max(r["end_ns"] for r in dump["events"]))
    breakdown = timeline.analyse(kineto.activities(dump["events"], 0), window=window, steps=dump["steps"])
    return dump, breakdown


def sample_of(name, first_step=21):
    dump, breakdown = analysed(name)
    return timeline.to_sample(breakdown, first_step, first_step + 10, "cuda", dump["batch"]), breakdown


@pytest.mark.parametrize("name", FIXTURES)
def test_htas_shares_are_the_analysed_samples_own_fractions(name):
    sample, breakdown = sample_of(name)
    fractions = {field: getattr(breakdown, field) / breakdown.window_seconds for field in SHARES}
    hta = hta_shares(sample)
    assert hta["hta_kernel_busy"] == fractions["kernel_busy_seconds"]
    assert hta["hta_memcpy"] == pytest.approx(fractions["memcpy_seconds"] + fractions["memset_seconds"])
    assert hta["hta_host_wait"] == pytest.approx(  # HTA has no data wait: it is in HTA's host wait
        fractions["idle_waiting_for_host_seconds"] + fractions["idle_waiting_for_data_seconds"])
    assert hta["hta_other"] == fractions["idle_other_seconds"]
    assert hta["hta_span_ms"] == pytest.approx(breakdown.window_seconds / breakdown.steps * 1e3)
    assert sum(value for key, value in hta.items() if key != "hta_span_ms") == pytest.approx(1.0)


def test_htas_host_wait_holds_the_loops_timed_data_wait():
    """The engine's samples record no data-wait annotations: the loop's timed wait is taken out of the host wait
    (with_timed_data_wait). HTA's host wait is the gap as HTA classifies it, so it is the same with or without
    the timed wait; ours splits it (an input-bound run: most of HTA's host wait is waiting for data)."""
    dump, breakdown = analysed(FIXTURES[0])
    plain = timeline.to_sample(breakdown, 21, 31, "cuda", dump["batch"])
    host = breakdown.idle_waiting_for_host_seconds
    timed = timeline.with_timed_data_wait(breakdown, 0.8 * host)
    input_bound = timeline.to_sample(timed, 21, 31, "cuda", dump["batch"])
    assert input_bound.idle_waiting_for_data_seconds == pytest.approx(
        (breakdown.idle_waiting_for_data_seconds or 0.0) + 0.8 * host)
    assert hta_shares(input_bound)["hta_host_wait"] == pytest.approx(hta_shares(plain)["hta_host_wait"])
    assert hta_shares(input_bound) == pytest.approx(hta_shares(plain))


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("base", ["shorter than the GPU's work", "short by half the other idle", "the sampled step"])
def test_our_shares_add_up_to_one_with_the_signed_remainder(name, base):
    """The base step is set against the fixture's own GPU work, so each case lands where it should: below the
    GPU's work (flagged, remainder negative), between the GPU's work and it plus the other idle (not flagged,
    remainder still negative: not clamped to zero) and the sampled step itself (remainder positive)."""
    sample, breakdown = sample_of(name)
    steps = breakdown.steps
    gpu_work = (breakdown.kernel_busy_seconds + breakdown.memcpy_seconds + breakdown.memset_seconds) / steps
    other = breakdown.idle_other_seconds / steps
    assert other > 0  # the fixtures have some: the middle case needs it
    step = {"shorter than the GPU's work": 0.9 * gpu_work, "short by half the other idle": gpu_work + other / 2,
            "the sampled step": breakdown.window_seconds / steps}[base]
    ours = our_shares(sample, step, 0.0)
    parts = ("kernel_busy", "memcpy", "waiting_for_data", "host_remainder", "other")
    assert sum(ours[part] for part in parts) == pytest.approx(1.0)
    assert ours["host_remainder"] == pytest.approx((step - gpu_work - other) / step)  # signed, whole
    assert ours["flagged"] == (step < gpu_work) == (base == "shorter than the GPU's work")
    assert (ours["host_remainder"] < 0) == (base != "the sampled step")
    assert (ours["flag"] is not None) == ours["flagged"]


def window(step, seconds, utilization, steps=10, batch=32):
    return StepStats(step=step, total_steps=100, epoch=1, epochs=1, samples_seen=step * batch, loss=1.0, lr=0.1,
                     images_per_sec=steps * batch / seconds, data_wait_seconds=0.0, device_span_seconds=seconds,
                     window_seconds=seconds, elapsed_seconds=float(step),
                     memory=MemorySnapshot(gpu_utilization_percent=utilization))


def run_events():
    """A 100-step run logged every 10 steps; the heavy fixture's window sampled at steps 21-31, which slows the
    windows [21-30] and [31-40] threefold and makes NVML read 100 % in them (and in the warm-up). The steady
    windows differ from each other (8-12 ms a step, NVML 20-80 %), so a figure taken from the last window alone,
    or a median over every window, reads differently from one over the steady windows."""
    sample, _ = sample_of(FIXTURES[1], first_step=21)
    windows = [window(10, 1.0, 100.0)]  # the first window: warm-up
    steady = iter(zip((0.10, 0.08, 0.09, 0.10, 0.11, 0.10, 0.12), (20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0)))
    for step in range(20, 101, 10):
        windows.append(window(step, 0.3, 100.0) if step in (30, 40) else window(step, *next(steady)))
    ended = RunEnded(status="finished", summary=RunSummary(status="finished"))
    return [*windows[:3], sample, *windows[3:], ended], sample


def test_every_column_of_a_run_comes_from_its_steady_windows_and_its_samples():
    events, sample = run_events()
    row = measure_run(events)
    assert row["steady_windows"] == 7  # [11-20] and [41-50]…[91-100]: not the warm-up, not the two touched
    assert row["step_ms"] == pytest.approx(10.0)  # 0.7 s over 70 steps, not the last window's 12 ms
    assert row["images_per_sec"] == pytest.approx(3200.0)
    assert row["nvml_any_kernel"] == pytest.approx(0.5)  # the same windows' median: 65 % over every window
    expected = our_shares(sample, 0.010, 0.0)
    assert {key: row[key] for key in expected} == pytest.approx(expected)  # rebased on that same step
    assert {key: row[key] for key in hta_shares(sample)} == pytest.approx(hta_shares(sample))
    rate_all = 9 * 320 / (7 * 0.1 + 2 * 0.3)
    assert row["sampling_cost"] == pytest.approx(1 - rate_all / 3200.0)
    assert row["sample_windows"][0]["steps"] == sample.steps


def test_steady_windows_leave_out_the_warm_up_and_every_window_a_sample_touched():
    events, sample = run_events()
    windows = [event for event in events if isinstance(event, StepStats)]
    kept = [w.step for _, w in steady_windows(windows, [sample])]
    assert kept == [20, 50, 60, 70, 80, 90, 100]


def test_a_run_that_did_not_finish_gives_its_reason_and_no_figures():
    ended = RunEnded(status="failed", summary=RunSummary(status="failed"), reason="CUDA out of memory")
    assert measure_run([ended]) == {"status": "failed", "reason": "CUDA out of memory"}


def test_repeats_interleave_across_settings():
    assert interleaved(["s1", "s2", "s3"], 3) == [(0, "s1"), (0, "s2"), (0, "s3"), (1, "s1"), (1, "s2"), (1, "s3"),
                                                  (2, "s1"), (2, "s2"), (2, "s3")]


def test_median_and_range_over_synthetic_repeats():
    assert spread([0.14, None, 0.10, 0.12]) == {"median": 0.12, "low": 0.10, "high": 0.14, "n": 3}
    assert spread([None, None]) is None
    assert cell(spread([0.14, 0.10, 0.12]), "pct") == "12% (10%–14%)"
    assert cell(spread([-0.05, 0.02, 0.01]), "signed") == "+1% (-5%–+2%)"
    assert cell(spread([9.9]), "ms") == "9.90" and cell(None, "pct") == "n/a"
    runs = [{"status": "finished", "images_per_sec": rate, "kernel_busy": busy, "verdict": verdict, "flagged": flagged}
            for rate, busy, verdict, flagged in ((39_000.0, 0.66, "Launch-bound", False),
                                                 (41_000.0, 0.70, "Launch-bound", False),
                                                 (35_000.0, 0.90, "Compute-bound", True))]
    summary = summarise([*runs, {"status": "failed", "reason": "out of memory"}])
    assert summary["images_per_sec"] == {"median": 39_000.0, "low": 35_000.0, "high": 41_000.0, "n": 3}
    assert summary["kernel_busy"]["median"] == 0.70
    assert (summary["runs"], summary["finished"], summary["flagged"]) == (4, 3, 1)
    assert summary["verdicts"] == {"Launch-bound": 2, "Compute-bound": 1}
    text = table([{"name": "heavy", "ceiling": {"images_per_sec": 40_000.0}, "summary": summary}], 4)
    assert "| heavy | 39,000 (35,000–41,000) |" in text
    assert "Launch-bound ×2, Compute-bound ×1; flagged ×1" in text and "1 of 4 runs did not finish" in text
    assert "the median (min–max) of 4 runs per setting, interleaved" in text


@pytest.mark.slow
def test_the_script_runs_its_interleaved_repeats_on_a_cpu(tmp_path):
    out = tmp_path / "truth.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_time_truth.py", "--allow-cpu", "--steps", "20", "--repeats", "3", "--only", "1",
         "--ceiling-budget", "0", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    (row,) = result["rows"]
    assert result["repeats"] == 3 and [r["repeat"] for r in row["runs"]] == [1, 2, 3]
    assert all(r["status"] == "finished" and r["steady_windows"] >= 2 for r in row["runs"])
    assert row["summary"]["images_per_sec"]["n"] == 3 and row["summary"]["kernel_busy"] is None  # a CPU: no GPU
    assert "the median (min–max) of 3 runs per setting, interleaved" in done.stdout
