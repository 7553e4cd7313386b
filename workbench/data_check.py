"""Cheap checks of a run's data before anything starts: no torch, no arrays loaded.

The CLI runs them before it records a run, and the settings form before it enables Start, so bad
input (an unreadable or wrong .npz, a batch larger than the data) starts nothing and stores nothing.
What only the arrays can tell (a negative label) is still found when the run loads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from workbench.config import RunConfig
from workbench.npz import header

KNOWN_DATASET_SIZES = {"cifar10": 50_000, "cifar100": 50_000}


def train_size(config: RunConfig) -> Optional[int]:
    """Training images, known without loading the data; None when it cannot be known cheaply."""
    if config.dataset == "synthetic":
        return config.synthetic_size
    if config.dataset == "npz":
        return header.train_size(config.data_path) if config.data_path else None
    return KNOWN_DATASET_SIZES.get(config.dataset)


def data_problems(config: RunConfig) -> list[str]:
    """What is wrong with the run's data, in words; [] when the cheap checks pass."""
    if config.dataset == "npz":
        if not config.data_path or not Path(config.data_path).expanduser().is_file():
            return []  # RunConfig.validate already says the file is missing
        found = header.npz_problems(config.data_path)
        if found:
            return found
    size = train_size(config)
    if size is not None and size < config.batch_size:
        return [f"batch_size {config.batch_size:,} is larger than the training set ({size:,} images)"]
    if size is not None and config.devices > 1 and size < config.batch_size * config.devices:
        return [f"batch_size {config.batch_size:,} × devices {config.devices} is larger than the training set "
                f"({size:,} images): each process takes batch_size images per step"]
    return []
