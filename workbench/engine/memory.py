"""The memory figures: torch allocated, torch reserved, NVML used/total (device-wide), this process's own
NVML usage and RSS; each run's peaks made its own; the cache returned after a failure."""

from __future__ import annotations

import mmap
import os
from typing import Any, Optional

import torch

from workbench.engine.events import MemoryRelease, MemorySnapshot
from workbench.engine.garbage import collect_garbage
from workbench.engine.nvml import Gpu
from workbench.formatting import format_bytes


class MemoryProbe:
    """Reads memory for one device; holds its NVML GPU (engine/nvml.py) for the run's lifetime.

    Every read is cheap and never raises: what cannot be read is None with a reason.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self.gpu: Optional[Gpu] = None
        self.nvml_unavailable_reason: Optional[str] = None
        if device.type != "cuda":
            self.nvml_unavailable_reason = "CPU device: no GPU memory to read"
            return
        gpu = Gpu(lambda: _cuda_identity(device))
        if gpu.readable:
            self.gpu = gpu
        else:
            self.nvml_unavailable_reason = gpu.reason

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
        nvml_figures: dict[str, Any] = dict(
            nvml_unavailable_reason=self.nvml_unavailable_reason,
            gpu_utilization_unavailable_reason=self.nvml_unavailable_reason,
            nvml_process_unavailable_reason=self.nvml_unavailable_reason,
        )
        gpu = self.gpu
        if gpu is not None:
            # Read apart: a GPU that reports its memory but not its utilisation (a MIG instance, for one)
            # keeps the memory.
            memory, utilization = gpu.memory(), gpu.utilization_percent()
            used, total = memory.value if memory.value is not None else (None, None)
            nvml_figures = dict(nvml_device_used=used, nvml_total=total, nvml_unavailable_reason=memory.reason,
                                gpu_utilization_percent=utilization.value,
                                gpu_utilization_unavailable_reason=utilization.reason)
            process_used, reason = self._process_used(gpu)
            nvml_figures.update(nvml_process_used=process_used, nvml_process_unavailable_reason=reason)
        rss, rss_reason = process_resident_bytes()
        return MemorySnapshot(**torch_figures, **nvml_figures, process_rss=rss, process_rss_unavailable_reason=rss_reason)

    def _process_used(self, gpu: Gpu) -> tuple[Optional[int], Optional[str]]:
        """This process's memory on ``gpu`` (this probe's), from NVML's list of compute processes."""
        pid = os.getpid()
        processes = gpu.compute_processes()  # NVML_ERROR_NOT_SUPPORTED on some drivers and vGPUs
        if processes.value is None:
            return None, processes.reason
        ours = [process for process in processes.value if process.pid == pid]
        if not ours:
            return None, (f"NVML does not list this process (pid {pid}) on the GPU: in a container the driver "
                          "sees host pids, not the container's")
        if any(process.usedGpuMemory is None for process in ours):
            return None, "the driver does not report per-process memory on this system (e.g. Windows WDDM)"
        return sum(int(process.usedGpuMemory) for process in ours), None

    def close(self) -> None:
        if self.gpu is not None:
            self.gpu.close()
            self.gpu = None

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


def _cuda_identity(device: torch.device) -> tuple[int, Optional[str]]:
    """CUDA's index of the device and its UUID as NVML spells it (NVML's own numbering differs under
    CUDA_VISIBLE_DEVICES; the UUID finds the same GPU). A MIG instance's NVML spells "MIG-…": nvml.Gpu tries both."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return index, (f"GPU-{uuid}" if uuid is not None else None)


def reset_peaks_for_a_new_run(device: torch.device) -> None:
    """Make the run's peak counters its own.

    reset_peak_memory_stats() resets each peak to the *current* value, and "reserved" still holds the
    blocks an earlier run left in the cache: free them first, or every later run's reserved peak
    starts at the largest earlier run's.
    """
    if device.type != "cuda":
        return
    collect_garbage()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)


def free_device_memory() -> None:
    """After a failed run is dropped: collect its cycles and give its cached blocks back to the driver."""
    collect_garbage()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        _clear_cublas_workspaces()
        torch.cuda.empty_cache()


def _clear_cublas_workspaces() -> None:
    """cuBLAS keeps a workspace per handle and stream (32 MiB each on Hopper) in torch's allocator, counted
    as allocated: a run's helper threads (worker start-up, compilation) each leave one behind. They are a
    cache like any other; torch rebuilds them on the next matmul."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()


def release_cached_memory() -> MemoryRelease:
    """Free the CUDA caching allocator's unused blocks (gc first so dead tensors are unused)."""
    if not torch.cuda.is_available():
        return MemoryRelease(reserved_before=None, reserved_after=None, message="CPU mode: there is no CUDA cache to release")
    before = torch.cuda.memory_reserved()
    collect_garbage()
    _clear_cublas_workspaces()
    torch.cuda.empty_cache()
    after = torch.cuda.memory_reserved()
    return MemoryRelease(reserved_before=before, reserved_after=after, message=f"reserved {format_bytes(before)} → {format_bytes(after)}")
