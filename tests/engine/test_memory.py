"""Memory figures: all three where they exist, None with a reason where they do not."""

import sys
import types

import pytest
import torch

from workbench.engine.memory import MemoryProbe, release_cached_memory


def test_cpu_snapshot_has_no_gpu_figures_and_says_why():
    snapshot = MemoryProbe(torch.device("cpu")).snapshot()
    assert snapshot.torch_allocated is None and snapshot.nvml_used is None
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
    import numpy as np

    probe = MemoryProbe(torch.device("cpu"))
    before = probe.snapshot()
    assert before.process_rss is not None and before.process_rss_unavailable_reason is None
    block = np.ones(64 * 2**20, dtype=np.uint8)  # 64 MiB, touched so it is resident
    after = probe.snapshot()
    assert after.process_rss - before.process_rss > 48 * 2**20
    del block


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
