"""NVML's telemetry over a run's log windows (beside the memory probe), and the run's figures from it.

At each log point, before the window's sync while the GPU still works through the queued steps (after it
no copy is in flight and the clocks read "idle"): power, the SM clock, why the clocks are held down
("clocks event reasons": a power cap, a thermal slowdown, ...) and PCIe traffic, as NVML reads them at that
moment; and on Hopper and newer, GPM's SM activity, SM occupancy, tensor activity and DRAM bandwidth over
an interval of at least GPM_MIN_SECONDS (a GPM sample when a window starts, one at the first log point that
much later: a fast run's windows share one interval). NVML's own "utilisation" (on the memory snapshot) is
the share of time *any* kernel ran; GPM's SM activity is how much of the GPU worked.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Optional

from workbench.engine.events import DeviceTelemetry, StepStats
from workbench.engine.nvml import GPM_METRICS, Gpu, Reading
from workbench.engine.spread import median_of_known

CPU_REASON = "CPU device: no GPU telemetry"
CLOSED_REASON = "the GPU's NVML handle was closed"
# NVML measures PCIe traffic by counting bytes over 20 ms inside the call: at every log point of a fast run
# (a window of 10 steps of 3 ms) that would cost two thirds of a window. At most this often, then.
PCIE_EVERY_SECONDS = 5.0
PCIE_SKIPPED = f"read at most every {PCIE_EVERY_SECONDS:.0f} s (NVML takes 20 ms to sample PCIe traffic)"
# NVML: two nvmlGpmSampleGet calls must be more than 100 ms apart, or the metrics read 0 or N/A. A launch-bound
# run's window (10 steps of 2 ms) is 20 ms: its start sample is kept until this much has passed.
GPM_MIN_SECONDS = 1.0


def gpm_too_soon(elapsed_seconds: float) -> str:
    return (f"GPM measures over at least {GPM_MIN_SECONDS:.0f} s (NVML's samples must be more than 100 ms apart): "
            f"{elapsed_seconds * 1000:.0f} ms had passed; a later window reads it over this one too")


class TelemetryProbe:
    """Reads one GPU's telemetry (``gpu`` None: every figure None with ``reason``). Never raises."""

    def __init__(self, gpu: Optional[Gpu], reason: Optional[str] = None, clock: Callable[[], float] = time.monotonic):
        self.gpu = gpu
        self.clock = clock
        self._pcie_read_at: Optional[float] = None
        self.reason = reason or (gpu.reason if gpu is not None else CPU_REASON)
        self._window_start: Any = None  # GPM's sample at the start of the interval being measured
        self._window_start_at = 0.0  # when it was taken (``clock``)
        self.gpm_reason: Optional[str] = self.reason
        if gpu is not None and gpu.readable:
            self.gpm_reason = gpu.gpm_support().reason

    def window_started(self) -> None:
        """A log window begins: GPM's first sample of it, unless an interval too short to read goes on."""
        gpu = self.gpu
        if self.gpm_reason is not None or gpu is None:  # (a None gpu always has a reason)
            return
        if self._window_start is not None:  # under GPM_MIN_SECONDS old, or the last reading's end sample
            return
        sample = gpu.gpm_sample()
        self._window_start, self._window_start_at = sample.value, self.clock()
        if sample.value is None:
            self.gpm_reason = sample.reason  # it will not get better within the run

    def read(self) -> DeviceTelemetry:
        """At a log point: the figures now, and GPM's over the window since ``window_started``."""
        gpu = self.gpu
        if gpu is None:
            return _unreadable(self.reason or CPU_REASON)
        if not gpu.readable:  # unreadable from the start (its reason), or closed since
            return _unreadable(self.reason or gpu.reason or CLOSED_REASON)
        power, clock, events = gpu.power_watts(), gpu.sm_clock_mhz(), gpu.clock_event_reasons()
        rx, tx = self._pcie(gpu)
        figures: dict[str, Any] = dict(
            power_watts=power.value, power_unavailable_reason=power.reason,
            sm_clock_mhz=clock.value, sm_clock_unavailable_reason=clock.reason,
            clock_event_reasons=events.value, clock_events_unavailable_reason=events.reason,
            pcie_rx_bytes_per_sec=rx.value, pcie_tx_bytes_per_sec=tx.value, pcie_unavailable_reason=rx.reason or tx.reason,
        )
        figures.update(self._gpm(gpu))
        return DeviceTelemetry(**figures)

    def _pcie(self, gpu: Gpu) -> tuple[Reading[float], Reading[float]]:
        now = self.clock()
        if self._pcie_read_at is not None and now - self._pcie_read_at < PCIE_EVERY_SECONDS:
            return Reading(reason=PCIE_SKIPPED), Reading(reason=PCIE_SKIPPED)
        self._pcie_read_at = now
        return gpu.pcie_bytes_per_second("rx"), gpu.pcie_bytes_per_second("tx")

    def _gpm(self, gpu: Gpu) -> dict[str, Any]:
        if self.gpm_reason is not None:
            return {"gpm_unavailable_reason": self.gpm_reason}
        if self._window_start is None:
            return {"gpm_unavailable_reason": "GPM had no sample at the window's start"}
        elapsed = self.clock() - self._window_start_at
        if elapsed < GPM_MIN_SECONDS:
            return {"gpm_unavailable_reason": gpm_too_soon(elapsed)}  # the start sample is kept
        end = gpu.gpm_sample()
        if end.value is None:
            return {"gpm_unavailable_reason": end.reason}
        readings = gpu.gpm_metrics(self._window_start, end.value)
        self._free_start()
        self._window_start, self._window_start_at = end.value, self.clock()  # the next interval starts here
        reasons = [reading.reason for reading in readings.values() if reading.reason]
        figures: dict[str, Any] = {name: readings[name].value for name, _ in GPM_METRICS}
        figures["gpm_unavailable_reason"] = "; ".join(dict.fromkeys(reasons)) or None
        return figures

    def _free_start(self) -> None:
        if self._window_start is not None and self.gpu is not None:
            self.gpu.gpm_free(self._window_start)
        self._window_start = None

    def close(self) -> None:
        self._free_start()


def _unreadable(reason: str) -> DeviceTelemetry:
    return DeviceTelemetry(
        power_unavailable_reason=reason, sm_clock_unavailable_reason=reason, clock_events_unavailable_reason=reason,
        pcie_unavailable_reason=reason, gpm_unavailable_reason=reason,
    )


# -- the run's figures -----------------------------------------------------------------------------

# RunSummary figure ← DeviceTelemetry field: the median over the steady windows.
_MEDIANS = (
    ("power_watts", "power_watts"),
    ("sm_clock_mhz", "sm_clock_mhz"),
    ("pcie_rx_bytes_per_sec", "pcie_rx_bytes_per_sec"),
    ("pcie_tx_bytes_per_sec", "pcie_tx_bytes_per_sec"),
    ("sm_activity_fraction", "sm_activity"),
    ("sm_occupancy_fraction", "sm_occupancy"),
    ("tensor_activity_fraction", "tensor_activity"),
    ("dram_bandwidth_fraction", "dram_bandwidth"),
)
# The reason beside each RunSummary figure read by NVML (said where no window read the figure).
_NVML_REASONS = (("power_watts", "power_unavailable_reason"), ("sm_clock_mhz", "sm_clock_unavailable_reason"),
                 ("clock_event_reasons", "clock_events_unavailable_reason"),
                 ("pcie_rx_bytes_per_sec", "pcie_unavailable_reason"))


def run_figures(windows: Iterable[StepStats]) -> dict[str, Any]:
    """RunSummary's telemetry figures over ``windows`` (the run's steady windows): each the median of the
    windows that read it; where none did, None and the reasons (the last window's)."""
    windows = list(windows)
    figures: dict[str, Any] = {}
    for name, source in _MEDIANS:
        figures[name] = median_of_known(getattr(w.telemetry, source) for w in windows)
    utilization = median_of_known(w.memory.gpu_utilization_percent for w in windows)
    figures["nvml_kernel_time_fraction"] = utilization / 100.0 if utilization is not None else None
    seen = [w.telemetry.clock_event_reasons for w in windows if w.telemetry.clock_event_reasons is not None]
    if seen:
        names = list(dict.fromkeys(name for reasons in seen for name in reasons))
        figures["clock_event_reasons"] = ", ".join(names) if names else "none"
    if windows:
        last = windows[-1].telemetry
        reasons = [getattr(last, reason) for figure, reason in _NVML_REASONS
                   if figures.get(figure) is None and getattr(last, reason)]
        figures["telemetry_unavailable_reason"] = "; ".join(dict.fromkeys(reasons)) or None
        if figures["sm_activity_fraction"] is None:
            figures["gpm_unavailable_reason"] = last.gpm_unavailable_reason
    return figures
