"""On a CUDA GPU: every precision trains, all three memory figures are read, the cache is released."""

import sys

import pytest
import torch
from engine_helpers import run_to_end, tiny_config

from workbench.engine import probe_device
from workbench.engine.data import LoaderBatches, load_arrays
from workbench.engine.events import EpochStats, StepStats
from workbench.engine.memory import MemoryProbe, release_cached_memory

pytestmark = pytest.mark.gpu


def gpu_config(**changes):
    base = dict(device="cuda", model="resnet18", synthetic_size=2048, batch_size=128, max_steps=12, log_every=4,
                num_workers=2)
    base.update(changes)
    return tiny_config(**base)


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("pipeline, augment", [("dataloader", "cpu"), ("gpu-resident", "gpu")])
def test_each_precision_trains_on_the_gpu_with_all_memory_figures(precision, pipeline, augment):
    if precision == "bf16" and not probe_device("cuda").bf16_supported:
        pytest.skip("this GPU has no native bf16")
    events = run_to_end(gpu_config(precision=precision, pipeline=pipeline, augment=augment))
    ended = events[-1]
    assert ended.status == "finished", ended.reason
    steps = [e for e in events if isinstance(e, StepStats)]
    for stats in steps:
        memory = stats.memory
        assert 0 < memory.torch_allocated <= memory.torch_reserved <= memory.nvml_device_used <= memory.nvml_total
        assert memory.torch_peak_allocated >= memory.torch_allocated
        assert 0 <= memory.gpu_utilization_percent <= 100
        assert 0 < stats.device_span_seconds <= stats.window_seconds * 1.05  # CUDA events, read at log points
    summary = ended.summary
    # NVML's peak is sampled at log points; torch's peak counters also catch transients between them.
    assert summary.device_type == "cuda" and summary.peak_reserved_bytes >= summary.peak_allocated_bytes > 0
    assert summary.peak_nvml_device_used_bytes >= max(s.memory.torch_reserved for s in steps)
    assert [e for e in events if isinstance(e, EpochStats)][-1].test_accuracy >= 0


def test_lower_precision_uses_less_activation_memory():
    peaks = {}
    for precision in ("fp32", "bf16" if probe_device("cuda").bf16_supported else "fp16"):
        torch.cuda.empty_cache()
        ended = run_to_end(gpu_config(precision=precision, pipeline="gpu-resident", augment="gpu", batch_size=512,
                                      max_steps=4))[-1]
        peaks[precision] = ended.summary.peak_allocated_bytes
    low = [p for p in peaks if p != "fp32"][0]
    assert peaks[low] < peaks["fp32"]


def test_pinned_batches_when_asked():
    config = gpu_config(pin_memory=True, num_workers=0)
    batches = LoaderBatches(load_arrays(config), config, pin_memory=True)
    images, labels = next(iter(batches.epoch()))
    batches.close()
    assert images.is_pinned() and labels.is_pinned()


def test_release_cached_memory_frees_reserved_blocks():
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    del block
    release = release_cached_memory()
    assert release.reserved_before >= 256 * 2**20
    assert release.reserved_after <= release.reserved_before - 256 * 2**20
    assert release.message.startswith("reserved ") and " → " in release.message


def test_snapshot_without_nvml_still_has_torch_figures(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    probe = MemoryProbe(torch.device("cuda", torch.cuda.current_device()))
    torch.ones(1, device="cuda")
    snapshot = probe.snapshot()
    assert snapshot.torch_reserved > 0 and snapshot.nvml_device_used is None
    assert snapshot.nvml_unavailable_reason == "nvidia-ml-py (pynvml) is not installed"


def test_device_probe_describes_the_gpu():
    info = probe_device("auto")
    assert info.type == "cuda" and info.total_memory_bytes > 0 and info.compute_capability
    assert info.cpu_fallback_reason is None


@pytest.mark.slow
def test_resnet18_learns_the_real_subset_on_the_gpu(subset_npz):
    config = gpu_config(dataset="npz", data_path=str(subset_npz), max_steps=None, epochs=8,
                        pipeline="gpu-resident", augment="gpu", precision="bf16" if
                        probe_device("cuda").bf16_supported else "fp16", log_every=10)
    events = run_to_end(config)
    assert events[-1].status == "finished", events[-1].reason
    assert [e for e in events if isinstance(e, EpochStats)][-1].test_accuracy >= 0.45


def test_twenty_runs_in_a_row_from_a_training_thread_with_pinned_workers_never_hang():
    """What the GUI does, without Qt (not installed on every GPU machine): each run on a fresh thread while
    the main thread lives on, with workers (the default forkserver), pin_memory and persistent workers on CUDA."""
    import multiprocessing
    import threading

    from workbench.config import DEFAULT_START_METHOD

    config = gpu_config(model="small-cnn", num_workers=2, pin_memory=True, non_blocking=True, persistent_workers=True,
                        max_steps=8, log_every=4, synthetic_size=1024, batch_size=64)
    assert config.worker_start_method == DEFAULT_START_METHOD
    for number in range(20):
        ended = []
        thread = threading.Thread(target=lambda: ended.append(run_to_end(config.replace(seed=number))[-1]),
                                  name="trainingThread")
        thread.start()
        thread.join(120)
        assert not thread.is_alive(), f"run {number + 1} hung"
        assert ended[0].status == "finished", ended[0].reason
        assert multiprocessing.active_children() == []
