"""The truth table's arithmetic (benchmarks/gpu_time_truth.py): pure Python over a run's events, tested on
the committed fixtures (tests/benchmarks/test_truth.py).

Every column of a run comes from that one profiled run and the same windows:
- its *steady windows*: the log windows after the first that no profiler sample touched (the summary's
  rule, engine/summary.py). Throughput, the step time, NVML's share of time any kernel ran and GPM's
  activity figures are over them;
- its samples' *timeline windows*: our shares are the sample's GPU work rebased on that steady step
  (step_shares.step_shares, the host's remainder kept signed, a base shorter than the GPU's work flagged),
  and beside them HTA's own shares: the same sample's fractions of its own window, unrebased (kernel-busy
  is the union of kernel intervals over the window, as Holistic Trace Analysis computes it).
Repeats are interleaved (s1 s2 … s1 s2 …), so a drift of the machine spreads over every setting, and each
column is reported as the median and the range (min–max) of the repeats.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any, Iterable, Optional, Sequence, TypeVar

from workbench.engine.events import ProfileSample, RunEnded, StepStats
from workbench.engine.step_shares import step_shares

T = TypeVar("T")

# The columns each run gives (key, heading, format): "rate" 1,234 · "ms" 1.23 · "pct" 12% · "signed" -3%.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("images_per_sec", "images/s", "rate"),
    ("step_ms", "step ms", "ms"),
    ("nvml_any_kernel", "any kernel ran (NVML)", "pct"),
    ("sm_activity", "SM activity (GPM)", "pct"),
    ("tensor_activity", "tensor activity (GPM)", "pct"),
    ("kernel_busy", "kernel-busy (ours)", "pct"),
    ("host_remainder", "idle: host, remainder (ours)", "signed"),
    ("waiting_for_data", "idle: data (ours)", "pct"),
    ("hta_kernel_busy", "kernel-busy (HTA)", "pct"),
    ("hta_host_wait", "host wait (HTA)", "pct"),
    ("hta_other", "other idle (HTA)", "pct"),
    ("hta_span_ms", "sampled step ms (HTA span)", "ms"),
    ("sampling_cost", "sampling cost", "signed"),
)


def interleaved(settings: Sequence[T], repeats: int) -> list[tuple[int, T]]:
    """(repeat, setting) in the order to run them: every setting once, then every setting again, …"""
    return [(repeat, setting) for repeat in range(repeats) for setting in settings]


def window_steps(windows: Sequence[StepStats]) -> list[tuple[int, int, StepStats]]:
    """(first step, last step, window) for each log window, in order."""
    spans, previous = [], 0
    for window in windows:
        spans.append((previous + 1, window.step, window))
        previous = window.step
    return spans


def steady_windows(windows: Sequence[StepStats], samples: Sequence[ProfileSample]) -> list[tuple[int, StepStats]]:
    """(steps, window) of the log windows after the first that no sample touched. A sample slows its steps, and
    writing it out lands in the window of the step after it, so its span runs one step past its last."""
    touched = [(sample.first_step, sample.last_step + 1) for sample in samples]
    return [(last - first + 1, window) for first, last, window in window_steps(windows)[1:]
            if not any(start <= last and first <= end for start, end in touched)]


def hta_shares(sample: ProfileSample) -> Optional[dict[str, float]]:
    """HTA's own shares of the sample's timeline window (unrebased: fractions of the window's wall time), and the
    window's span per step. None without a GPU timeline.

    HTA has no "waiting for data": a gap in which the host fetched a batch and launched late is its host wait.
    Our waiting for data is taken out of that host wait (timeline.with_timed_data_wait: the loop's timed wait,
    capped by it), so HTA's host wait is the two together: exactly so for the engine's samples, which record no
    data-wait annotations; where a window holds them, a part of them may have been HTA's "other"."""
    if sample.kernel_busy_seconds is None or sample.window_seconds <= 0 or sample.steps <= 0:
        return None
    fraction = sample.fraction
    return {
        "hta_span_ms": sample.window_seconds / sample.steps * 1e3,
        "hta_kernel_busy": fraction(sample.kernel_busy_seconds),
        "hta_memcpy": fraction((sample.memcpy_seconds or 0.0) + (sample.memset_seconds or 0.0)),
        "hta_host_wait": fraction((sample.idle_waiting_for_host_seconds or 0.0)
                                  + (sample.idle_waiting_for_data_seconds or 0.0)),
        "hta_other": fraction(sample.idle_other_seconds or 0.0),
    }


def our_shares(sample: ProfileSample, step_seconds: Optional[float],
               data_wait_seconds: Optional[float]) -> Optional[dict[str, Any]]:
    """Our shares of the run's own step (step_shares.step_shares on the run's steady step), the host's remainder signed."""
    shares = step_shares(sample, step_seconds, data_wait_seconds)
    if shares is None:
        return None
    return {
        "kernel_busy": shares.compute,
        "memcpy": shares.memcpy + shares.memset,
        "waiting_for_data": shares.waiting_for_data,
        "host_remainder": shares.waiting_for_host,
        "other": shares.other,
        "flagged": shares.base_shorter_than_gpu_work,
        "flag": shares.flag_text(),
    }


def run_events(events: Iterable[Any]) -> tuple[list[StepStats], list[ProfileSample], Optional[RunEnded]]:
    """A run's log windows, profiler samples and end, from its events."""
    windows: list[StepStats] = []
    samples: list[ProfileSample] = []
    ended: Optional[RunEnded] = None
    for event in events:
        if isinstance(event, StepStats):
            windows.append(event)
        elif isinstance(event, ProfileSample):
            samples.append(event)
        elif isinstance(event, RunEnded):
            ended = event
    return windows, samples, ended


def measure_run(events: Iterable[Any]) -> dict[str, Any]:
    """One profiled run's row: every column from this run, over its steady windows and its samples."""
    windows, samples, ended = run_events(events)
    if ended is None or ended.status != "finished":
        return {"status": ended.status if ended else "failed", "reason": ended.reason if ended else "no end"}
    steady = steady_windows(windows, samples)
    row: dict[str, Any] = {"status": "finished", "steady_windows": len(steady), "samples": len(samples),
                           "verdict": (ended.summary.verdict or "").split(":")[0] or None,
                           "trace_paths": [s.trace_path for s in samples if s.trace_path]}
    if not steady:
        row["reason"] = "no log window outside the samples: nothing to base the figures on"
        return row
    steps = sum(count for count, _ in steady)
    seconds = sum(window.window_seconds for _, window in steady)
    images = sum(window.images_per_sec * window.window_seconds for _, window in steady)
    step_seconds, data_wait = seconds / steps, sum(w.data_wait_seconds for _, w in steady) / steps
    row.update(images_per_sec=images / seconds, step_ms=step_seconds * 1e3,
               nvml_any_kernel=_median_of(w.memory.gpu_utilization_percent for _, w in steady), **{
                   name: _median_of(getattr(w.telemetry, name) for _, w in steady)
                   for name in ("sm_activity", "sm_occupancy", "tensor_activity", "dram_bandwidth", "power_watts")})
    if row["nvml_any_kernel"] is not None:
        row["nvml_any_kernel"] /= 100.0
    # What sampling cost the run: its rate over every window after the first, sampled ones included.
    later = windows[1:]
    if later:
        rate_all = sum(w.images_per_sec * w.window_seconds for w in later) / sum(w.window_seconds for w in later)
        row["sampling_cost"] = 1.0 - rate_all / row["images_per_sec"]
    gpu = [s for s in samples if s.kernel_busy_seconds is not None and s.steps > 0]
    row.update(_weighted([(s.steps, our_shares(s, step_seconds, data_wait)) for s in gpu]))
    row.update(_weighted([(s.steps, hta_shares(s)) for s in gpu]))
    row["sample_windows"] = [{"first_step": s.first_step, "steps": s.steps, "window_seconds": s.window_seconds,
                              "host_data_wait_seconds": s.host_data_wait_seconds, "trace_path": s.trace_path,
                              "timeline_host_ops_recorded": s.timeline_host_ops_recorded} for s in gpu]
    return row


def _weighted(parts: list[tuple[int, Optional[dict[str, Any]]]]) -> dict[str, Any]:
    """Several samples' shares, weighted by their steps; a flag where any sample was flagged."""
    parts = [(weight, part) for weight, part in parts if part is not None]
    if not parts:
        return {}
    total = sum(weight for weight, _ in parts)
    merged: dict[str, Any] = {}
    for key, value in parts[0][1].items():
        if isinstance(value, bool):
            merged[key] = any(part[key] for _, part in parts)
        elif isinstance(value, float):
            merged[key] = sum(part[key] * weight for weight, part in parts) / total
        else:
            merged[key] = next((part[key] for _, part in parts if part[key] is not None), None)
    return merged


def spread(values: Iterable[Optional[float]]) -> Optional[dict[str, float]]:
    """Median and range of the values that exist; None where none does."""
    known = sorted(value for value in values if value is not None)
    if not known:
        return None
    return {"median": statistics.median(known), "low": known[0], "high": known[-1], "n": len(known)}


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A setting's repeats: each column's median and range, how many runs finished, the verdicts they gave."""
    finished = [run for run in runs if run.get("status") == "finished"]
    summary: dict[str, Any] = {key: spread(run.get(key) for run in finished) for key, _, _ in COLUMNS}
    summary["runs"] = len(runs)
    summary["finished"] = len(finished)
    summary["flagged"] = sum(1 for run in finished if run.get("flagged"))
    summary["verdicts"] = dict(Counter(run.get("verdict") or "none" for run in finished))
    return summary


def cell(value: Optional[dict[str, float]], kind: str) -> str:
    """"median (min–max)" in the column's format; n/a where no run read it."""
    if value is None:
        return "n/a"
    text = [_format(value[part], kind) for part in ("median", "low", "high")]
    return text[0] if value["n"] == 1 else f"{text[0]} ({text[1]}–{text[2]})"


def _format(value: float, kind: str) -> str:
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "ms":
        return f"{value:,.2f}"
    if kind == "signed":
        return f"{value:+.0%}"
    return f"{value:.0%}"


def caption(repeats: int | str) -> str:
    return (f"Each cell: the median (min–max) of {repeats} runs per setting, interleaved (every setting once, then "
            "again); every column of a run comes from that one run: throughput, step time, NVML's share of time any "
            "kernel ran and GPM's activity over its steady log windows (those no profiler sample touched), our shares "
            "per step of that steady step (the host's remainder signed), HTA's over the sampled window itself.")


def table(rows: Sequence[dict[str, Any]], repeats: int | str) -> str:
    """The Markdown table: a row per setting, its columns' medians and ranges, its verdicts, and the caption."""
    head = ["setting", *(heading for _, heading, _ in COLUMNS), "ceiling images/s", "verdicts"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    for row in rows:
        summary = row["summary"]
        ceiling = (row.get("ceiling") or {}).get("images_per_sec")
        verdicts = ", ".join(f"{name} ×{count}" for name, count in summary["verdicts"].items())
        if summary["flagged"]:
            verdicts += f"; flagged ×{summary['flagged']} (base shorter than the GPU's work)"
        if summary["finished"] < summary["runs"]:
            verdicts += f"; {summary['runs'] - summary['finished']} of {summary['runs']} runs did not finish"
        cells = [row["name"], *(cell(summary[key], kind) for key, _, kind in COLUMNS),
                 "n/a" if ceiling is None else f"{ceiling:,.0f}", verdicts]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + caption(repeats)


def _median_of(values: Iterable[Optional[float]]) -> Optional[float]:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None
