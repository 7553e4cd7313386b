"""NVML's telemetry where people see it: the device panel's live line and the CLI summary's row."""

from __future__ import annotations

from workbench.cli.timeline_report import summary_rows
from workbench.engine.events import DeviceTelemetry, MemorySnapshot, StepStats
from workbench.engine.run_summary import RunSummary
from workbench.engine.telemetry import PCIE_SKIPPED
from workbench.telemetry_text import NVML_UTILISATION_LABEL, live_line, summary_text

H100_WINDOW = StepStats(
    step=40, total_steps=100, epoch=1, epochs=1, samples_seen=40 * 512, loss=1.0, lr=0.1, images_per_sec=50_000.0,
    data_wait_seconds=0.0, device_span_seconds=0.1, window_seconds=0.1, elapsed_seconds=4.0,
    memory=MemorySnapshot(gpu_utilization_percent=100.0),
    telemetry=DeviceTelemetry(power_watts=512.0, sm_clock_mhz=1980.0, clock_event_reasons=("software power cap",),
                              pcie_rx_bytes_per_sec=2 * 2**20, pcie_tx_bytes_per_sec=2**10, sm_activity=0.41,
                              sm_occupancy=0.22, tensor_activity=0.09, dram_bandwidth=0.3),
)


def test_the_live_line_calls_nvml_utilisation_what_it_is_and_puts_sm_activity_beside_it():
    assert live_line(H100_WINDOW) == (
        "Now: share of time any kernel ran (NVML) 100% · SM activity 41%, occupancy 22%, tensor activity 9%, "
        "DRAM bandwidth 30% (GPM) · 512 W · SM clock 1,980 MHz · clocks held by software power cap · "
        "PCIe rx 2.0 MiB/s, tx 1.0 KiB/s")


def test_a_figure_the_gpu_does_not_read_says_why_and_a_cpu_run_has_no_line():
    import dataclasses

    no_gpm = dataclasses.replace(H100_WINDOW, telemetry=DeviceTelemetry(
        power_watts=70.0, gpm_unavailable_reason="GPM is not supported on this GPU (it needs Hopper or newer)"))
    assert live_line(no_gpm) == (f"Now: {NVML_UTILISATION_LABEL} 100% · no GPM: GPM is not supported on this GPU "
                                 "(it needs Hopper or newer) · 70 W")
    unsupported = dataclasses.replace(H100_WINDOW, telemetry=DeviceTelemetry(
        sm_clock_mhz=1410.0, power_unavailable_reason="NVML cannot read the power here: Not Supported",
        pcie_unavailable_reason=PCIE_SKIPPED, gpm_unavailable_reason="GPM is not supported on this GPU"))
    assert live_line(unsupported) == (f"Now: {NVML_UTILISATION_LABEL} 100% · no GPM: GPM is not supported on this GPU "
                                      "· SM clock 1,410 MHz; not read: NVML cannot read the power here: Not Supported")
    cpu = dataclasses.replace(H100_WINDOW, memory=MemorySnapshot(), telemetry=DeviceTelemetry(
        power_unavailable_reason="CPU device: no GPU telemetry", gpm_unavailable_reason="CPU device: no GPU telemetry"))
    assert live_line(cpu) is None


def test_the_device_panel_shows_the_line_during_a_run(make_window):
    window = make_window()
    assert not window.device_panel.live.isVisibleTo(window)
    window.draw_steps([H100_WINDOW])
    assert window.device_panel.live.isVisibleTo(window)
    assert window.device_panel.live.text().startswith("Now: share of time any kernel ran (NVML) 100%")


def test_the_cli_summary_has_a_telemetry_row_of_medians():
    summary = RunSummary(status="finished", nvml_kernel_time_fraction=0.99, power_watts=350.0, sm_clock_mhz=1755.0,
                         clock_event_reasons="none", sm_activity_fraction=0.45, tensor_activity_fraction=0.12,
                         pcie_rx_bytes_per_sec=0.0, pcie_tx_bytes_per_sec=0.0)
    assert dict(summary_rows(summary, None))["GPU telemetry"] == (
        "share of time any kernel ran (NVML) 99% · SM activity 45%, tensor activity 12% (GPM) · 350 W · "
        "SM clock 1,755 MHz · PCIe rx 0 B/s, tx 0 B/s (medians of the steady windows)")
    assert summary_text(RunSummary(status="finished", telemetry_unavailable_reason="CPU device")) is None
    assert "GPU telemetry" not in dict(summary_rows(RunSummary(status="finished"), None))
