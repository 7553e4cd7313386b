"""Fakes for the sequence tests: a run function with a known speed and noise, a device, a fake CUDA allocator."""

from __future__ import annotations

import random
from typing import Callable, Iterator, Optional

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo
from workbench.engine.events import MemorySnapshot, RunEnded, RunStarted, RunSummary, StepStats

CPU = DeviceInfo(type="cpu", name="Test CPU", cuda_available=False, cpu_fallback_reason="no CUDA GPU found",
                 torch_version="2.x", cpu_count=2)
GPU = DeviceInfo(type="cuda", name="Test GPU", cuda_available=True, compute_capability="9.0",
                 total_memory_bytes=80 * 2**30, bf16_supported=True, torch_version="2.x", cpu_count=16)


def probe_of(device: DeviceInfo) -> Callable[[str], DeviceInfo]:
    return lambda requested: device


def tiny(**changes) -> RunConfig:
    base = dict(dataset="synthetic", synthetic_size=128, batch_size=32, max_steps=3, log_every=1,
                num_workers=0, device="cpu")
    base.update(changes)
    return RunConfig(**base)


def started(config: RunConfig, device: DeviceInfo) -> RunStarted:
    return RunStarted(config=config, device=device, dataset_name="synthetic", train_size=1000, test_size=200,
                      num_classes=10, steps_per_epoch=10, total_steps=config.max_steps or 10, parameter_count=1,
                      started_at=0.0)


def ended(status: str, images_per_sec: Optional[float] = None, kind: Optional[str] = None,
          reason: Optional[str] = None, **peaks) -> RunEnded:
    summary = RunSummary(status=status, reason=reason, failure_kind=kind, images_per_sec=images_per_sec,
                         steps=3, **peaks)
    return RunEnded(status=status, summary=summary, reason=reason, kind=kind)


class TimedRuns:
    """A run function whose steady-state images/sec is ``speed(config)`` times noise from a seeded draw."""

    def __init__(self, speed: Callable[[RunConfig], float], noise: float = 0.01, seed: int = 0,
                 device: DeviceInfo = GPU, fail: Callable[[RunConfig], Optional[str]] = lambda config: None):
        self.speed, self.noise, self.device, self.fail = speed, noise, device, fail
        self.random = random.Random(seed)
        self.configs: list[RunConfig] = []

    def __call__(self, config: RunConfig, stop) -> Iterator:
        self.configs.append(config)
        yield started(config, self.device)
        failure = self.fail(config)
        if failure:
            yield ended("failed", kind=failure, reason=f"fake {failure}")
            return
        rate = self.speed(config) * (1 + self.random.uniform(-self.noise, self.noise))
        yield ended("finished", rate)


class FakeAllocator:
    """CUDA memory as the search sees it: trials take memory; what a failed trial held stays reserved until
    released (as torch's caching allocator keeps it)."""

    def __init__(self, limit_bytes: int, fixed_bytes: int, bytes_per_image: int):
        self.limit, self.fixed, self.per_image = limit_bytes, fixed_bytes, bytes_per_image
        self.reserved = 0
        self.releases = 0
        self.reserved_at_trial_start: list[int] = []
        self.sizes: list[int] = []
        self.configs: list[RunConfig] = []

    def release(self) -> None:
        self.releases += 1
        self.reserved = 0

    def needed(self, batch_size: int) -> int:
        return self.fixed + batch_size * self.per_image

    def __call__(self, config: RunConfig, stop) -> Iterator:
        self.sizes.append(config.batch_size)
        self.configs.append(config)
        self.reserved_at_trial_start.append(self.reserved)
        yield started(config, GPU)
        needed = self.needed(config.batch_size)
        if self.reserved + needed > self.limit:
            self.reserved += min(needed, self.limit - self.reserved)  # what it got before it ran out stays cached
            yield ended("failed", kind="out_of_memory", reason="CUDA out of memory")
            return
        self.reserved += needed
        memory = MemorySnapshot(torch_allocated=needed, torch_reserved=self.reserved, torch_peak_allocated=needed,
                                torch_peak_reserved=self.reserved, nvml_used=self.reserved + 500)
        yield StepStats(step=1, total_steps=3, epoch=1, epochs=1, samples_seen=config.batch_size, loss=1.0, lr=0.1,
                        images_per_sec=1000.0, data_wait_seconds=0.0, device_span_seconds=0.1, window_seconds=0.1,
                        elapsed_seconds=0.1, memory=memory)
        yield ended("finished", 1000.0, peak_allocated_bytes=needed, peak_reserved_bytes=self.reserved,
                    peak_nvml_used_bytes=self.reserved + 500)
