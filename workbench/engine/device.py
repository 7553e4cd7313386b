"""Which device a run uses, and what it can do."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any, ContextManager

import torch

from workbench.device_info import DeviceInfo
from workbench.engine import nvml


@functools.lru_cache(maxsize=None)
def probe_device(requested: str = "auto") -> DeviceInfo:
    """Describe the device a run with ``device=requested`` resolves to ("auto" prefers CUDA)."""
    common: dict[str, Any] = dict(  # the fields a CPU and a CUDA DeviceInfo share
        torch_version=torch.__version__,
        torchvision_version=_torchvision_version(),
        python_version=platform.python_version(),
        cpu_count=os.cpu_count() or 1,
        cuda_version=torch.version.cuda,
        gpu_count=torch.cuda.device_count(),
        distributed_backends=_distributed_backends(),
    )
    cuda_available = torch.cuda.is_available()
    if requested == "cpu" or not cuda_available:
        if requested == "cpu":
            reason = "device=cpu was chosen"
        elif torch.version.cuda is None:
            reason = f"no CUDA GPU found: this torch {torch.__version__} is a CPU-only build"
        else:
            reason = "no CUDA GPU found"
        return DeviceInfo(
            type="cpu", name=cpu_name(), cuda_available=cuda_available, cpu_fallback_reason=reason, **common
        )
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return DeviceInfo(
        type="cuda",
        name=props.name,
        cuda_available=True,
        compute_capability=f"{props.major}.{props.minor}",
        total_memory_bytes=props.total_memory,
        # Only Ampere (8.0) and newer do bf16 natively; torch may emulate it on older cards.
        bf16_supported=props.major >= 8,
        driver_version=_driver_version(),
        **common,
    )


def cpu_name() -> str:
    name = platform.processor() or platform.machine()
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
                for line in cpuinfo:
                    if line.startswith("model name"):
                        name = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
    return f"{name} ({os.cpu_count() or 1} cores)"


def _distributed_backends() -> tuple[str, ...]:
    import torch.distributed as dist

    if not dist.is_available():
        return ()
    return tuple(
        name for name, present in (("nccl", dist.is_nccl_available()), ("gloo", dist.is_gloo_available())) if present
    )


def _torchvision_version() -> str:
    """torchvision's version, read from its version.py without importing the package: the import
    doubles a process's start-up time, and every distributed rank probes its device."""
    module = sys.modules.get("torchvision")
    # A module another thread is still importing is in sys.modules without its __version__ yet: its file is read
    # as if it were not imported, or the import waits for that thread's to end.
    if module is None or not isinstance(getattr(module, "__version__", None), str):
        spec = importlib.util.find_spec("torchvision")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            try:
                text = (Path(folder) / "version.py").read_text(encoding="utf-8")
            except OSError:
                continue
            match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
            if match:
                return match.group(1)
        module = importlib.import_module("torchvision")
    return module.__version__


def _driver_version() -> str | None:
    return nvml.driver_version().value  # None where NVML is missing or unusable: the version is a nicety


def resolve(info: DeviceInfo) -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if info.type == "cuda" else torch.device("cpu")


def on_device(device: torch.device) -> ContextManager:
    """Make ``device`` this thread's current CUDA device for a block (each thread starts on device 0)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
