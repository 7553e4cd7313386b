"""NVML's telemetry through a fake NVML: the figures where they are supported, None with the reason where
they are not (a figure the GPU does not support, a GPU without GPM, an nvidia-ml-py without GPM, a CPU)."""

from __future__ import annotations

import sys

import pytest
from engine_helpers import run_to_end, tiny_config
from fake_nvml import fake_pynvml

from workbench.engine import nvml
from workbench.engine.events import DeviceTelemetry, MemorySnapshot, StepStats
from workbench.engine.nvml import Gpu, NvmlHold, clock_event_names
from workbench.engine.telemetry import TelemetryProbe, run_figures


class FakeClock:
    """Seconds that pass only when a test says so (and 1.5 s at every read: GPM's interval is long enough)."""

    def __init__(self, step: float = 1.5):
        self.now, self.step = 100.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def probe(monkeypatch, fake, clock=None) -> TelemetryProbe:
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return TelemetryProbe(Gpu(lambda: (0, "GPU-1234")), clock=clock or FakeClock())


def test_every_figure_where_the_gpu_supports_it(monkeypatch):
    fake = fake_pynvml()
    telemetry = probe(monkeypatch, fake)
    telemetry.window_started()
    reading = telemetry.read()
    assert reading.power_watts == 312.5 and reading.sm_clock_mhz == 1980.0  # NVML gives mW
    assert reading.clock_event_reasons == ("software power cap",)
    assert reading.pcie_rx_bytes_per_sec == 1000 * 1024 and reading.pcie_tx_bytes_per_sec == 250 * 1024  # KB/s
    # GPM over the window: a sample at its start, one at its end (the fake refuses them the wrong way round).
    assert (reading.sm_activity, reading.sm_occupancy, reading.tensor_activity, reading.dram_bandwidth) == (
        pytest.approx(0.41), pytest.approx(0.22), pytest.approx(0.09), pytest.approx(0.30))
    assert reading.power_unavailable_reason is None and reading.gpm_unavailable_reason is None
    telemetry.window_started()
    telemetry.close()
    assert fake.gpm_samples_alive == set()  # every GPM sample freed


def test_figures_the_gpu_does_not_support_are_none_with_the_reason(monkeypatch):
    fake = fake_pynvml(unsupported=("nvmlDeviceGetPowerUsage", "nvmlDeviceGetPcieThroughput"), gpm=False)
    telemetry = probe(monkeypatch, fake)
    telemetry.window_started()
    reading = telemetry.read()
    assert reading.power_watts is None
    assert reading.power_unavailable_reason == "NVML cannot read the power here: Not Supported"
    assert reading.pcie_rx_bytes_per_sec is None and reading.pcie_tx_bytes_per_sec is None
    assert reading.pcie_unavailable_reason == "NVML cannot read PCIe rx here: Not Supported"
    assert reading.sm_clock_mhz == 1980.0  # what is supported is still read
    assert reading.sm_activity is None and reading.tensor_activity is None
    assert reading.gpm_unavailable_reason == "GPM is not supported on this GPU (it needs Hopper or newer)"


def test_pcie_is_read_at_most_every_few_seconds(monkeypatch):
    """NVML counts PCIe bytes for 20 ms inside the call: not at every log point of a fast run."""
    from workbench.engine.telemetry import PCIE_EVERY_SECONDS, PCIE_SKIPPED

    now = [100.0]
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    telemetry = TelemetryProbe(Gpu(lambda: (0, None)), clock=lambda: now[0])
    assert telemetry.read().pcie_rx_bytes_per_sec == 1000 * 1024
    now[0] += 1.0
    skipped = telemetry.read()
    assert skipped.pcie_rx_bytes_per_sec is None and skipped.pcie_unavailable_reason == PCIE_SKIPPED
    assert skipped.power_watts == 312.5  # the fast reads go on
    now[0] += PCIE_EVERY_SECONDS
    assert telemetry.read().pcie_tx_bytes_per_sec == 250 * 1024
    # The run's figure: the median of the windows that read it, and no reason, though the last window skipped it.
    figures = run_figures([window(10, pcie_rx_bytes_per_sec=2.0), window(20, pcie_unavailable_reason=PCIE_SKIPPED)])
    assert figures["pcie_rx_bytes_per_sec"] == 2.0 and figures["telemetry_unavailable_reason"] is None


def test_an_nvidia_ml_py_without_gpm_says_so(monkeypatch):
    reading = probe(monkeypatch, fake_pynvml(gpm=None)).read()
    assert reading.sm_activity is None
    assert reading.gpm_unavailable_reason == "GPM needs nvidia-ml-py 12.535 or newer"


def test_without_nvml_or_on_a_cpu_every_figure_is_none_with_the_reason(monkeypatch):
    cpu = TelemetryProbe(None).read()
    assert cpu == TelemetryProbe(None).read() and cpu.power_watts is None
    assert cpu.power_unavailable_reason == cpu.gpm_unavailable_reason == "CPU device: no GPU telemetry"
    monkeypatch.setitem(sys.modules, "pynvml", None)
    missing = TelemetryProbe(Gpu(lambda: (0, None))).read()
    assert missing.sm_clock_mhz is None and missing.sm_clock_unavailable_reason == "nvidia-ml-py (pynvml) is not installed"


def test_a_gpu_closed_under_the_probe_reads_as_none_with_a_reason(monkeypatch):
    """The GPU is the memory probe's: were it closed first, the figures would still say why they are None."""
    from workbench.engine.telemetry import CLOSED_REASON

    telemetry = probe(monkeypatch, fake_pynvml())
    telemetry.gpu.close()
    telemetry.window_started()
    reading = telemetry.read()
    assert reading.power_watts is None and reading.power_unavailable_reason == CLOSED_REASON
    assert reading.gpm_unavailable_reason == CLOSED_REASON
    telemetry.close()


def test_clock_event_bits_are_named():
    assert clock_event_names(0) == ()
    assert clock_event_names(0x1 | 0x40) == ("idle", "hardware thermal slowdown")
    assert clock_event_names(0x4 | 0x1000) == ("software power cap", "other (0x1000)")


def test_nvml_is_initialised_once_for_all_its_holders_and_shut_down_after_the_last(monkeypatch):
    # Holds are counted by id(module): other tests leave holds on fakes that are gone, and a new fake may get
    # one of their ids (then NVML looks initialised already). This test counts from none.
    monkeypatch.setattr(nvml, "_holds", {})
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    first, second = Gpu(lambda: (0, None)), NvmlHold()
    assert nvml.driver_version().value == "580.65.06"  # a third hold, let go at once
    first.close()
    assert fake.calls == ["init"]
    second.close()
    second.close()  # letting go twice is once
    assert fake.calls == ["init", "shutdown"]


def window(step, **telemetry):
    utilization = telemetry.pop("utilization", None)
    return StepStats(step=step, total_steps=100, epoch=1, epochs=1, samples_seen=step * 32, loss=1.0, lr=0.1,
                     images_per_sec=1000.0, data_wait_seconds=0.0, device_span_seconds=0.1, window_seconds=0.1,
                     elapsed_seconds=0.1 * step, memory=MemorySnapshot(gpu_utilization_percent=utilization),
                     telemetry=DeviceTelemetry(**telemetry))


def test_the_runs_figures_are_medians_over_its_windows_and_reasons_where_none_was_read():
    windows = [
        window(10, utilization=100.0, power_watts=300.0, sm_activity=0.4, clock_event_reasons=()),
        window(20, utilization=98.0, power_watts=350.0, sm_activity=0.5, clock_event_reasons=("software power cap",)),
        window(30, utilization=99.0, power_watts=700.0, sm_activity=0.45, clock_event_reasons=()),
    ]
    figures = run_figures(windows)
    assert figures["nvml_kernel_time_fraction"] == pytest.approx(0.99)
    assert figures["power_watts"] == 350.0 and figures["sm_activity_fraction"] == 0.45
    assert figures["clock_event_reasons"] == "software power cap"
    assert figures["telemetry_unavailable_reason"] is None and "gpm_unavailable_reason" not in figures
    quiet = run_figures(windows[:1])
    assert quiet["clock_event_reasons"] == "none"
    unread = run_figures([window(10, power_unavailable_reason="NVML cannot read the power here: Not Supported",
                                 gpm_unavailable_reason="GPM is not supported on this GPU")])
    assert unread["power_watts"] is None and unread["tensor_activity_fraction"] is None
    assert unread["telemetry_unavailable_reason"] == "NVML cannot read the power here: Not Supported"
    assert unread["gpm_unavailable_reason"] == "GPM is not supported on this GPU"


def test_a_cpu_run_carries_the_reason_to_its_windows_and_summary():
    events = run_to_end(tiny_config())
    windows = [event for event in events if isinstance(event, StepStats)]
    assert all(w.telemetry.power_unavailable_reason == "CPU device: no GPU telemetry" for w in windows)
    summary = events[-1].summary
    assert summary.power_watts is None and summary.telemetry_unavailable_reason == "CPU device: no GPU telemetry"
    assert summary.gpm_unavailable_reason == "CPU device: no GPU telemetry"


def test_gpm_samples_are_taken_at_least_its_minimum_interval_apart(monkeypatch):
    """issue 31 item 1: NVML's GPM metrics read 0 over samples 100 ms apart or closer; a fast run's 20 ms windows
    share one interval, and the windows too short to read say why."""
    now = [0.0]
    fake = fake_pynvml(clock=lambda: now[0])
    telemetry = probe(monkeypatch, fake, clock=lambda: now[0])
    readings = []
    for _ in range(60):  # 60 windows of 20 ms: 1.2 s
        telemetry.window_started()
        now[0] += 0.020
        readings.append(telemetry.read())
    read = [r for r in readings if r.sm_activity is not None]
    assert len(read) == 1 and read[0].sm_activity == pytest.approx(0.41)  # over 1 s: never NVML's 0
    assert readings.index(read[0]) in (49, 50)  # the first window to end 1 s after the first start
    assert readings[0].gpm_unavailable_reason == (
        "GPM measures over at least 1 s (NVML's samples must be more than 100 ms apart): 20 ms had passed; "
        "a later window reads it over this one too")
    assert readings[-1].sm_activity is None and readings[-1].gpm_unavailable_reason.startswith("GPM measures")
    telemetry.close()
    assert fake.gpm_samples_alive == set()


def test_the_window_reads_the_gpus_telemetry_before_its_sync(monkeypatch):
    """issue 31 item 5: after the sync the GPU is idle (no PCIe copy in flight, the clocks "idle"): the telemetry
    is read before it, while the queued steps run."""
    from workbench.engine.session import TrainingSession

    calls = []
    reading = TelemetryProbe.read
    monkeypatch.setattr(TelemetryProbe, "read", lambda self: (calls.append("telemetry"), reading(self))[1])
    monkeypatch.setattr(TrainingSession, "_synchronize", lambda self: calls.append("sync"))
    assert run_to_end(tiny_config(max_steps=4, log_every=2))[-1].status == "finished"
    assert calls == ["telemetry", "sync"] * 2
