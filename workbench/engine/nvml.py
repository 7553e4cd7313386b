"""The one door to NVML (nvidia-ml-py's ``pynvml``): the only module that imports it.

``NvmlHold`` is a hold on the library: NVML is initialised on the first hold in the process and shut
down when the last is let go (the memory probe, the telemetry and the driver-version look-up share
it). ``Gpu`` reads one device; every read returns a ``Reading``: a value, or None and the reason,
and never raises (a missing library, a GPU or driver that does not support the figure, a lost GPU).
No torch here: the caller says which GPU (CUDA's index and UUID; memory.py works them out).

GPM (GPU Performance Monitoring, Hopper and newer, nvidia-ml-py 12.535+) measures over an interval:
``gpm_sample()`` at its start and at its end, then ``gpm_metrics(start, end)``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Generic, Optional, TypeVar

T = TypeVar("T")

NOT_INSTALLED = "nvidia-ml-py (pynvml) is not installed"

# The GPM metrics read, by the names the figures use. All four are percentages over the interval:
# SM activity (the share of time and SMs with a warp resident, DCGM's SM_ACTIVE), SM occupancy (resident
# warps over the maximum), any tensor-core pipe active, DRAM bandwidth used over the peak.
GPM_METRICS = (
    ("sm_activity", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor_activity", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram_bandwidth", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)

# Why the clocks are below their maximum (nvmlDeviceGetCurrentClocksEventReasons' bits), in words.
CLOCK_EVENT_REASONS = (
    (0x1, "idle"),
    (0x2, "application clocks setting"),
    (0x4, "software power cap"),
    (0x8, "hardware slowdown"),
    (0x10, "sync boost"),
    (0x20, "software thermal slowdown"),
    (0x40, "hardware thermal slowdown"),
    (0x80, "hardware power brake"),
    (0x100, "display clock setting"),
)


# A MIG instance is a slice of a GPU, but NVML's utilisation, power, clocks, PCIe and GPM (nvmlGpmSampleGet) for it
# are the whole card's: the other instances' work would be attributed to this run.
MIG_DEVICE_WIDE = ("MIG: device-wide figures not read (this run has one MIG instance of the GPU; NVML's utilisation, "
                   "power, clocks, PCIe and GPM are the whole card's)")


class MigUnresolved(Exception):
    """The run's GPU is a MIG instance NVML could not find: the GPU at CUDA's index is the whole card."""


@dataclass(frozen=True)
class Reading(Generic[T]):
    """One figure: its value, or None and why."""

    value: Optional[T] = None
    reason: Optional[str] = None


def clock_event_names(mask: int) -> tuple[str, ...]:
    """The reasons a clock-events bit mask holds, by name (an unknown bit by its number)."""
    names = [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]
    known = sum(bit for bit, _ in CLOCK_EVENT_REASONS)
    if mask & ~known:
        names.append(f"other (0x{mask & ~known:x})")
    return tuple(names)


# -- the library -----------------------------------------------------------------------------------

_lock = threading.Lock()
_holds: dict[int, int] = {}  # id(pynvml module) → holds: tests swap in a fake module, each counts apart


class NvmlHold:
    """NVML initialised while held (``module``), or ``reason`` why it is not. ``close()`` lets go."""

    def __init__(self) -> None:
        self.module: Any = None
        self.reason: Optional[str] = None
        try:
            import pynvml
        except ImportError:
            self.reason = NOT_INSTALLED
            return
        with _lock:
            key = id(pynvml)
            if not _holds.get(key):
                try:
                    pynvml.nvmlInit()
                except Exception as error:  # NVMLError and friends: no driver library, no permission
                    self.reason = f"NVML unavailable: {error}"
                    return
            _holds[key] = _holds.get(key, 0) + 1
        self.module = pynvml

    def close(self) -> None:
        module, self.module = self.module, None
        if module is None:
            return
        with _lock:
            key = id(module)
            _holds[key] -= 1
            if _holds[key] == 0:
                del _holds[key]
                try:
                    module.nvmlShutdown()
                except Exception:  # shutting down is best effort: the process may be ending
                    pass

    def __enter__(self) -> NvmlHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def driver_version() -> Reading[str]:
    with NvmlHold() as nvml:
        if nvml.module is None:
            return Reading(reason=nvml.reason)
        return _read("NVML cannot read the driver version", lambda: _text(nvml.module.nvmlSystemGetDriverVersion()))


# -- one GPU ---------------------------------------------------------------------------------------


class Gpu:
    """One GPU through NVML. ``reason`` is set (and every read answers with it) when it cannot be read."""

    def __init__(self, which: Callable[[], tuple[int, Optional[str]]]):
        """``which()`` gives CUDA's index of the GPU and its UUID; it is called once NVML is up."""
        self._hold = NvmlHold()
        self.nvml: Any = self._hold.module
        self.handle: Any = None
        self.reason: Optional[str] = self._hold.reason
        self.mig = False  # a MIG instance: its memory and processes are read, the device-wide figures are not
        if self.nvml is None:
            return
        try:
            self.handle = self._find(*which())
        except MigUnresolved as error:
            self.reason = str(error)
            self.close()
        except Exception as error:
            self.reason = f"NVML unavailable: {error}"
            self.close()

    def _find(self, index: int, uuid: Optional[str]) -> Any:
        """NVML numbers GPUs differently from CUDA under CUDA_VISIBLE_DEVICES: by UUID where it is known. CUDA's
        UUID of a MIG instance is NVML's with "MIG-" before it, not "GPU-"."""
        if uuid is not None:
            spellings = [uuid] + (["MIG-" + uuid[len("GPU-"):]] if uuid.startswith("GPU-") else [])
            for spelling in spellings:
                try:
                    handle = self.nvml.nvmlDeviceGetHandleByUUID(spelling)
                except Exception:
                    continue
                self.mig = spelling.startswith("MIG-") or self._is_mig_instance(handle)
                return handle
        handle = self.nvml.nvmlDeviceGetHandleByIndex(index)
        if self._mig_enabled(handle):  # CUDA sees one of its instances, but which one NVML cannot tell
            raise MigUnresolved(f"MIG: device-wide figures not read (NVML found no GPU or MIG instance with this "
                                f"run's UUID, and the GPU at index {index} is a whole card split into MIG instances)")
        return handle

    def _is_mig_instance(self, handle: Any) -> bool:
        try:
            return bool(self.nvml.nvmlDeviceIsMigDeviceHandle(handle))
        except Exception:  # an nvidia-ml-py or driver without MIG
            return False

    def _mig_enabled(self, handle: Any) -> bool:
        try:
            current, _pending = self.nvml.nvmlDeviceGetMigMode(handle)
        except Exception:  # not supported: no MIG on this GPU
            return False
        return bool(current)

    @property
    def readable(self) -> bool:
        return self.handle is not None

    def close(self) -> None:
        self.handle = None
        self.nvml = None
        self._hold.close()

    # -- reads ---------------------------------------------------------------------------------
    def memory(self) -> Reading[tuple[int, int]]:
        """(used, total) bytes, device-wide."""
        return self._call("NVML read failed", lambda: _used_total(self.nvml.nvmlDeviceGetMemoryInfo(self.handle)))

    def utilization_percent(self) -> Reading[float]:
        """NVML's "GPU utilisation": the share of its last sample period in which *any* kernel ran (one
        busy SM of 132 reads 100 %), not how busy the GPU was."""
        return self._device_wide("NVML read failed", lambda: float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu))

    def compute_processes(self) -> Reading[list]:
        return self._call("NVML cannot list the GPU's processes", lambda: list(self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)))

    def power_watts(self) -> Reading[float]:
        return self._device_wide("NVML cannot read the power here", lambda: self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0)  # mW

    def sm_clock_mhz(self) -> Reading[float]:
        return self._device_wide("NVML cannot read the SM clock here", lambda: float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM)))

    def clock_event_reasons(self) -> Reading[tuple[str, ...]]:
        """Why the clocks are held below their maximum now (empty: they are not)."""
        def read() -> tuple[str, ...]:
            get = getattr(self.nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                self.nvml.nvmlDeviceGetCurrentClocksThrottleReasons  # the name before driver 535
            return clock_event_names(int(get(self.handle)))
        return self._device_wide("NVML cannot read the clock events here", read)

    def pcie_bytes_per_second(self, direction: str) -> Reading[float]:
        """PCIe traffic over NVML's last 20 ms sample, ``direction`` "rx" or "tx" (NVML counts KB/s)."""
        def read() -> float:
            counter = self.nvml.NVML_PCIE_UTIL_RX_BYTES if direction == "rx" else self.nvml.NVML_PCIE_UTIL_TX_BYTES
            return self.nvml.nvmlDeviceGetPcieThroughput(self.handle, counter) * 1024.0
        return self._device_wide(f"NVML cannot read PCIe {direction} here", read)

    # -- GPM -----------------------------------------------------------------------------------
    def gpm_support(self) -> Reading[bool]:
        """True where GPM can be read; else None and why (no GPM in this nvidia-ml-py, not Hopper+, ...)."""
        if not self.readable:
            return Reading(reason=self.reason)
        if self.mig:  # (nvmlGpmMigSampleGet would read one instance: not done here)
            return Reading(reason=MIG_DEVICE_WIDE)
        if not hasattr(self.nvml, "nvmlGpmQueryDeviceSupport"):
            return Reading(reason="GPM needs nvidia-ml-py 12.535 or newer")
        support = self._call("NVML cannot query GPM here", lambda: bool(self.nvml.nvmlGpmQueryDeviceSupport(self.handle).isSupportedDevice))
        if support.value is False:
            return Reading(reason="GPM is not supported on this GPU (it needs Hopper or newer)")
        return support

    def gpm_sample(self) -> Reading[Any]:
        """A GPM sample taken now (free it with ``gpm_free``)."""
        def take() -> Any:
            sample = self.nvml.nvmlGpmSampleAlloc()
            try:
                return self.nvml.nvmlGpmSampleGet(self.handle, sample)
            except Exception:
                self.nvml.nvmlGpmSampleFree(sample)
                raise
        return self._call("NVML cannot take a GPM sample here", take)

    def gpm_free(self, sample: Any) -> None:
        if sample is not None and self.nvml is not None:
            try:
                self.nvml.nvmlGpmSampleFree(sample)
            except Exception:
                pass

    def gpm_metrics(self, start: Any, end: Any) -> dict[str, Reading[float]]:
        """GPM_METRICS between two samples, as fractions (0-1) by name."""
        nvml = self.nvml
        try:
            request = nvml.c_nvmlGpmMetricsGet_t()
            request.version = nvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRICS)
            request.sample1, request.sample2 = start, end
            for slot, (_, constant) in enumerate(GPM_METRICS):
                request.metrics[slot].metricId = getattr(nvml, constant)
            nvml.nvmlGpmMetricsGet(request)
        except Exception as error:
            reason = f"GPM metrics unreadable: {error}"
            return {name: Reading(reason=reason) for name, _ in GPM_METRICS}
        readings: dict[str, Reading[float]] = {}
        for slot, (name, _) in enumerate(GPM_METRICS):
            metric = request.metrics[slot]
            code = int(metric.nvmlReturn)
            if code != getattr(nvml, "NVML_SUCCESS", 0):
                readings[name] = Reading(reason=f"GPM {name.replace('_', ' ')} unreadable: {_error_text(nvml, code)}")
            else:
                readings[name] = Reading(value=float(metric.value) / 100.0)
        return readings

    def _call(self, failure: str, read: Any) -> Reading:
        if not self.readable:
            return Reading(reason=self.reason)
        return _read(failure, read)

    def _device_wide(self, failure: str, read: Any) -> Reading:
        """A figure of the whole card: not read for a MIG instance."""
        if self.readable and self.mig:
            return Reading(reason=MIG_DEVICE_WIDE)
        return self._call(failure, read)


def _read(failure: str, read: Any) -> Reading:
    """``read()``'s value, or None and "``failure``: NVML's error" ("Not Supported", "Insufficient Permissions")."""
    try:
        return Reading(value=read())
    except Exception as error:  # NVMLError_NotSupported, NoPermission, GpuIsLost, ...
        return Reading(reason=f"{failure}: {error}")


def _used_total(info: Any) -> tuple[int, int]:
    return int(info.used), int(info.total)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _error_text(nvml: Any, code: int) -> str:
    try:
        return _text(nvml.nvmlErrorString(code))
    except Exception:
        return f"NVML error {code}"
