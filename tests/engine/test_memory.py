"""Memory figures: all three where they exist, None with a reason where they do not."""

import sys
import types

import pytest
import torch
from fake_nvml import fake_pynvml

from workbench.engine.memory import MemoryProbe, release_cached_memory


def test_cpu_snapshot_has_no_gpu_figures_and_says_why():
    snapshot = MemoryProbe(torch.device("cpu")).snapshot()
    assert snapshot.torch_allocated is None and snapshot.nvml_device_used is None
    assert "CPU" in snapshot.torch_unavailable_reason and "CPU" in snapshot.nvml_unavailable_reason


def test_nvml_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    probe = MemoryProbe(torch.device("cuda", 0))
    assert probe.nvml_unavailable_reason == "nvidia-ml-py (pynvml) is not installed"


def test_nvml_library_missing(monkeypatch):
    fake = types.ModuleType("pynvml")

    def fail():
        raise OSError("NVML Shared Library Not Found")

    fake.nvmlInit = fail
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    probe = MemoryProbe(torch.device("cuda", 0))
    assert probe.nvml_unavailable_reason == "NVML unavailable: NVML Shared Library Not Found"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU message")
def test_release_is_a_no_op_that_says_so_on_cpu():
    release = release_cached_memory()
    assert release.reserved_before is None and release.reserved_after is None
    assert release.message == "CPU mode: there is no CUDA cache to release"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_a_snapshot_holds_this_processs_resident_memory_and_follows_it():
    import mmap

    probe = MemoryProbe(torch.device("cpu"))
    before = probe.snapshot()
    assert before.process_rss is not None and before.process_rss_unavailable_reason is None
    # 64 MiB of fresh pages, each written so it is resident: an allocator's block could reuse pages an earlier test
    # had made resident and freed (RSS then stays put, as it did once in a full run).
    block = mmap.mmap(-1, 64 * 2**20)
    for offset in range(0, len(block), mmap.PAGESIZE):
        block[offset] = 1
    after = probe.snapshot()
    assert after.process_rss - before.process_rss > 48 * 2**20
    block.close()


def test_without_proc_the_resident_memory_is_none_with_the_reason(monkeypatch):
    import builtins

    from workbench.engine import memory

    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        if str(path).startswith("/proc/"):
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    snapshot = memory.MemoryProbe(torch.device("cpu")).snapshot()
    assert snapshot.process_rss is None
    assert "/proc/self/statm" in snapshot.process_rss_unavailable_reason


class FakeAllocator:
    """torch.cuda's allocator counters as they behave: reset_peak_memory_stats resets each peak to the current
    value, and empty_cache returns the unused cached blocks (reserved falls to allocated)."""

    def __init__(self, allocated: int, reserved: int):
        self.allocated, self.reserved = allocated, reserved
        self.peak_allocated, self.peak_reserved = allocated, reserved
        self.calls: list[str] = []

    def install(self, monkeypatch):
        cuda = torch.cuda
        monkeypatch.setattr(cuda, "empty_cache", self.empty_cache)
        monkeypatch.setattr(cuda, "reset_peak_memory_stats", self.reset_peak_memory_stats)
        monkeypatch.setattr(cuda, "max_memory_reserved", lambda device=None: self.peak_reserved)
        monkeypatch.setattr(cuda, "max_memory_allocated", lambda device=None: self.peak_allocated)

    def empty_cache(self):
        self.calls.append("empty_cache")
        self.reserved = self.allocated

    def reset_peak_memory_stats(self, device=None):
        self.calls.append("reset_peak_memory_stats")
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved


def test_each_runs_reserved_peak_is_its_own(monkeypatch):
    """The previous run left 6 GiB in the cache: after the reset this run's reserved peak must not start there."""
    from workbench.engine.memory import reset_peaks_for_a_new_run

    gib = 2**30
    allocator = FakeAllocator(allocated=1 * gib, reserved=7 * gib)
    allocator.install(monkeypatch)
    reset_peaks_for_a_new_run(torch.device("cuda", 0))
    assert allocator.calls == ["empty_cache", "reset_peak_memory_stats"]
    assert torch.cuda.max_memory_reserved(0) == 1 * gib
    assert torch.cuda.max_memory_allocated(0) == 1 * gib


def test_every_run_resets_its_peaks_at_start(monkeypatch):
    from engine_helpers import run_to_end, tiny_config

    from workbench.engine import session

    devices = []
    monkeypatch.setattr(session, "reset_peaks_for_a_new_run", devices.append)
    run_to_end(tiny_config())
    assert devices == [torch.device("cpu")]


def gpu_probe(monkeypatch, fake):
    """A MemoryProbe for a CUDA device on this CPU: NVML faked, torch's CUDA counters faked."""
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: types.SimpleNamespace(uuid="1234"))
    for name in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        monkeypatch.setattr(torch.cuda, name, lambda device=None: 2**30)
    return MemoryProbe(torch.device("cuda", 0))


def test_nvml_used_is_device_wide_and_this_processs_own_usage_is_beside_it(monkeypatch):
    import os

    gib = 2**30
    probe = gpu_probe(monkeypatch, fake_pynvml(processes=[(4242, 3 * gib), (os.getpid(), 2 * gib)]))
    snapshot = probe.snapshot()
    assert snapshot.nvml_device_used == 6 * gib  # everything on the device, the other process's 3 GiB included
    assert snapshot.nvml_process_used == 2 * gib and snapshot.nvml_process_unavailable_reason is None


def test_a_container_that_hides_our_pid_gives_none_with_the_reason(monkeypatch):
    import os

    probe = gpu_probe(monkeypatch, fake_pynvml(processes=[(98765, 2**30)]))  # host pids only
    snapshot = probe.snapshot()
    assert snapshot.nvml_device_used == 6 * 2**30 and snapshot.nvml_process_used is None
    assert snapshot.nvml_process_unavailable_reason == (
        f"NVML does not list this process (pid {os.getpid()}) on the GPU: in a container the driver sees host pids, "
        "not the container's")


def test_per_process_memory_the_driver_does_not_report(monkeypatch):
    import os

    snapshot = gpu_probe(monkeypatch, fake_pynvml(processes=[(os.getpid(), None)])).snapshot()
    assert snapshot.nvml_process_used is None
    assert snapshot.nvml_process_unavailable_reason.startswith("the driver does not report per-process memory")
    snapshot = gpu_probe(monkeypatch, fake_pynvml(list_error=RuntimeError("Not Supported"))).snapshot()
    assert snapshot.nvml_process_used is None and snapshot.nvml_device_used == 6 * 2**30
    assert snapshot.nvml_process_unavailable_reason == "NVML cannot list the GPU's processes: Not Supported"


def test_memory_and_utilisation_are_read_apart(monkeypatch):
    """A GPU that reports its memory but not its utilisation (a MIG instance, for one) keeps its memory figures, and the
    utilisation is None with its own reason; the other way round likewise."""
    snapshot = gpu_probe(monkeypatch, fake_pynvml(unsupported=("nvmlDeviceGetUtilizationRates",))).snapshot()
    assert snapshot.nvml_device_used == 6 * 2**30 and snapshot.nvml_total == 80 * 2**30
    assert snapshot.nvml_unavailable_reason is None
    assert snapshot.gpu_utilization_percent is None
    assert snapshot.gpu_utilization_unavailable_reason == "NVML read failed: Not Supported"
    snapshot = gpu_probe(monkeypatch, fake_pynvml(unsupported=("nvmlDeviceGetMemoryInfo",))).snapshot()
    assert snapshot.nvml_device_used is None and snapshot.nvml_unavailable_reason == "NVML read failed: Not Supported"
    assert snapshot.gpu_utilization_percent == 87.0 and snapshot.gpu_utilization_unavailable_reason is None


def test_the_summary_keeps_the_peak_of_both_nvml_figures():
    from workbench.engine.events import MemorySnapshot, StepStats
    from workbench.engine.summary import SummaryBuilder

    builder = SummaryBuilder()
    for used, ours in ((5, 2), (7, 3), (6, None)):
        builder.add(StepStats(step=1, total_steps=3, epoch=1, epochs=1, samples_seen=1, loss=1.0, lr=0.1,
                              images_per_sec=1.0, data_wait_seconds=0.0, device_span_seconds=0.1, window_seconds=0.1,
                              elapsed_seconds=0.1, memory=MemorySnapshot(nvml_device_used=used, nvml_process_used=ours)))
    summary = builder.build("finished")
    assert summary.peak_nvml_device_used_bytes == 7 and summary.peak_nvml_process_used_bytes == 3


def test_a_mig_instance_is_found_by_its_uuid_and_the_whole_cards_figures_are_not_read(monkeypatch):
    """issue 31 item 6: CUDA's UUID of a MIG instance is NVML's "MIG-…"; looked up as "GPU-…" it was not found and
    the fallback by index read the whole card."""
    from workbench.engine.telemetry import TelemetryProbe

    gib = 2**30
    probe = gpu_probe(monkeypatch, fake_pynvml(mig="instance", used=3 * gib, total=10 * gib))
    snapshot = probe.snapshot()
    assert (snapshot.nvml_device_used, snapshot.nvml_total) == (3 * gib, 10 * gib)  # the instance's, not the card's 70/80
    from workbench.engine.nvml import MIG_DEVICE_WIDE

    assert snapshot.gpu_utilization_percent is None and snapshot.gpu_utilization_unavailable_reason == MIG_DEVICE_WIDE
    telemetry = TelemetryProbe(probe.gpu)
    telemetry.window_started()
    reading = telemetry.read()
    assert reading.power_watts is None and reading.power_unavailable_reason == MIG_DEVICE_WIDE
    assert reading.sm_clock_mhz is None and reading.clock_event_reasons is None and reading.pcie_rx_bytes_per_sec is None
    assert reading.sm_activity is None and reading.gpm_unavailable_reason == MIG_DEVICE_WIDE
    assert MIG_DEVICE_WIDE.startswith("MIG: device-wide figures not read")
    probe.close()


def test_a_mig_instance_nvml_cannot_find_is_not_read_as_the_whole_card(monkeypatch):
    snapshot = gpu_probe(monkeypatch, fake_pynvml(mig="unlisted")).snapshot()
    assert snapshot.nvml_device_used is None and snapshot.nvml_total is None  # never the card's 70 of 80 GiB
    assert snapshot.nvml_unavailable_reason == (
        "MIG: device-wide figures not read (NVML found no GPU or MIG instance with this run's UUID, and the GPU at "
        "index 0 is a whole card split into MIG instances)")
