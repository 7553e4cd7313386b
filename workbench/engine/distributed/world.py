"""Where a process stands among the processes of one data-parallel run: plain data, no torch.

A run has one process per device. The workbench starts them itself (``devices`` > 1: the launcher
spawns them on this machine and meets them at a FileStore), or torchrun (or any launcher that sets
torch's ``env://`` variables) started them, on one machine or several.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Mapping, Optional

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo

# What torchrun sets for every process it starts (torch.distributed.run; `env://` rendezvous).
LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@dataclass(frozen=True)
class World:
    """One process's place: which rank of how many, its GPU, how the processes meet."""

    rank: int
    world_size: int
    local_rank: int  # the GPU index on its machine
    backend: str  # "nccl" (GPUs) or "gloo" (CPU)
    init_method: str  # "file:///…/rendezvous" (spawned here) or "env://" (torchrun)
    local_world_size: int = 0  # processes on this machine (0 = world_size)
    # One process has no gradients to average: it trains without DistributedDataParallel, unless asked for
    # the wrapper anyway (benchmarks/distributed_overhead.py measures what the wrapper costs a step).
    wrap_one_process: bool = False

    @property
    def wraps_model(self) -> bool:
        return self.world_size > 1 or self.wrap_one_process

    def for_rank(self, rank: int) -> World:
        """The same world seen from another locally spawned rank."""
        return replace(self, rank=rank, local_rank=rank)


def launched_world(environ: Mapping[str, str] = os.environ) -> Optional[World]:
    """The world torchrun (or another env:// launcher) put this process in, or None when it did not.

    The backend is left empty: it follows the device, which the caller knows.
    """
    if not all(name in environ for name in LAUNCHER_VARIABLES):
        return None
    try:
        rank, world_size, local_rank = (int(environ[name]) for name in LAUNCHER_VARIABLES)
        local_world_size = int(environ.get("LOCAL_WORLD_SIZE", world_size))
    except ValueError:
        return None
    return World(rank, world_size, local_rank, backend="", init_method="env://", local_world_size=local_world_size)


def world_size_for(config: RunConfig, device: DeviceInfo) -> int:
    """How many processes ``config`` asks for on this machine (devices=0: every visible GPU)."""
    if config.devices == 0:
        return max(1, device.gpu_count) if device.type == "cuda" else 1
    return config.devices


def backend_for(device: DeviceInfo) -> str:
    """NCCL between CUDA GPUs; gloo on the CPU, or where this torch build has no NCCL (then slower)."""
    if device.type == "cuda" and "nccl" in device.distributed_backends:
        return "nccl"
    return "gloo"


def distributed_notes(config: RunConfig, device: DeviceInfo, world_size: int, backend: str,
                      wraps_model: bool = True) -> list[str]:
    """What a user should know about this multi-process run, said once at its start."""
    if world_size == 1 and not wraps_model:
        return [f"1 process ({backend}): trained without DistributedDataParallel, since one process has no "
                "gradients to average"]
    notes = [
        f"{world_size} processes, data-parallel (DistributedDataParallel, {backend}): effective batch "
        f"{config.batch_size} × {world_size} × {config.accumulation_steps} = "
        f"{config.batch_size * world_size * config.accumulation_steps}; rank 0 evaluates"
    ]
    if device.type == "cpu":
        notes.append(
            f"{world_size} CPU processes share {device.cpu_count} cores: this checks a multi-process setup, "
            "it does not train faster than one process"
        )
    elif backend == "gloo":
        notes.append("this torch build has no NCCL: gradients are averaged over gloo, much slower between GPUs")
    if config.pipeline == "dataloader" and config.num_workers > 0:
        notes.append(f"each process starts its own {config.num_workers} loader workers "
                     f"({config.num_workers * world_size} in all)")
    if config.compile != "off":
        notes.append("rank 0 evaluates with the uncompiled model")
    return notes


# What a rank's collective says when another process of the run went away (it died, or was killed) mid-step.
_LOST_PEER_WORDS = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "DistBackendError",
                    "NCCL communicator was aborted", "ProcessGroupNCCL's watchdog")


def lost_a_peer(reason: str) -> bool:
    return any(words in reason for words in _LOST_PEER_WORDS)


def lost_peer_reason(reason: str) -> str:
    """A rank's reason where its collective lost another process of the run, in words (gloo's own line names a
    source file and an address); torchrun's ranks are processes apart, so which one went away is its own to say."""
    said = reason.splitlines()[0] if reason else ""
    return ("another process of the run went away mid-step (it died or was killed: its own output says why); "
            f"this rank's collective then failed ({said[-160:]})")
