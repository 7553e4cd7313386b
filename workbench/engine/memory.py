"""The memory figures: torch allocated, torch reserved, NVML device used/total, this process's RSS."""

from __future__ import annotations

import gc
import mmap
from typing import Any, Optional

import torch

from workbench.engine.events import MemoryRelease, MemorySnapshot
from workbench.formatting import format_bytes


class MemoryProbe:
    """Reads memory for one device; holds an NVML handle for the run's lifetime.

    Every read is cheap and never raises: what cannot be read is None with a reason.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self._nvml: Any = None
        self._handle: Any = None
        self.nvml_unavailable_reason: Optional[str] = None
        if device.type != "cuda":
            self.nvml_unavailable_reason = "CPU device: no GPU memory to read"
            return
        try:
            import pynvml
        except ImportError:
            self.nvml_unavailable_reason = "nvidia-ml-py (pynvml) is not installed"
            return
        try:
            pynvml.nvmlInit()
            self._handle = _nvml_handle(pynvml, device)
            self._nvml = pynvml
        except Exception as error:  # pynvml.NVMLError and friends: no driver library, no permission
            self.nvml_unavailable_reason = f"NVML unavailable: {error}"

    def snapshot(self) -> MemorySnapshot:
        torch_figures: dict[str, Any]
        if self.device.type == "cuda":
            torch_figures = dict(
                torch_allocated=torch.cuda.memory_allocated(self.device),
                torch_reserved=torch.cuda.memory_reserved(self.device),
                torch_peak_allocated=torch.cuda.max_memory_allocated(self.device),
                torch_peak_reserved=torch.cuda.max_memory_reserved(self.device),
            )
        else:
            torch_figures = dict(torch_unavailable_reason="CPU device: torch's CUDA allocator is not in use")
        nvml_figures: dict[str, Any] = dict(nvml_unavailable_reason=self.nvml_unavailable_reason)
        if self._nvml is not None:
            try:
                info = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
                utilization = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
                nvml_figures = dict(
                    nvml_used=int(info.used), nvml_total=int(info.total), gpu_utilization_percent=float(utilization.gpu)
                )
            except Exception as error:
                nvml_figures = dict(nvml_unavailable_reason=f"NVML read failed: {error}")
        rss, rss_reason = process_resident_bytes()
        return MemorySnapshot(**torch_figures, **nvml_figures, process_rss=rss, process_rss_unavailable_reason=rss_reason)

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None

    def __enter__(self) -> MemoryProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def process_resident_bytes() -> tuple[Optional[int], Optional[str]]:
    """This process's resident set size in bytes, or None and why: one small read of /proc/self/statm
    (Linux), cheap enough for every log point and needing no extra dependency."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            resident_pages = int(statm.read().split()[1])
    except FileNotFoundError:
        return None, "resident memory is read from /proc/self/statm, which this system does not have"
    except (OSError, ValueError, IndexError) as error:
        return None, f"cannot read /proc/self/statm: {error}"
    return resident_pages * mmap.PAGESIZE, None


def _nvml_handle(pynvml: Any, device: torch.device) -> Any:
    """NVML numbers GPUs differently from CUDA under CUDA_VISIBLE_DEVICES: match by UUID when possible."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    if uuid is not None:
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
        except Exception:
            pass
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def release_cached_memory() -> MemoryRelease:
    """Free the CUDA caching allocator's unused blocks (gc first so dead tensors are unused)."""
    if not torch.cuda.is_available():
        return MemoryRelease(None, None, "CPU mode: there is no CUDA cache to release")
    before = torch.cuda.memory_reserved()
    gc.collect()
    torch.cuda.empty_cache()
    after = torch.cuda.memory_reserved()
    return MemoryRelease(before, after, f"reserved {format_bytes(before)} → {format_bytes(after)}")
