"""A run's plotted series: growable numpy columns filled from StepStats, the x-axes, smoothing (no Qt).

The buffer doubles its capacity when full, so appending is amortised O(1) and the plots read
views of the filled part without copying. A figure that could not be measured is NaN.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional

import numpy as np

from workbench.engine.events import StepStats

# The keys of a run's series, shared with the overlay API (PlotsPanel.add_overlay) and the history
# (each is a step_metrics column of that name, so a past run's curves come straight from the store).
SERIES_KEYS: tuple[str, ...] = (
    "step",
    "samples_seen",
    "elapsed_seconds",
    "loss",
    "images_per_sec",
    "data_wait_fraction",
    "torch_allocated",
    "torch_reserved",
    "nvml_device_used",
    "process_rss",
)

GIB = float(2**30)  # the memory plots' unit (the series hold bytes)

# What the plots can put on their x-axis: series key → axis label. Runs that differ in batch size or
# accumulation only line up on samples seen; wall time shows what a setting costs in minutes.
X_AXES: dict[str, str] = {
    "step": "step",
    "samples_seen": "samples seen",
    "elapsed_seconds": "wall time since training started (s)",
}

# Below this many points a smoothed line says nothing the raw points do not: it is not drawn.
SMOOTH_MIN_POINTS = 10
SMOOTH_MAX_HALF_WIDTH = 25


class SeriesBuffer:
    def __init__(self, keys: tuple[str, ...] = SERIES_KEYS, capacity: int = 256):
        self.keys = keys
        self._index = {key: column for column, key in enumerate(keys)}
        self._data = np.full((capacity, len(keys)), np.nan)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def append(self, values: Mapping[str, Optional[float]]) -> None:
        """One row; missing or None values are NaN."""
        if self._length == len(self._data):
            grown = np.full((2 * len(self._data), len(self.keys)), np.nan)
            grown[: self._length] = self._data[: self._length]
            self._data = grown
        row = self._data[self._length]
        for key, value in values.items():
            row[self._index[key]] = np.nan if value is None else value
        self._length += 1

    def column(self, key: str) -> np.ndarray:
        """A read-only view of the filled part of one column."""
        view = self._data[: self._length, self._index[key]]
        view.flags.writeable = False
        return view

    def last(self, key: str) -> float:
        return float(self._data[self._length - 1, self._index[key]]) if self._length else math.nan

    def to_dict(self) -> dict[str, np.ndarray]:
        """Copies of every column (for an overlay that must outlive the next run)."""
        return {key: self.column(key).copy() for key in self.keys}


def step_row(stats: StepStats) -> dict[str, Optional[float]]:
    memory = stats.memory
    return {
        "step": stats.step,
        "samples_seen": stats.samples_seen,
        "elapsed_seconds": stats.elapsed_seconds,
        "loss": stats.loss,
        "images_per_sec": stats.images_per_sec,
        "data_wait_fraction": stats.data_wait_fraction,
        "torch_allocated": memory.torch_allocated,
        "torch_reserved": memory.torch_reserved,
        "nvml_device_used": memory.nvml_device_used,
        "process_rss": memory.process_rss,
    }


def finite_xy(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points where both are numbers: NaNs would break peak downsampling and autorange."""
    mask = np.isfinite(x) & np.isfinite(y)
    return x[mask], y[mask]


def has_data(values: np.ndarray) -> bool:
    return bool(np.isfinite(values).any())


def smoothing_half_width(count: int) -> int:
    """Points each side of the centre: 0 (no smoothing) for a short series, then about 5% of the points."""
    if count < SMOOTH_MIN_POINTS:
        return 0
    return min(SMOOTH_MAX_HALF_WIDTH, max(1, round(0.05 * count)))


def smoothed(values: np.ndarray) -> np.ndarray:
    """A centred moving mean whose window narrows symmetrically towards the ends.

    Centred, it has no lag: a trailing average (an EMA) draws a falling loss above the data, by
    more the faster it falls. Narrowing at the ends keeps it centred there too, so the last point
    is the last value itself. NaNs are left out of the means and stay NaN.
    """
    values = np.asarray(values, dtype=float)
    count = len(values)
    half = smoothing_half_width(count)
    if half == 0:
        return values.copy()
    finite = np.isfinite(values)
    sums = np.concatenate(([0.0], np.cumsum(np.where(finite, values, 0.0))))
    counts = np.concatenate(([0], np.cumsum(finite)))
    index = np.arange(count)
    reach = np.minimum(half, np.minimum(index, count - 1 - index))
    low, high = index - reach, index + reach + 1
    window_counts = counts[high] - counts[low]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (sums[high] - sums[low]) / window_counts
    return np.where(finite & (window_counts > 0), means, np.nan)
