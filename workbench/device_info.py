"""DeviceInfo: what a machine offers a run, as plain data.

It sits beside the config, not in the engine: ``RunConfig.validate`` checks settings against it,
the engine's device probe fills it in, and settings stay plain data that depend on nothing in the
engine. Importing this module is cheap (no torch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Optional


@dataclass(frozen=True)
class DeviceInfo:
    """The device a run resolves to, and what the machine offers."""

    type: Literal["cuda", "cpu"]
    name: str  # "NVIDIA H100 80GB HBM3", or the CPU model
    cuda_available: bool
    cpu_fallback_reason: Optional[str] = None  # why this is not a GPU run, in words
    compute_capability: Optional[str] = None  # "9.0"
    total_memory_bytes: Optional[int] = None
    bf16_supported: bool = False
    driver_version: Optional[str] = None
    cuda_version: Optional[str] = None  # the CUDA torch was built with
    torch_version: str = ""
    torchvision_version: str = ""
    python_version: str = ""
    cpu_count: int = 1
    gpu_count: int = 0  # CUDA GPUs visible to this process (torch.cuda.device_count())
    # torch.distributed backends this torch build has ("nccl", "gloo"); () without torch.distributed
    distributed_backends: tuple[str, ...] = ()


# The device probe for a requested device ("auto", "cuda", "cpu"): the engine's probe_device, or a fake of it.
Probe = Callable[[str], DeviceInfo]
