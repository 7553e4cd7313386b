"""The words the window shows about a run (no Qt): labels that say what changed, progress, outcomes."""

from __future__ import annotations

import math
from typing import Optional

from workbench.config import FIELD_NAMES, RunConfig
from workbench.engine.events import EpochStats, RunEnded, RunStarted, StepStats
from workbench.formatting import format_duration

MAX_CHANGES_IN_LABEL = 3


def run_label(number: int, config: RunConfig, previous: Optional[RunConfig]) -> str:
    """"#2 num_workers=4" — a rerun is named by what changed, so the legend shows the experiment."""
    if previous is None:
        return f"#{number} {config.model}, batch {config.batch_size}, {config.precision}"
    changes = [f"{name}={_value(getattr(config, name))}" for name in FIELD_NAMES
               if getattr(config, name) != getattr(previous, name)]
    if not changes:
        return f"#{number} same settings"
    shown = ", ".join(changes[:MAX_CHANGES_IN_LABEL])
    more = len(changes) - MAX_CHANGES_IN_LABEL
    return f"#{number} {shown}" + (f" (+{more} more)" if more > 0 else "")


def _value(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str) and "/" in value:
        return value.rsplit("/", 1)[-1]  # a path: its file name is enough in a legend
    return str(value)


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
