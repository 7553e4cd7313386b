"""Cheap checks of a run's data before anything starts: no torch, no arrays loaded.

The CLI runs them before it records a run, and the settings form before it enables Start, so bad
input (an unreadable or wrong .npz, a batch larger than the data) starts nothing and stores nothing.
What only the label values can tell (a label outside the classes) is label_problems', which reads them:
the CLI's, before it records; the engine checks the same when it loads the arrays.
"""

from __future__ import annotations

from typing import Optional

from workbench.config import RunConfig
from workbench.folder_layout import training_image_count
from workbench.npz import header
from workbench.npz.labels import read_label_check
from workbench.regular_file import regular_file_problem

KNOWN_DATASET_SIZES = {"cifar10": 50_000, "cifar100": 50_000}


def train_size(config: RunConfig, count_folder: bool = False) -> Optional[int]:
    """Training images, known without loading the data; None when it cannot be known cheaply. An image folder's
    are counted only with ``count_folder`` (its directories are listed: never on the GUI thread)."""
    if config.dataset == "synthetic":
        return config.synthetic_size
    if config.dataset == "npz":
        return header.train_size(config.data_path) if config.data_path else None
    if config.dataset == "folder":
        return training_image_count(config.data_path) if count_folder and config.data_path else None
    return KNOWN_DATASET_SIZES.get(config.dataset)


def data_problems(config: RunConfig) -> list[str]:
    """What is wrong with the run's data, in words; [] when the cheap checks pass."""
    if config.dataset == "npz":
        if not config.data_path or regular_file_problem(config.data_path) is not None:
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
    if size is not None and config.max_steps is None:  # with max_steps, RunConfig.validate says it
        return steps_problems(config, planned_steps(config, size))
    return []


def label_problems(config: RunConfig) -> list[str]:
    """What the labels of an .npz make wrong (out of its classes, a stray label): they are read, so call
    this off the GUI thread, before recording a run. [] for the other datasets and when the cheap checks
    fail (they say it)."""
    if config.dataset != "npz" or data_problems(config):
        return []
    return read_label_check(config.data_path).problems


def planned_steps(config: RunConfig, train_size: int, world_size: Optional[int] = None) -> int:
    """Micro-batch steps the run will take (each process's, with several): max_steps when set, else epochs ×
    full batches per epoch of each process's share of the data."""
    if config.max_steps is not None:
        return config.max_steps
    if world_size is None:
        world_size = max(1, config.devices)  # devices=0 (every GPU): unknown here, at least one
    return config.epochs * (train_size // world_size // config.batch_size)


def steps_problems(config: RunConfig, steps: int) -> list[str]:
    """A run shorter than one accumulation group would end without a single optimizer step."""
    if steps >= config.accumulation_steps:
        return []
    length = (f"max_steps {steps:,}" if config.max_steps is not None
              else f"{config.epochs:,} epoch{'s' if config.epochs != 1 else ''} of "
                   f"{steps // config.epochs:,} step{'s' if steps // config.epochs != 1 else ''}")
    return [f"{length} {'is' if config.max_steps is not None else 'make'} fewer steps than "
            f"accumulation_steps={config.accumulation_steps}: the run would end before its first optimizer "
            "step; lower accumulation_steps or train longer"]
