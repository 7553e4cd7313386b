"""The GUI's calls into the engine, each importing torch only when first called.

They run on worker threads (the device probe, the sample batch and the training run can start at
the same moment), so the first import happens under one lock: two threads importing torchvision
at once can each see it half-initialised ("cannot import name … from partially initialized module").
"""

from __future__ import annotations

import dataclasses
import importlib
import threading
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo
from workbench.engine.events import Event, MemoryRelease
from workbench.engine.requests import JobRequests

if TYPE_CHECKING:
    from workbench.engine.data import SampleBatch

_import_lock = threading.Lock()
_ENGINE_MODULES = ("workbench.engine.device", "workbench.engine.memory", "workbench.engine.data",
                   "workbench.engine.trainer")


def _import_engine() -> None:
    with _import_lock:
        for name in _ENGINE_MODULES:
            importlib.import_module(name)


def engine_run(config: RunConfig, stop: Callable[[], bool]) -> Iterator[Event]:
    """The engine's run; a stop flag that is a JobRequests brings its "sample now" requests along."""
    _import_engine()
    from workbench.engine import run

    requests = stop.profile_requests if isinstance(stop, JobRequests) else None
    return run(config, stop, requests)


def engine_probe() -> DeviceInfo:
    _import_engine()
    from workbench.engine import probe_device

    return probe_device("auto")


def engine_preview(config: RunConfig, count: int) -> SampleBatch:
    _import_engine()
    from workbench.engine import preview_batch

    return preview_batch(config, count)


def engine_release() -> MemoryRelease:
    _import_engine()
    from workbench.engine import release_cached_memory

    return release_cached_memory()


def engine_probe_for(requested: str) -> DeviceInfo:
    """The device a run with ``device=requested`` trains on (sequences check every member with it)."""
    _import_engine()
    from workbench.engine import probe_device

    return probe_device(requested)


def engine_ceiling(config: RunConfig, stop: Callable[[], bool], budget_seconds: Optional[float] = None):
    """Measure the compute ceiling for ``config`` now (never from the cache) and keep it in the cache, so
    the next run with these settings shows its pipeline efficiency. Returns the engine's Ceiling."""
    _import_engine()
    from workbench.engine import probe_device
    from workbench.engine.ceiling import measure_ceiling
    from workbench.engine.ceiling_cache import CeilingNotKept, store_ceiling

    budget = {} if budget_seconds is None else {"budget_seconds": budget_seconds}
    ceiling = measure_ceiling(config, probe_device(config.device), stop=stop, **budget)
    try:
        store_ceiling(ceiling)
    except CeilingNotKept as error:  # a read-only or full home: the figure is shown, with why it is not kept
        return dataclasses.replace(ceiling, not_kept=str(error))
    return ceiling


def engine_model_names() -> list[str]:
    """torchvision's classification models, by the name RunConfig.model takes (torchvision imported on use)."""
    with _import_lock:
        from torchvision import models as tv_models

    return tv_models.list_models(module=tv_models)
