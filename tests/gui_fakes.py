"""Stand-ins for the engine's functions, so GUI tests control timing, failures and the device."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Optional

from workbench.config import RunConfig
from workbench.engine.events import (
    DeviceInfo,
    EpochStats,
    Event,
    MemoryRelease,
    MemorySnapshot,
    RunEnded,
    RunStarted,
    RunSummary,
    StatusChanged,
    StepStats,
)

# A real run that takes a second or two on two CPU cores.
TINY_RUN = RunConfig(dataset="synthetic", synthetic_size=256, batch_size=32, num_workers=0, device="cpu",
                     epochs=1, log_every=2, augment="gpu")
CPU_DEVICE = DeviceInfo(type="cpu", name="Test CPU (2 cores)", cuda_available=False,
                        cpu_fallback_reason="no CUDA GPU found", torch_version="2.x", python_version="3.x")
GPU_DEVICE = DeviceInfo(type="cuda", name="Test GPU", cuda_available=True, compute_capability="9.0",
                        total_memory_bytes=80 * 2**30, bf16_supported=True, driver_version="580.1",
                        cuda_version="13.0", torch_version="2.x", python_version="3.x")
OLD_GPU_DEVICE = DeviceInfo(type="cuda", name="Old GPU", cuda_available=True, compute_capability="7.5",
                            total_memory_bytes=16 * 2**30, bf16_supported=False, torch_version="2.x")
GPU_MEMORY = MemorySnapshot(torch_allocated=2 * 2**30, torch_reserved=3 * 2**30, nvml_used=4 * 2**30,
                            nvml_total=80 * 2**30)


class FakeRun:
    """A run function: ``steps`` StepStats, one EpochStats, then RunEnded; records what happened."""

    def __init__(self, steps: int = 20, step_seconds: float = 0.0, raise_at: Optional[int] = None,
                 memory: MemorySnapshot = MemorySnapshot(), device: DeviceInfo = CPU_DEVICE,
                 end: bool = True):
        self.steps, self.step_seconds, self.raise_at = steps, step_seconds, raise_at
        self.memory, self.device, self.end = memory, device, end
        self.closed = False
        self.configs: list[RunConfig] = []

    def __call__(self, config: RunConfig, stop: Callable[[], bool]) -> Iterator[Event]:
        self.configs.append(config)
        return self._events(config, stop)

    def _events(self, config: RunConfig, stop: Callable[[], bool]) -> Iterator[Event]:
        try:
            yield StatusChanged(message="Loading synthetic data…")
            yield RunStarted(config=config, device=self.device, dataset_name="synthetic", train_size=512,
                             test_size=102, num_classes=10, steps_per_epoch=self.steps, total_steps=self.steps,
                             parameter_count=1000, started_at=time.time(), notes=("a note",))
            began = time.perf_counter()
            for step in range(1, self.steps + 1):
                if stop():
                    yield RunEnded(status="stopped", summary=RunSummary(status="stopped", steps=step - 1), reason=f"stopped at step {step - 1}")
                    return
                if step == self.raise_at:
                    raise RuntimeError(f"boom at step {step}")
                if self.step_seconds:
                    time.sleep(self.step_seconds)
                yield StepStats(step=step, total_steps=self.steps, epoch=1, epochs=1, samples_seen=32 * step,
                                loss=2.3 / step, lr=0.05, images_per_sec=1000.0 + step, data_wait_seconds=0.001,
                                device_span_seconds=0.004, window_seconds=0.005,
                                elapsed_seconds=time.perf_counter() - began, memory=self.memory)
            yield EpochStats(epoch=1, epochs=1, step=self.steps, train_loss=0.5, train_accuracy=0.8, test_loss=0.6,
                             test_accuracy=0.75, images_per_sec=1000.0, data_wait_fraction=0.2, train_seconds=1.0,
                             eval_seconds=0.1, memory=self.memory)
            if self.end:
                yield RunEnded(status="finished", summary=RunSummary(status="finished", test_accuracy=0.75, steps=self.steps))
        finally:
            self.closed = True


def fake_probe(device: DeviceInfo = CPU_DEVICE) -> Callable[[], DeviceInfo]:
    return lambda: device


def fake_release() -> MemoryRelease:
    return MemoryRelease(reserved_before=3 * 2**30, reserved_after=1 * 2**30, message="reserved 3.0 GiB → 1.0 GiB")


class ListRecorder:
    """A run's recorder (as RunRecorder is one) that keeps its events in a list; ``fail_at``: the count of
    events after which ``record`` raises, as a full disk would."""

    def __init__(self, run_id: int, config: RunConfig, name: Optional[str], sequence_id: Optional[int],
                 fail_at: Optional[int] = None):
        self.run_id, self.config, self.name, self.sequence_id, self.fail_at = run_id, config, name, sequence_id, fail_at
        self.label = f"#{run_id} {name or 'synthetic'}"
        self.discarded = False
        self.events: list[Any] = []
        self.failed: Optional[str] = None
        self.fails: list[str] = []

    def record(self, event) -> None:
        if len(self.events) == self.fail_at:
            raise OSError("disk full")
        self.events.append(event)

    def fail(self, reason, kind="error", traceback=None) -> None:
        self.fails.append(reason)
        self.failed = self.failed or reason


class ListRecording:
    """A recorder factory as HistoryRecording is one; ``opened``/``closed`` count the jobs that used it."""

    def __init__(self, fail_at: Optional[int] = None):
        self.fail_at = fail_at  # each run's recorder fails after this many events
        self.recorders: list[ListRecorder] = []
        self.sequences: list[tuple[str, str]] = []
        self.measured: list[Any] = []  # the measured changes kept (history/comparisons.MeasuredChange)
        self.opened = self.closed = 0

    def __call__(self) -> "ListRecording":
        self.opened += 1
        return self

    def begin_sequence(self, kind, name, plan) -> int:
        self.sequences.append((kind, name))
        return 40 + len(self.sequences)

    def start_run(self, config, name, sequence_id) -> ListRecorder:
        self.recorders.append(ListRecorder(len(self.recorders) + 1, config, name, sequence_id, self.fail_at))
        return self.recorders[-1]

    def add_measured_change(self, change) -> None:
        self.measured.append(change)

    def measured_changes(self, config, device_type, device_name) -> list:
        from workbench.history.comparisons import speed_settings

        return [change for change in self.measured if (change.device_type, change.device_name) == (
            device_type, device_name) and speed_settings(change.baseline) == speed_settings(config)]

    def close(self) -> None:
        self.closed += 1


def collect(kind: type, into: list) -> Callable[[Any], None]:
    """A slot for ``session.event`` that keeps the events of one type (``into``), in order."""

    def keep(event: Any) -> None:
        if isinstance(event, kind):
            into.append(event)

    return keep
