"""run(config, stop, profile_requests): one run's lifecycle, from settings to exactly one RunEnded.

It checks the settings, loads the data, builds a TrainingSession (session.py: the step loop),
yields its events, and turns whatever ended the run into a RunEnded with a summary.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Callable, Iterator, Optional

import torch

from workbench.config import RunConfig
from workbench.engine.data import DataError, load_arrays
from workbench.engine.device import probe_device
from workbench.engine.events import Event, RunEnded, StatusChanged
from workbench.engine.requests import ProfileRequests
from workbench.engine.session import Diverged, TrainingSession
from workbench.engine.summary import SummaryBuilder


def _never() -> bool:
    return False


def run(
    config: RunConfig, stop: Callable[[], bool] = _never, profile_requests: Optional[ProfileRequests] = None
) -> Iterator[Event]:
    """Train as ``config`` says; yield StatusChanged*, RunStarted, StepStats/EpochStats/ProfileSample*, RunEnded.

    ``profile_requests`` lets another thread ask for a profiler sample while the run goes.

    Every outcome ends in exactly one RunEnded: bad settings and data are failures of kind
    "config"/"data", anything else raised in training a failure with its reason. With devices ≠ 1,
    or under torchrun, the same events come from all processes together (workbench.engine.distributed).
    """
    from workbench.engine.distributed.world import launched_world

    if config.devices != 1 or launched_world() is not None:
        from workbench.engine.distributed import run_distributed

        yield from run_distributed(config, stop)  # (profile requests do not reach spawned ranks)
        return
    yield from run_one(config, stop, profile_requests)


def run_one(
    config: RunConfig,
    stop: Callable[[], bool] = _never,
    profile_requests: Optional[ProfileRequests] = None,
    world: Optional[Any] = None,
) -> Iterator[Event]:
    """One process's run; ``world`` (a distributed.rank.RankWorld) when it is one rank of several."""
    summary = SummaryBuilder()

    def ended(status, reason=None, kind=None) -> RunEnded:
        return RunEnded(status, summary.build(status, reason, kind), reason, kind)

    try:
        device_info = probe_device(config.device)
    except Exception as error:
        yield ended("failed", f"could not query the device: {type(error).__name__}: {error}", "error")
        return
    # A rank is one process: how many the world holds was checked where it was started.
    problems = (config if world is None else config.replace(devices=1)).validate(device_info)
    if problems:
        yield ended("failed", "; ".join(problems), "config")
        return

    session: Optional[TrainingSession] = None
    try:
        yield StatusChanged(f"Loading {config.dataset} data…")
        arrays = load_arrays(config)
        world_size = world.world_size if world is not None else 1
        if len(arrays.train_labels) < config.batch_size * world_size:
            per_step = f"batch_size {config.batch_size}" + (f" × {world_size} processes" if world_size > 1 else "")
            raise DataError(f"{per_step} is larger than the training set ({len(arrays.train_labels)} images)")
        yield StatusChanged(f"Building {config.model} on {device_info.type}…")
        session = TrainingSession(config, device_info, arrays, profile_requests, world=world)
        with contextlib.closing(session.events(stop)) as events:
            for event in events:
                summary.add(event)
                yield event
        if session.stopped_at is not None:
            yield ended("stopped", f"stopped by the user at step {session.stopped_at}")
        else:
            yield ended("finished")
    except DataError as error:
        yield ended("failed", str(error), "data")
    except torch.cuda.OutOfMemoryError:
        # Drop the model, optimizer and data before reporting, so the cache can really be returned.
        if session is not None:
            session.close()
            session = None
        gc.collect()
        torch.cuda.empty_cache()
        yield ended(
            "failed",
            f"CUDA out of memory with {config.model} at batch_size={config.batch_size}, {config.precision}: "
            "try a smaller batch with accumulation_steps, or fp16/bf16",
            "out_of_memory",
        )
    except Diverged as error:
        yield ended("failed", str(error), "diverged")
    except Exception as error:
        yield ended("failed", f"{type(error).__name__}: {error}", "error")
    finally:
        if session is not None:
            session.close()
