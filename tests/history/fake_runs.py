"""Engine events built by hand, so history tests need neither torch nor the real engine."""

from __future__ import annotations

import time

from workbench.config import RunConfig
from workbench.engine.events import (
    DeviceInfo,
    EpochStats,
    MemorySnapshot,
    RunEnded,
    RunStarted,
    RunSummary,
    StatusChanged,
    StepStats,
)

CPU = DeviceInfo(
    type="cpu", name="Test CPU (2 cores)", cuda_available=False, cpu_fallback_reason="device=cpu was chosen",
    torch_version="2.14.1", torchvision_version="0.29.0", python_version="3.11.7", cpu_count=2,
)
GPU = DeviceInfo(
    type="cuda", name="NVIDIA Test GPU", cuda_available=True, compute_capability="9.0",
    total_memory_bytes=80 * 2**30, bf16_supported=True, driver_version="560.1", cuda_version="12.4",
    torch_version="2.14.1", torchvision_version="0.29.0", python_version="3.11.7", cpu_count=16,
)


def started(config: RunConfig, device: DeviceInfo = CPU, total_steps: int = 10) -> RunStarted:
    return RunStarted(
        config=config, device=device, dataset_name="synthetic", train_size=320, test_size=64, num_classes=10,
        steps_per_epoch=total_steps, total_steps=total_steps, parameter_count=12_345, started_at=time.time(),
        notes=("pin_memory ignored: no CUDA",),
    )


def step(index: int, total: int = 10, loss: float | None = None, memory: MemorySnapshot | None = None) -> StepStats:
    return StepStats(
        step=index, total_steps=total, epoch=1, epochs=1, samples_seen=index * 32,
        loss=2.5 / index if loss is None else loss, lr=0.05, images_per_sec=1000.0 + index,
        data_wait_seconds=0.01, device_span_seconds=0.03, window_seconds=0.04, elapsed_seconds=0.04 * index,
        memory=memory or MemorySnapshot(),
    )


def epoch(at_step: int, test_accuracy: float = 0.42) -> EpochStats:
    return EpochStats(
        epoch=1, epochs=1, step=at_step, train_loss=1.5, train_accuracy=0.4, test_loss=1.6,
        test_accuracy=test_accuracy, images_per_sec=990.0, data_wait_fraction=0.25, train_seconds=0.4,
        eval_seconds=0.1,
    )


def summary(steps: int = 10, test_accuracy: float = 0.42, images_per_sec: float = 1005.5, **changes) -> RunSummary:
    values = dict(
        status="finished", test_accuracy=test_accuracy, final_loss=0.25, images_per_sec=images_per_sec,
        images_per_sec_median=None if images_per_sec is None else images_per_sec - 0.5, data_wait_fraction=0.25, wall_seconds=1.25, steps=steps,
        samples_seen=steps * 32, epochs_completed=1, device="cpu", device_name=CPU.name, torch_version="2.14.1",
    )
    values.update(changes)
    return RunSummary(**values)


def complete_run_events(config: RunConfig, steps: int = 10, test_accuracy: float = 0.42, **summary_changes):
    """A whole finished run, in engine order."""
    yield StatusChanged(message="Loading data…")
    yield started(config, total_steps=steps)
    for index in range(1, steps + 1):
        yield step(index, steps)
    yield epoch(steps, test_accuracy)
    yield RunEnded(status="finished", summary=summary(steps, test_accuracy, **summary_changes))


def record_complete_run(store, config: RunConfig | None = None, name: str | None = None, source: str = "cli",
                        steps: int = 10, **summary_changes) -> int:
    config = config or RunConfig(device="cpu")
    recorder = store.start_run(config, name=name, source=source)
    for event in complete_run_events(config, steps, **summary_changes):
        recorder.record(event)
    return recorder.run_id


def fill_history(store, count: int, config: RunConfig | None = None) -> list[int]:
    """``count`` finished runs at once: one recorded through the recorder, the rest copies of its row (names
    numbered), so a large history takes a second to make. Step metrics are the first run's only. Their ids."""
    first = record_complete_run(store, config, name="run 1")
    columns = [row[1] for row in store._conn.execute("PRAGMA table_info(runs)") if row[1] not in ("id", "name")]
    names = ", ".join(columns)
    with store._transaction() as conn:
        conn.executemany(
            f"INSERT INTO runs (name, {names}) SELECT ?, {names} FROM runs WHERE id = ?",
            [(f"run {number}", first) for number in range(2, count + 1)],
        )
    return [first, *(row[0] for row in store._conn.execute("SELECT id FROM runs WHERE id > ? ORDER BY id", (first,)))]
