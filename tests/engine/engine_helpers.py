"""Small builders shared by the engine tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workbench.config import RunConfig
from workbench.engine import run
from workbench.engine.events import Event, RunEnded


def tiny_config(**changes) -> RunConfig:
    """A run that takes a second or two on a CPU."""
    base = dict(
        dataset="synthetic", synthetic_size=256, batch_size=32, epochs=1, max_steps=4,
        num_workers=0, device="cpu", log_every=2,
    )
    base.update(changes)
    return RunConfig(**base)


def run_to_end(config: RunConfig, stop=lambda: False) -> list[Event]:
    events = list(run(config, stop))
    assert isinstance(events[-1], RunEnded)
    assert sum(isinstance(event, RunEnded) for event in events) == 1
    return events


def write_npz(path: Path, train: int = 64, test: int = 32, classes: int = 10, **overrides) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 256, (train, 32, 32, 3), dtype=np.uint8),
        "train_labels": rng.integers(0, classes, train).astype(np.uint8),
        "test_images": rng.integers(0, 256, (test, 32, 32, 3), dtype=np.uint8),
        "test_labels": rng.integers(0, classes, test).astype(np.uint8),
    }
    arrays.update(overrides)
    arrays = {key: value for key, value in arrays.items() if value is not None}
    np.savez(path, **arrays)
    return path
