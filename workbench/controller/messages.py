"""The words the window shows about a run and a sequence of runs (no Qt): progress and outcomes.
Runs are named by workbench.history.naming, the same in the window, the Runs tab and the CSV."""

from __future__ import annotations

import math
from typing import Optional

from workbench.engine.events import EpochStats, ProfileSample, RunEnded, RunStarted, StepStats
from workbench.experiments.events import (
    MaxBatchResult,
    SequenceEnded,
    SweepResult,
    TuneResult,
    VerifyResult,
    edge_note,
    values_label,
)
from workbench.experiments.rate_over_runs import fastest_text, per_value
from workbench.experiments.verify import measured_change_of
from workbench.formatting import efficiency_text, format_bytes, format_duration, window_rate_text
from workbench.history.metrics import format_metric

SEQUENCE_NAMES = {"sweep": "Sweep", "tune": "Search for faster settings", "max_batch": "Largest-batch search",
                  "repeats": "Repeats", "verify": "Verification"}


def progress_text(stats: StepStats, ceiling: Optional[float] = None, skipped_so_far: int = 0,
                  previous: Optional[StepStats] = None) -> str:
    """"Epoch 1/3 · step 450/1,000 · ETA 0:12 · 1,234 images/s (41 % of ceiling)"; fp16 adds its scale.
    ``previous``: the run's log window before ``stats`` (None for its first), for the ETA's pace."""
    text = (f"Epoch {stats.epoch}/{stats.epochs} · step {stats.step:,}/{stats.total_steps:,} · "
            f"ETA {format_duration(stats.eta_seconds(previous))} · "
            f"{window_rate_text(stats.images_per_sec, 'window', 'images/s')}")
    if ceiling and stats.images_per_sec is not None:
        text += f" ({efficiency_text(stats.images_per_sec / ceiling, 'of ceiling')})"
    if stats.loss_scale is not None:
        text += f" · loss scale {stats.loss_scale:,.0f}"
    if skipped_so_far:
        text += f" · {skipped_so_far:,} step{'s' if skipped_so_far != 1 else ''} skipped (fp16)"
    return text


def effective_batch_text(event: RunStarted) -> str:
    """"effective batch 64 (16 × 2 devices × 2 accumulation)": what one optimiser step sees."""
    config = event.config
    parts = [f"{config.batch_size:,}"]
    if event.world_size > 1:
        parts.append(f"{event.world_size} devices")
    if config.accumulation_steps > 1:
        parts.append(f"{config.accumulation_steps} accumulation")
    how = f" ({' × '.join(parts)})" if len(parts) > 1 else ""
    return f"effective batch {event.effective_batch_size:,}{how}"


def started_text(event: RunStarted) -> str:
    processes = f" × {event.world_size} processes" if event.world_size > 1 else ""
    return (f"Training {event.config.model} on {event.device.type} ({event.device.name}){processes}: "
            f"{event.train_size:,} {event.dataset_name} images, {event.steps_per_epoch:,} steps per epoch, "
            f"{event.total_steps:,} steps in all, {effective_batch_text(event)}")


def epoch_text(stats: EpochStats) -> str:
    tested = (f"test accuracy {stats.test_accuracy:.1%}, test loss {stats.test_loss:.3f}" if stats.evaluated
              else "not evaluated (evaluate=false)")
    rate = window_rate_text(stats.images_per_sec, "epoch", "images/s")
    wait = stats.data_wait_fraction
    return (f"Epoch {stats.epoch}/{stats.epochs}: {tested}, {rate}, "
            + (f"waiting for data {wait:.0%} of the time" if wait is not None else "waiting for data n/a"))


def sample_text(sample: ProfileSample) -> str:
    """The status line when a profiler sample lands."""
    steps = f"Profiler sample of steps {sample.first_step}–{sample.last_step}"
    if sample.kernel_busy_seconds is None:
        wait = sample.fraction(sample.host_data_wait_seconds) or 0.0
        return f"{steps}: host ops recorded, waiting for data {wait:.0%} (no GPU timeline: see the GPU time tab)"
    parts = [("kernels busy", sample.kernel_busy_seconds), ("communication", sample.communication_seconds),
             ("waiting for data", sample.idle_waiting_for_data_seconds),
             ("waiting for the host", sample.idle_waiting_for_host_seconds)]
    return f"{steps}: " + ", ".join(f"{name} {sample.fraction(value) or 0.0:.0%}" for name, value in parts
                                    if value is not None and (value or name != "communication"))


def ended_text(event: RunEnded) -> str:
    summary = event.summary
    if event.status == "failed":
        return f"Run failed: {event.reason or 'no reason given'}"
    parts = []
    if summary.test_accuracy is not None:
        parts.append(f"test accuracy {summary.test_accuracy:.1%}")
    if summary.images_per_sec is not None and math.isfinite(summary.images_per_sec):
        rate = f"{summary.images_per_sec:,.0f} img/s"  # IMAGES_PER_SEC_MEANS: the banner's tooltip says it
        if summary.pipeline_efficiency is not None:
            rate += f", {efficiency_text(summary.pipeline_efficiency)}"
        parts.append(rate)
    if summary.data_wait_fraction is not None:
        parts.append(f"waiting for data {summary.data_wait_fraction:.0%}")
    if summary.skipped_optimizer_steps:
        parts.append(f"{summary.skipped_optimizer_steps:,} optimizer steps skipped (fp16 overflow)")
    if summary.skipped_bad_images:
        parts.append(f"{summary.skipped_bad_images:,} unreadable images skipped")
    parts.append(f"{summary.steps:,} steps in {format_duration(summary.wall_seconds)}")
    head = "Finished" if event.status == "finished" else f"Stopped ({event.reason})" if event.reason else "Stopped"
    return f"{head}: " + ", ".join(parts)


def sequence_ended_text(event: SequenceEnded) -> str:
    """What a sweep, a search for faster settings or a largest-batch search came to, in a sentence or two."""
    name = SEQUENCE_NAMES.get(event.kind, event.kind)
    if event.problems:
        return f"{name}: nothing ran. " + "; ".join(event.problems)
    result = event.result
    head = f"{name} {event.status}" + (f" ({event.reason})" if event.reason and event.status != "finished" else "")
    if isinstance(result, SweepResult):
        failed = sum(member.status == "failed" for member in result.members)
        text = f"{head}: {len(result.members)} member{'s' if len(result.members) != 1 else ''} ran"
        text += f", {failed} failed" if failed else ""
        values = per_value(result.members)
        if event.kind == "repeats" and values:
            return text + f": {values[0].rate.describe()}."
        fastest = fastest_text(values, lambda value: values_label(value.values))
        return text + (f". {fastest}" if fastest else "") + "."
    if isinstance(result, TuneResult):
        if result.best_images_per_sec is None or result.start_images_per_sec is None:
            return f"{head}: no trial was measured."
        changes = values_label(tuple(result.best_changes.items()))
        speedup = result.speedup or 1.0
        if not result.changes_tried:
            return (f"{head}: no change was tried ({result.stop_reason}); the start settings train at "
                    f"{result.start_images_per_sec:,.0f} images/s. Give the search more time.")
        if not changes:
            return (f"{head}: no change measured faster than the start settings beyond the noise "
                    f"({result.start_images_per_sec:,.0f} images/s). {result.stop_reason.capitalize()}.")
        return (f"{head}: {changes}, {speedup:.2f}× the start settings (the kept changes' measured speedups "
                f"multiplied; the medians of all their runs, taken at different times: "
                f"{result.best_images_per_sec:,.0f} and {result.start_images_per_sec:,.0f} images/s). "
                f"{result.stop_reason.capitalize()}. "
                "“Apply best settings” puts them in the form.")
    if isinstance(result, MaxBatchResult):
        best = result.best
        if result.max_batch_size is None or best is None:
            return f"{head}: not even the first batch size tried fits ({event.reason or result.limited_by})."
        peak = format_bytes(best.peak_reserved_bytes) if best.peak_reserved_bytes is not None else "n/a"
        rate = format_metric("rate", best.images_per_sec) or "n/a"
        note = edge_note(result)
        return (f"{head}: the largest batch that fits is {result.max_batch_size:,} (limited by {result.limited_by}; "
                f"peak reserved {peak}, {rate} images/s)." + (f" {note[0].upper()}{note[1:]}." if note else ""))
    if isinstance(result, VerifyResult):
        said = []
        for change in result.changes:
            measured = measured_change_of(change.comparison)
            said.append(f"{values_label(((change.field, change.value),))} " + (
                measured.describe() if measured is not None else f"not measured ({change.reason or 'too few trials'})")
                + (f": {change.undecided_text}" if change.undecided_text else ""))
        return f"{head}: " + "; ".join(said) + "." + (f" {result.busy[0].upper()}{result.busy[1:]}." if result.busy else "")
    return f"{head}." + (f" {event.reason}" if event.reason and event.status == "finished" else "")
