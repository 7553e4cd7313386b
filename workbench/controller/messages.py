"""The words the window shows about a run (no Qt): progress and outcomes. Runs are named by
workbench.history.naming, the same in the window, the Runs tab and the CSV."""

from __future__ import annotations

import math
from typing import Optional

from workbench.engine.events import EpochStats, RunEnded, RunStarted, StepStats
from workbench.formatting import format_duration


def eta_seconds(stats: StepStats) -> Optional[float]:
    if stats.step <= 0 or stats.elapsed_seconds <= 0:
        return None
    return stats.elapsed_seconds / stats.step * (stats.total_steps - stats.step)


def progress_text(stats: StepStats) -> str:
    return (f"Epoch {stats.epoch}/{stats.epochs} · step {stats.step:,}/{stats.total_steps:,} · "
            f"ETA {format_duration(eta_seconds(stats))} · {stats.images_per_sec:,.0f} images/s")


def started_text(event: RunStarted) -> str:
    return (f"Training {event.config.model} on {event.device.type} ({event.device.name}): "
            f"{event.train_size:,} {event.dataset_name} images, {event.steps_per_epoch:,} steps per epoch, "
            f"{event.total_steps:,} steps in all")


def epoch_text(stats: EpochStats) -> str:
    return (f"Epoch {stats.epoch}/{stats.epochs}: test accuracy {stats.test_accuracy:.1%}, "
            f"test loss {stats.test_loss:.3f}, {stats.images_per_sec:,.0f} images/s, "
            f"waiting for data {stats.data_wait_fraction:.0%} of the time")


def ended_text(event: RunEnded) -> str:
    summary = event.summary
    if event.status == "failed":
        return f"Run failed: {event.reason or 'no reason given'}"
    parts = []
    if summary.test_accuracy is not None:
        parts.append(f"test accuracy {summary.test_accuracy:.1%}")
    if summary.images_per_sec_median is not None and math.isfinite(summary.images_per_sec_median):
        parts.append(f"{summary.images_per_sec_median:,.0f} images/s (median)")
    if summary.data_wait_fraction is not None:
        parts.append(f"waiting for data {summary.data_wait_fraction:.0%}")
    parts.append(f"{summary.steps:,} steps in {format_duration(summary.wall_seconds)}")
    head = "Finished" if event.status == "finished" else f"Stopped ({event.reason})" if event.reason else "Stopped"
    return f"{head}: " + ", ".join(parts)
