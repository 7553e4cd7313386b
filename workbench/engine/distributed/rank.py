"""One rank of a data-parallel run: join the process group, train this rank's share, leave.

Everything here is PyTorch's own distributed engine: ``init_process_group`` (a FileStore for ranks
spawned here, ``env://`` under torchrun), DistributedDataParallel around the model, DistributedSampler
(in workbench.engine.data) for the data. Two things are added: the agreement on when to stop, and a
join that a stop ends (init_process_group waits for every rank in C++, where no signal handler runs).
"""

from __future__ import annotations

import inspect
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Generator, Iterator, Optional

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from workbench.config import RunConfig
from workbench.engine.device import probe_device
from workbench.engine.distributed.world import World, backend_for
from workbench.engine.events import Event, RunEnded, StatusChanged
from workbench.engine.interruptible import HelperCall, StillRunning, Stopped
from workbench.engine.models import has_unused_parameters
from workbench.engine.one_process import run_one
from workbench.engine.requests import stopped_by
from workbench.engine.run_summary import RunSummary

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup


class RankWorld:
    """This rank once its process group is up: what the training session asks of it (rank,
    world_size, wrap_model), plus a gloo group for the small host-side messages between ranks."""

    def __init__(self, world: World):
        self.rank, self.world_size, self.local_rank = world.rank, world.world_size, world.local_rank
        self.backend = world.backend
        self.wraps_model = world.wraps_model
        # Host-side control (stop agreement, gathering figures under torchrun) on gloo: CPU tensors and
        # objects, and never in the way of NCCL's gradient traffic.
        self.control_group: Optional[ProcessGroup] = None
        if world.world_size > 1:
            group = dist.new_group(backend="gloo")
            # A group of every rank: new_group answers NON_GROUP_MEMBER (-100) only to ranks left out of it.
            assert not isinstance(group, int)
            self.control_group = group

    def wrap_model(self, model: nn.Module, device: torch.device) -> nn.Module:
        """DDP around the model; the model itself for one process (World.wrap_one_process)."""
        if not self.wraps_model:
            return model
        # gradient_as_bucket_view: gradients live in DDP's all-reduce buckets instead of a copy beside them.
        # find_unused_parameters (a graph walk each step) only where some parameters get no gradient: without it
        # DDP would wait for their gradients and stop at step 2.
        return DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True,
            find_unused_parameters=has_unused_parameters(model), **FEWER_LAUNCHES_PER_STEP,
        )


def _fewer_launches_per_step() -> dict[str, Any]:
    """DDP's options that take kernels off each step without changing a figure, by this torch's names
    (keyword arguments: each a bool).

    No broadcast of rank 0's buffers before every forward: nothing here reads another rank's buffers
    (BatchNorm's running statistics). In training mode BatchNorm normalises with the batch's own
    statistics, and only rank 0 evaluates (engine/session.py), with its own, which the broadcast never
    changes. The broadcast is a collective, a concatenation and a copy per buffer each step: resnet18
    gains ~60 kernels on its ~400, on a step that on an H100 already waits for its launches
    (benchmarks/ddp_ops.py counts them).

    batched_grad_copy (torch 2.14+): each bucket's gradients are copied in by one multi-tensor copy and
    one division instead of a copy per parameter (the gradients are the same).
    """
    parameters = inspect.signature(DistributedDataParallel.__init__).parameters
    # torch 2.13 renamed it (broadcast_buffers is deprecated there, with a warning).
    options: dict[str, Any] = (
        {"forward_sync_buffers": False} if "forward_sync_buffers" in parameters else {"broadcast_buffers": False})
    if "batched_grad_copy" in parameters:
        options["batched_grad_copy"] = True
    return options


FEWER_LAUNCHES_PER_STEP = _fewer_launches_per_step()


def claim_local_gpu(world: World) -> None:
    """Make this rank's GPU the current one, before anything creates a CUDA context (on GPU 0 otherwise)."""
    if torch.cuda.is_available():
        torch.cuda.set_device(world.local_rank)


def join_world(world: World) -> RankWorld:
    options: dict[str, Any] = dict(
        backend=world.backend, init_method=world.init_method, rank=world.rank, world_size=world.world_size
    )
    if world.backend == "nccl":
        options["device_id"] = torch.device("cuda", torch.cuda.current_device())  # bind the communicator eagerly
    dist.init_process_group(**options)
    return RankWorld(world)


def leave_world() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


# Joining waits in init_process_group's C++ until every rank has come (torch gives up after 30 minutes), where no
# signal handler runs: it runs on a helper thread, and a stop ends the wait. There is no group yet whose ranks could
# part ways; but every rank gets a terminal's Ctrl-C at once, and a rank whose join completed goes on to the agreed
# stop, which needs the others: after a stop a join under way has this long to complete (the ranks' joins complete
# within moments of each other), and is used if it does.
JOIN_SETTLE_S = 1.0
# A join that takes longer says what it waits for, once (a peer that never starts was a silent 30-minute wait).
SAY_WAITING_AFTER_S = 5.0
JOINING = "joining the other processes"  # the helper thread's phase name


class JoinStopped(Exception):
    """A stop ended the wait for the other processes to join; the reason, in words."""


def join_world_interruptibly(world: World, stop: Callable[[], bool]) -> Generator[Event, None, RankWorld]:
    """``join_world(world)``, yielding one line if it waits long; ``JoinStopped`` when a stop ends the wait."""
    began = time.monotonic()
    # The current CUDA device is each thread's own (a new thread's is GPU 0): the helper joins on this thread's,
    # the rank's GPU (claim_local_gpu), which NCCL's communicator is bound to.
    gpu = torch.cuda.current_device() if world.backend == "nccl" else None
    joining = HelperCall(lambda: _join_on(gpu, world), JOINING, on_abandoned=_leave_if_joined, ended_by_others=True)
    settled_stop = _Settled(stop, JOIN_SETTLE_S)
    try:
        try:
            return joining.wait(settled_stop, patience=SAY_WAITING_AFTER_S)
        except StillRunning:
            pass
        try:
            yield StatusChanged(message=f"waiting for {waited_for(world)}…", lasting=True)
        except BaseException:  # the consumer closed the run here: nobody waits for the join any more
            joining.abandon()
            raise
        return joining.wait(settled_stop)
    except Stopped:
        raise JoinStopped(f"stopped by {stopped_by(stop)} while waiting for {waited_for(world)}, "
                          f"after {time.monotonic() - began:.0f} s") from None


def waited_for(world: World) -> str:
    """Whom a joining rank waits for: "rank 1 to join the run (2 processes, meeting at 127.0.0.1:29500)"."""
    others = [rank for rank in range(world.world_size) if rank != world.rank]
    if len(others) == 1:
        who = f"rank {others[0]}"
    elif others[-1] - others[0] == len(others) - 1:
        who = f"ranks {others[0]}–{others[-1]}"
    else:
        who = f"the other {len(others)} ranks"
    where = ""
    if world.init_method == "env://":  # torchrun's: where rank 0 listens (a file:// store is the launcher's own)
        where = f", meeting at {os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    return f"{who} to join the run ({world.world_size} processes{where})"


def _join_on(gpu: Optional[int], world: World) -> RankWorld:
    if gpu is not None:
        torch.cuda.set_device(gpu)
    return join_world(world)


class _Settled:
    """``stop`` once it has held for ``seconds``."""

    def __init__(self, stop: Callable[[], bool], seconds: float):
        self.stop, self.seconds = stop, seconds
        self._since: Optional[float] = None

    def __call__(self) -> bool:
        if not self.stop():
            return False
        if self._since is None:
            self._since = time.monotonic()
        return time.monotonic() - self._since >= self.seconds


def _leave_if_joined(joined: Optional[RankWorld]) -> None:
    """An abandoned join that completed after all (the others came late): leave the group it made."""
    if joined is not None:
        leave_world()


class AgreedStop:
    """Every rank stops at the same step, or a collective waits for a rank that has left.

    Each call (once per step, the same number of times on every rank) starts a one-number all-reduce
    (MAX of the local stop flags) on the gloo control group and returns the result of the previous
    call's, so all ranks decide on the same all-reduce. The all-reduce runs in gloo's threads while
    the step runs: the loop never waits for it (nor syncs the GPU) unless a rank is a whole step behind.
    """

    def __init__(self, local_stop: Callable[[], bool], group: Any):
        self.local_stop = local_stop
        self.group = group
        self._flag = torch.zeros(1, dtype=torch.int32)
        self._pending: Any = None
        self._stopped = False

    def __call__(self) -> bool:
        if self._stopped:
            return True
        if self._pending is not None:
            self._pending.wait()
            self._pending = None
            if int(self._flag[0]) > 0:
                self._stopped = True
                return True
        self._flag[0] = 1 if self.local_stop() else 0
        self._pending = dist.all_reduce(self._flag, op=dist.ReduceOp.MAX, group=self.group, async_op=True)
        return False

    def finish(self) -> None:
        """Wait for the last all-reduce (every rank started it) before the group goes away."""
        if self._pending is not None:
            self._pending.wait()
            self._pending = None


class RankRun:
    """This process's share of the run: its events, as one process's run yields them."""

    def __init__(self, config: RunConfig, world: World, local_stop: Callable[[], bool]):
        self.config, self.world, self.local_stop = config, world, local_stop
        self.rank_world: Optional[RankWorld] = None

    def events(self) -> Iterator[Event]:
        config, world = self.config, self.world
        agreed: Optional[AgreedStop] = None
        finished = False
        try:
            step = "query the device"
            try:
                if config.device != "cpu":
                    claim_local_gpu(world)  # before the probe: it reads the current device
                device = probe_device(config.device)
                if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
                    # The ranks share the cores: one thread per core each would oversubscribe them.
                    local_ranks = world.local_world_size or world.world_size
                    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_ranks))
                if not world.backend:
                    world = self.world = replace(world, backend=backend_for(device))
                step = f"join the other processes ({world.backend}, {world.init_method})"
                self.rank_world = yield from join_world_interruptibly(world, self.local_stop)
            except JoinStopped as stopped:  # the run's size is what it was started with, though no group was made
                reason = str(stopped)
                yield RunEnded(status="stopped", reason=reason, summary=RunSummary(
                    status="stopped", reason=reason, world_size=world.world_size))
                return
            except Exception as error:
                reason = f"could not {step}: {type(error).__name__}: {error}"
                yield RunEnded(status="failed", reason=reason, kind="error", summary=RunSummary(
                    status="failed", reason=reason, failure_kind="error", world_size=world.world_size))
                return
            stop = self.local_stop
            if self.rank_world.control_group is not None:
                stop = agreed = AgreedStop(self.local_stop, self.rank_world.control_group)
            for event in run_one(config, stop, world=self.rank_world, local_stop=self.local_stop):
                if isinstance(event, RunEnded) and event.status != "failed" and agreed is not None:
                    agreed.finish()
                finished = finished or (isinstance(event, RunEnded) and event.status != "failed")
                yield event
        finally:
            if finished or self.world.world_size == 1:
                leave_world()
            # After a failure the others may be waiting in a collective: leave without a handshake (the
            # process is about to end, which closes its connections).


def spawned_rank_main(index: int, world: World, config: RunConfig, events: Any, stop_requested: Any) -> None:
    """Entry of a rank the launcher spawned (torch.multiprocessing.spawn calls it with the rank first).

    Every event goes to the parent through ``events`` as (rank, event). The parent's Stop arrives
    through ``stop_requested``; a terminal's Ctrl-C (which reaches every process of the group) asks
    for the same agreed stop, a second one aborts; SIGTERM from the parent ends the process with
    its finally blocks run (the DataLoader's workers are shut down).
    """
    world = world.for_rank(index)
    interrupted = threading.Event()
    _install_signal_handlers(interrupted)
    failed = False
    try:
        for event in RankRun(config, world, lambda: stop_requested.is_set() or interrupted.is_set()).events():
            events.put((index, event))
            failed = isinstance(event, RunEnded) and event.status == "failed"
    except Exception as error:  # a bug outside the run's own error handling: still a RunEnded, with the reason
        reason = f"{type(error).__name__}: {error}"
        events.put((index, RunEnded(status="failed", summary=RunSummary(status="failed", reason=reason, failure_kind="error"), reason=reason, kind="error")))
        failed = True
    finally:
        for stop_signal in (signal.SIGTERM, signal.SIGHUP):  # ending from here on: these may simply end it
            signal.signal(stop_signal, signal.SIG_DFL)
        events.close()
        events.join_thread()  # the parent has every event before this process leaves (and others notice)
    if failed:
        sys.exit(1)


# The launcher ends a rank that outlived its run with this signal (then SIGKILL): SIGTERM and SIGHUP are the
# outside world's, which a closing terminal or a service manager sends to every process of the group, and they ask
# for the agreed stop, as in a one-process run (ending the ranks at once recorded the run as failed).
END_RANK_SIGNAL = signal.SIGUSR2


def _install_signal_handlers(interrupted: threading.Event) -> None:
    def on_stop_signal(signum: int, frame: Any) -> None:  # SIGINT, SIGTERM, SIGHUP: the first asks, a second aborts
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()

    def on_end(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)  # the finally blocks run: the DataLoader's workers are shut down

    for stop_signal in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop_signal, on_stop_signal)
    signal.signal(END_RANK_SIGNAL, on_end)
