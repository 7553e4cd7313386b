"""run(config, stop, profile_requests): one run's lifecycle, from settings to exactly one RunEnded.

It checks the settings, loads the data, builds a TrainingSession (session.py: the step loop),
yields its events, and turns whatever ended the run into a RunEnded with a summary.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Callable, Iterator, Optional

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
    "config"/"data", anything else raised in training a failure with its reason.
    """
    summary = SummaryBuilder()

    def ended(status, reason=None, kind=None) -> RunEnded:
        return RunEnded(status, summary.build(status, reason, kind), reason, kind)

    try:
        device_info = probe_device(config.device)
    except Exception as error:
        yield ended("failed", f"could not query the device: {type(error).__name__}: {error}", "error")
        return
    problems = config.validate(device_info)
    if problems:
        yield ended("failed", "; ".join(problems), "config")
        return

    session: Optional[TrainingSession] = None
    try:
        yield StatusChanged(f"Loading {config.dataset} data…")
        arrays = load_arrays(config)
        if len(arrays.train_labels) < config.batch_size:
            raise DataError(
                f"batch_size {config.batch_size} is larger than the training set ({len(arrays.train_labels)} images)"
            )
        yield StatusChanged(f"Building {config.model} on {device_info.type}…")
        session = TrainingSession(config, device_info, arrays, profile_requests)
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
