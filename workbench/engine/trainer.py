"""run(config, stop, profile_requests): a run's events, in one process or in several.

One process (devices=1, not under torchrun) is ``one_process.run_one``; several, or any process torchrun
started, go through ``distributed.launcher.run_distributed``, which yields the same event types.

Either way the run first waits for what a stop left running in this process: a stopped run's phase that blocks in
one call (its torch.compile, model build, DataLoader worker start-up, data loading) or a stopped ceiling probe's step
in flight runs on, abandoned, until it ends (interruptible.py). The run's first windows, their images/s and step
times, would otherwise be measured on a device (or CPU cores) that work shares. A stop ends the wait within a poll,
however long the work goes on.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional

from workbench.config import RunConfig
from workbench.engine.distributed.launcher import run_distributed
from workbench.engine.distributed.world import launched_world
from workbench.engine.events import Event, RunEnded, StatusChanged
from workbench.engine.interruptible import wait_for_abandoned
from workbench.engine.one_process import run_one
from workbench.engine.phases import left_running, waiting_for
from workbench.engine.requests import ProfileRequests, never, stopped_by
from workbench.engine.summary import SummaryBuilder


def run(
    config: RunConfig, stop: Callable[[], bool] = never, profile_requests: Optional[ProfileRequests] = None
) -> Iterator[Event]:
    """Train as ``config`` says; yield StatusChanged*, RunStarted, StepStats/EpochStats/ProfileSample*, RunEnded.

    ``profile_requests`` lets another thread ask for a profiler sample while the run goes.

    Every outcome ends in exactly one RunEnded: bad settings and data are failures of kind
    "config"/"data", anything else raised in training a failure with its reason. With devices ≠ 1,
    or under torchrun, the same events come from all processes together (workbench.engine.distributed).
    """
    left = left_running()
    if left:
        waiting = waiting_for(left)
        yield StatusChanged(message=f"W{waiting[1:]} ({'it' if len(left) == 1 else 'they'} would share the device "
                                    "with this run's first steps)…")
        if not wait_for_abandoned(stop=stop):
            reason = f"stopped by {stopped_by(stop)} while {waiting}"
            yield RunEnded(status="stopped", summary=SummaryBuilder().build("stopped", reason), reason=reason)
            return
    if config.devices != 1 or launched_world() is not None:
        yield from run_distributed(config, stop)  # (profile requests do not reach spawned ranks)
        return
    yield from run_one(config, stop, profile_requests)

