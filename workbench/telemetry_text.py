"""NVML's telemetry in words, for the device panel's live line and the CLI's summary (no Qt).

NVML's "utilisation" is never called that here: it is the share of time any kernel ran, however few
of the GPU's SMs the kernel used, so it reads 100 % on a GPU that is mostly idle inside. GPM's SM
activity (Hopper and newer) says how much of the GPU was at work.
"""

from __future__ import annotations

from typing import Optional

from workbench.engine.events import DeviceTelemetry, StepStats
from workbench.engine.run_summary import RunSummary
from workbench.engine.telemetry import PCIE_SKIPPED
from workbench.formatting import format_bytes

NVML_UTILISATION_LABEL = "share of time any kernel ran (NVML)"


def _parts(kernel_time: Optional[float], sm: Optional[float], occupancy: Optional[float], tensor: Optional[float],
           dram: Optional[float], gpm_reason: Optional[str], power: Optional[float], clock: Optional[float],
           clock_events: Optional[str], rx: Optional[float], tx: Optional[float]) -> list[str]:
    parts = []
    if kernel_time is not None:
        parts.append(f"{NVML_UTILISATION_LABEL} {kernel_time:.0%}")
    gpm = [f"{name} {value:.0%}" for name, value in (("SM activity", sm), ("occupancy", occupancy),
                                                    ("tensor activity", tensor), ("DRAM bandwidth", dram))
           if value is not None]
    if gpm:
        parts.append(", ".join(gpm) + " (GPM)")
    elif gpm_reason:
        parts.append(f"no GPM: {gpm_reason}")
    if power is not None:
        parts.append(f"{power:,.0f} W")
    if clock is not None:
        parts.append(f"SM clock {clock:,.0f} MHz")
    if clock_events and clock_events != "none":
        parts.append(f"clocks held by {clock_events}")
    if rx is not None and tx is not None:
        parts.append(f"PCIe rx {format_bytes(rx)}/s, tx {format_bytes(tx)}/s")
    return parts


def live_line(stats: StepStats) -> Optional[str]:
    """The device panel's line for the latest log window (None where NVML read nothing: a CPU run)."""
    t = stats.telemetry
    utilization = stats.memory.gpu_utilization_percent
    events = ", ".join(t.clock_event_reasons) if t.clock_event_reasons else None
    parts = _parts(utilization / 100.0 if utilization is not None else None, t.sm_activity, t.sm_occupancy,
                   t.tensor_activity, t.dram_bandwidth, t.gpm_unavailable_reason, t.power_watts, t.sm_clock_mhz,
                   events, t.pcie_rx_bytes_per_sec, t.pcie_tx_bytes_per_sec)
    if utilization is None and t.power_watts is None and t.sm_clock_mhz is None and t.sm_activity is None:
        return None
    text = "Now: " + " · ".join(parts)
    reasons = _live_reasons(t)
    return text + f"; not read: {reasons}" if reasons else text


def _live_reasons(t: DeviceTelemetry) -> Optional[str]:
    """Why a figure of the window is None (GPM's reason is in the line already; PCIe between its reads is not
    missing, only not read this often)."""
    reasons = [reason for value, reason in ((t.power_watts, t.power_unavailable_reason),
                                            (t.sm_clock_mhz, t.sm_clock_unavailable_reason),
                                            (t.clock_event_reasons, t.clock_events_unavailable_reason),
                                            (t.pcie_rx_bytes_per_sec, t.pcie_unavailable_reason))
               if value is None and reason and reason != PCIE_SKIPPED]
    return "; ".join(dict.fromkeys(reasons)) or None


def summary_text(summary: RunSummary) -> Optional[str]:
    """The run's telemetry (medians over its steady windows) in one line; None where there is none to show."""
    parts = _parts(summary.nvml_kernel_time_fraction, summary.sm_activity_fraction, summary.sm_occupancy_fraction,
                   summary.tensor_activity_fraction, summary.dram_bandwidth_fraction, summary.gpm_unavailable_reason,
                   summary.power_watts, summary.sm_clock_mhz, summary.clock_event_reasons,
                   summary.pcie_rx_bytes_per_sec, summary.pcie_tx_bytes_per_sec)
    measured = [summary.nvml_kernel_time_fraction, summary.power_watts, summary.sm_clock_mhz,
                summary.sm_activity_fraction]
    if all(value is None for value in measured):
        return None
    text = " · ".join(parts) + " (medians of the steady windows)"
    if summary.telemetry_unavailable_reason:
        text += f"; not read: {summary.telemetry_unavailable_reason}"
    return text
