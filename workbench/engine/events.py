"""What the engine yields: small frozen dataclasses, no tensors, no Qt.

A run yields, in order: zero or more ``StatusChanged`` (what it is doing before training),
``RunStarted`` (once settings, device and data are known), then ``StepStats`` every
``log_every`` steps and ``EpochStats`` after each epoch, and always exactly one final
``RunEnded`` (finished, stopped or failed, with the run's summary).
Importing this module must stay cheap (no torch): the GUI and the history use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, Union

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo  # re-exported: events carry it

EndStatus = Literal["finished", "stopped", "failed"]
# Why a run failed: "config" and "data" are the user's input (the CLI exits 2 for them);
# the rest are the run's own trouble (exit 1).
FailureKind = Literal["config", "data", "out_of_memory", "diverged", "error"]


@dataclass(frozen=True)
class MemorySnapshot:
    """Memory at one moment, in bytes. A figure is None when it cannot be read; the reason says why."""

    torch_allocated: Optional[int] = None
    torch_reserved: Optional[int] = None
    torch_peak_allocated: Optional[int] = None
    torch_peak_reserved: Optional[int] = None
    nvml_used: Optional[int] = None
    nvml_total: Optional[int] = None
    gpu_utilization_percent: Optional[float] = None
    torch_unavailable_reason: Optional[str] = None
    nvml_unavailable_reason: Optional[str] = None


@dataclass(frozen=True)
class StatusChanged:
    message: str  # "Loading data…", "Compiling the model…", "Evaluating…"


@dataclass(frozen=True)
class RunStarted:
    config: RunConfig
    device: DeviceInfo
    dataset_name: str
    train_size: int
    test_size: int
    num_classes: int
    steps_per_epoch: int
    total_steps: int  # micro-batch steps the run will take (max_steps when set, else epochs × steps/epoch)
    parameter_count: int
    started_at: float  # time.time()
    notes: tuple[str, ...] = ()  # settings that had no effect here, and why ("pin_memory ignored: …")


@dataclass(frozen=True)
class StepStats:
    """Measurements over the window of steps since the previous StepStats."""

    step: int  # micro-batches done in the run so far (1-based)
    total_steps: int
    epoch: int  # 1-based
    epochs: int
    samples_seen: int
    loss: float  # mean training loss over the window
    lr: float
    images_per_sec: float  # window samples / window wall seconds
    data_wait_seconds: float  # host time blocked waiting for the next batch in the window
    # Span of the window's steps on the device stream (CUDA event pairs; host clock on a CPU). A span
    # includes the idle gaps between kernels: it is not GPU busy time (the profiler sample measures that).
    device_span_seconds: float
    window_seconds: float  # wall time of the window
    elapsed_seconds: float  # since training started
    memory: MemorySnapshot = field(default_factory=MemorySnapshot)

    @property
    def data_wait_fraction(self) -> float:
        return self.data_wait_seconds / self.window_seconds if self.window_seconds > 0 else 0.0


@dataclass(frozen=True)
class EpochStats:
    epoch: int  # 1-based
    epochs: int
    step: int
    train_loss: float
    train_accuracy: float
    test_loss: float
    test_accuracy: float
    images_per_sec: float  # training images / training wall seconds of this epoch
    data_wait_fraction: float
    train_seconds: float
    eval_seconds: float
    memory: MemorySnapshot = field(default_factory=MemorySnapshot)


@dataclass(frozen=True)
class RunSummary:
    """The figures a run is compared by: printed by the CLI, stored in the history, exported to CSV."""

    status: EndStatus
    reason: Optional[str] = None
    failure_kind: Optional[FailureKind] = None
    test_accuracy: Optional[float] = None
    final_loss: Optional[float] = None
    # Steady state = every log window after the first (cuDNN autotuning, worker start-up, compilation),
    # unless the first is the only one. Throughput is samples ÷ seconds over it, on the windows' clock.
    images_per_sec: Optional[float] = None
    images_per_sec_median: Optional[float] = None  # median of the steady windows' rates, for spread
    data_wait_fraction: Optional[float] = None  # of the steady state's wall time
    device_span_fraction: Optional[float] = None  # event-pair spans of the steps / wall time, likewise
    peak_allocated_bytes: Optional[int] = None
    peak_reserved_bytes: Optional[int] = None
    peak_nvml_used_bytes: Optional[int] = None  # highest NVML reading at log points (sampled, not a true peak)
    wall_seconds: float = 0.0
    steps: int = 0
    samples_seen: int = 0
    epochs_completed: int = 0
    device: Optional[str] = None  # "cuda" or "cpu"
    device_name: Optional[str] = None
    torch_version: Optional[str] = None

    @property
    def verdict(self) -> Optional[str]:
        """What bounds this run, in one plain sentence (None before any measurement)."""
        from workbench.engine.verdict import bottleneck_verdict

        return bottleneck_verdict(self.data_wait_fraction, self.device_span_fraction, self.device)


@dataclass(frozen=True)
class RunEnded:
    status: EndStatus
    summary: RunSummary
    reason: Optional[str] = None  # why it stopped or failed, in words
    kind: Optional[FailureKind] = None


Event = Union[StatusChanged, RunStarted, StepStats, EpochStats, RunEnded]


@dataclass(frozen=True)
class MemoryRelease:
    """What release_cached_memory() did."""

    reserved_before: Optional[int]
    reserved_after: Optional[int]
    message: str  # "reserved 2.1 GiB → 0.4 GiB", or why nothing was done
