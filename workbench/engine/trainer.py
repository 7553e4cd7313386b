"""run(config, stop, profile_requests): a run's events, in one process or in several.

One process (devices=1, not under torchrun) is ``one_process.run_one``; several, or any process torchrun
started, go through ``distributed.launcher.run_distributed``, which yields the same event types.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional

from workbench.config import RunConfig
from workbench.engine.distributed.launcher import run_distributed
from workbench.engine.distributed.world import launched_world
from workbench.engine.events import Event
from workbench.engine.one_process import run_one
from workbench.engine.requests import ProfileRequests, never


def run(
    config: RunConfig, stop: Callable[[], bool] = never, profile_requests: Optional[ProfileRequests] = None
) -> Iterator[Event]:
    """Train as ``config`` says; yield StatusChanged*, RunStarted, StepStats/EpochStats/ProfileSample*, RunEnded.

    ``profile_requests`` lets another thread ask for a profiler sample while the run goes.

    Every outcome ends in exactly one RunEnded: bad settings and data are failures of kind
    "config"/"data", anything else raised in training a failure with its reason. With devices ≠ 1,
    or under torchrun, the same events come from all processes together (workbench.engine.distributed).
    """
    if config.devices != 1 or launched_world() is not None:
        yield from run_distributed(config, stop)  # (profile requests do not reach spawned ranks)
        return
    yield from run_one(config, stop, profile_requests)
