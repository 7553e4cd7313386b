"""A run's plotted series: growable numpy columns filled from StepStats (no Qt).

The buffer doubles its capacity when full, so appending is amortised O(1) and the plots read
views of the filled part without copying. A figure that could not be measured is NaN.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Optional

import numpy as np

from workbench.engine.events import StepStats

# The keys of a run's series, shared with the overlay API (PlotsPanel.add_overlay) and the history.
SERIES_KEYS: tuple[str, ...] = (
    "step",
    "loss",
    "images_per_sec",
    "data_wait_fraction",
    "torch_allocated",
    "torch_reserved",
    "nvml_used",
)


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
        "loss": stats.loss,
        "images_per_sec": stats.images_per_sec,
        "data_wait_fraction": stats.data_wait_fraction,
        "torch_allocated": memory.torch_allocated,
        "torch_reserved": memory.torch_reserved,
        "nvml_used": memory.nvml_used,
    }


def finite_xy(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The points where both are numbers: NaNs would break peak downsampling and autorange."""
    mask = np.isfinite(x) & np.isfinite(y)
    return x[mask], y[mask]


class Ema:
    """Debiased exponential moving average (TensorBoard's smoothing), fed one value at a time."""

    def __init__(self, weight: float):
        self.weight = weight
        self._value = 0.0
        self._count = 0

    def update(self, value: float) -> float:
        if not math.isfinite(value):
            return math.nan
        self._count += 1
        self._value = self.weight * self._value + (1 - self.weight) * value
        return self._value / (1 - self.weight**self._count)


def smoothed(values: Iterable[float], weight: float) -> np.ndarray:
    ema = Ema(weight)
    return np.array([ema.update(float(value)) for value in values], dtype=float)
