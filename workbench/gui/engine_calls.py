"""The GUI's four calls into the engine, each importing torch only when first called.

They run on worker threads (the device probe, the sample batch and the training run can start at
the same moment), so the first import happens under one lock: two threads importing torchvision
at once can each see it half-initialised ("cannot import name … from partially initialized module").
"""

from __future__ import annotations

import importlib
import threading
from typing import Callable, Iterator

import numpy as np

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo
from workbench.engine.events import Event, MemoryRelease

_import_lock = threading.Lock()
_ENGINE_MODULES = ("workbench.engine.device", "workbench.engine.memory", "workbench.engine.data",
                   "workbench.engine.trainer")


def _import_engine() -> None:
    with _import_lock:
        for name in _ENGINE_MODULES:
            importlib.import_module(name)


def engine_run(config: RunConfig, stop: Callable[[], bool]) -> Iterator[Event]:
    _import_engine()
    from workbench.engine import run

    return run(config, stop)


def engine_probe() -> DeviceInfo:
    _import_engine()
    from workbench.engine import probe_device

    return probe_device("auto")


def engine_preview(config: RunConfig, count: int) -> np.ndarray:
    _import_engine()
    from workbench.engine import preview_batch

    return preview_batch(config, count)


def engine_release() -> MemoryRelease:
    _import_engine()
    from workbench.engine import release_cached_memory

    return release_cached_memory()
