"""What the engine yields: small frozen dataclasses, no tensors, no Qt.

A run yields, in order: zero or more ``StatusChanged`` (what it is doing before training),
``RunStarted`` (once settings, device and data are known), then ``StepStats`` every
``log_every`` steps, ``EpochStats`` after each epoch and a ``ProfileSample`` after each
profiler-sampled window, and always exactly one final ``RunEnded`` (finished, stopped or
failed, with the run's summary).
Importing this module must stay cheap (no torch): the GUI and the history use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo  # re-exported: events carry it
from workbench.engine.run_summary import EndStatus, FailureKind, NamedTime, RunSummary


@dataclass(frozen=True, kw_only=True)
class MemorySnapshot:
    """Memory at one moment, in bytes. A figure is None when it cannot be read; the reason says why."""

    torch_allocated: Optional[int] = None
    torch_reserved: Optional[int] = None
    torch_peak_allocated: Optional[int] = None
    torch_peak_reserved: Optional[int] = None
    nvml_device_used: Optional[int] = None  # device-wide: every process's memory and CUDA contexts, not only ours
    nvml_total: Optional[int] = None
    # NVML's "utilisation": the share of its last sample period in which any kernel ran (engine/nvml.py).
    gpu_utilization_percent: Optional[float] = None
    torch_unavailable_reason: Optional[str] = None
    nvml_unavailable_reason: Optional[str] = None  # why nvml_device_used / nvml_total are None
    gpu_utilization_unavailable_reason: Optional[str] = None  # why gpu_utilization_percent is None (read apart)
    # This process's resident set size (host RAM; DataLoader worker processes not included).
    process_rss: Optional[int] = None
    process_rss_unavailable_reason: Optional[str] = None
    # This process's own memory on the device as NVML counts it (its CUDA context included), where the
    # driver lists our pid; containers often show host pids, and then it is None with the reason.
    nvml_process_used: Optional[int] = None
    nvml_process_unavailable_reason: Optional[str] = None


@dataclass(frozen=True, kw_only=True)
class DeviceTelemetry:
    """What NVML says about the GPU beside its memory (engine/telemetry.py): power, SM clock, why the clocks
    are held down and PCIe traffic at the log point; on Hopper and newer, GPM's activity figures over the
    log window (fractions 0-1). A figure is None where it cannot be read, its reason beside it. In a
    multi-process run: rank 0's GPU."""

    power_watts: Optional[float] = None
    power_unavailable_reason: Optional[str] = None
    sm_clock_mhz: Optional[float] = None
    sm_clock_unavailable_reason: Optional[str] = None
    clock_event_reasons: Optional[tuple[str, ...]] = None  # () where the clocks are not held down
    clock_events_unavailable_reason: Optional[str] = None
    pcie_rx_bytes_per_sec: Optional[float] = None  # into the GPU
    pcie_tx_bytes_per_sec: Optional[float] = None
    pcie_unavailable_reason: Optional[str] = None
    # GPM: SMs with a warp resident (share of time × SMs), resident warps over the maximum, any tensor-core
    # pipe active, DRAM bandwidth used over its peak.
    sm_activity: Optional[float] = None
    sm_occupancy: Optional[float] = None
    tensor_activity: Optional[float] = None
    dram_bandwidth: Optional[float] = None
    gpm_unavailable_reason: Optional[str] = None


@dataclass(frozen=True, kw_only=True)
class StatusChanged:
    message: str  # "Loading data…", "Compiling the model…", "Evaluating…"
    lasting: bool = False  # an outcome to keep ("Saved the trained model's weights to …"), not a passing phase


@dataclass(frozen=True, kw_only=True)
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
    # The compute ceiling measured earlier for these settings on this device (`workbench ceiling`), if any.
    ceiling_images_per_sec: Optional[float] = None
    world_size: int = 1  # processes training together (DistributedDataParallel ranks); 1 = one process
    skipped_bad_images: int = 0  # an image folder's files left out as unreadable (skip_bad_images)

    @property
    def effective_batch_size(self) -> int:
        """Images per optimiser step over all processes: batch × world size × accumulation."""
        return self.config.batch_size * self.world_size * self.config.accumulation_steps


def per_clock_second(amount: float, seconds: float) -> Optional[float]:
    """``amount`` per second of wall clock (images: images/sec; seconds waiting for data: the share of the time);
    None where the clock did not advance (a coarse timer, a fake clock): nothing was measured there, and 0.0 would
    read as a run that trained nothing, or never waited."""
    return amount / seconds if seconds > 0 else None


@dataclass(frozen=True, kw_only=True)
class RankStepStats:
    """One process's own figures for a StepStats window of a multi-process (data-parallel) run."""

    rank: int
    samples: int  # images this rank trained on in the window
    images_per_sec: Optional[float]  # this rank's samples / its window seconds (per_clock_second: None at 0 s)
    data_wait_seconds: float
    device_span_seconds: float  # includes the time the rank waited in the gradient all-reduce
    window_seconds: float
    memory: MemorySnapshot = field(default_factory=MemorySnapshot)  # this rank's device (NVML: its whole GPU)


@dataclass(frozen=True, kw_only=True)
class StepStats:
    """Measurements over the window of steps since the previous StepStats.

    In a multi-process run the figures are over all ranks (``ranks`` holds each one's own): samples and
    images/sec are the sum of the ranks' samples over the window's wall time (the slowest rank's);
    data wait, device span and every memory figure are the highest rank's (in synchronous data
    parallelism every rank waits for the slowest at each all-reduce); loss is the mean over the ranks.
    """

    step: int  # micro-batches done in the run so far (1-based)
    total_steps: int
    epoch: int  # 1-based
    epochs: int
    samples_seen: int
    loss: float  # mean training loss over the window
    lr: float
    images_per_sec: Optional[float]  # window samples / window wall seconds (per_clock_second: None at 0 s on the clock)
    data_wait_seconds: float  # host time blocked waiting for the next batch in the window
    # Span of the window's steps on the device stream (CUDA event pairs; host clock on a CPU). A span
    # includes the idle gaps between kernels: it is not GPU busy time (the profiler sample measures that).
    device_span_seconds: float
    window_seconds: float  # wall time of the window
    elapsed_seconds: float  # since training started
    memory: MemorySnapshot = field(default_factory=MemorySnapshot)
    # fp16: optimizer steps in the window the GradScaler skipped for inf/NaN gradients (0 without a scaler).
    skipped_optimizer_steps: int = 0
    loss_scale: Optional[float] = None  # the fp16 GradScaler's scale at the log point; None without one
    # On the window whose first step compiled the model (compile ≠ off): that step's seconds, and whether
    # CUDA graphs were used ("on" / "skipped: <why>"; None when not asked for); a later window carries it
    # again where it changed (a skip at a later call: re-read at every log point, so at the run's end too).
    compile_seconds: Optional[float] = None
    cuda_graphs: Optional[str] = None
    ranks: tuple[RankStepStats, ...] = ()  # each rank's own figures, by rank; () for a one-process run
    telemetry: DeviceTelemetry = field(default_factory=DeviceTelemetry)

    def eta_seconds(self, previous: Optional["StepStats"] = None) -> Optional[float]:
        """Seconds left at the pace of this log window (its steps over its wall time) once ``previous``, the window
        before it, is known. The first window holds the loader's start and the warm-up: the mean since the start
        charged them to every step left ("ETA 3:44" at step 5 with 52 s to go), so it is used only until then."""
        left = self.total_steps - self.step
        window_steps = self.step - previous.step if previous is not None else 0
        if window_steps > 0 and self.window_seconds > 0:
            return self.window_seconds / window_steps * left
        if self.step <= 0 or self.elapsed_seconds <= 0:
            return None
        return self.elapsed_seconds / self.step * left

    @property
    def world_size(self) -> int:
        return max(1, len(self.ranks))

    @property
    def data_wait_fraction(self) -> Optional[float]:
        """The window's share of time waiting for data; None where it lasted 0 s on the clock (per_clock_second)."""
        return per_clock_second(self.data_wait_seconds, self.window_seconds)


@dataclass(frozen=True, kw_only=True)
class EpochStats:
    epoch: int  # 1-based
    epochs: int
    step: int
    train_loss: float
    train_accuracy: float
    test_loss: float
    test_accuracy: float
    images_per_sec: Optional[float]  # training images / training wall seconds of the epoch; None at 0 s (per_clock_second)
    data_wait_fraction: Optional[float]  # of the epoch's training time; None at 0 s on the clock (per_clock_second)
    train_seconds: float
    eval_seconds: float
    memory: MemorySnapshot = field(default_factory=MemorySnapshot)  # multi-process: each figure the highest rank's
    rank_memory: tuple[MemorySnapshot, ...] = ()  # each rank's own, by rank; () for a one-process run

    @property
    def evaluated(self) -> bool:
        """False where the run did not evaluate (evaluate=false): the test figures are NaN, not measured."""
        return self.test_accuracy == self.test_accuracy


@dataclass(frozen=True, kw_only=True)
class ProfileSample:
    """One profiler-sampled stretch of steps: where the GPU's time went, from its own timeline.

    The *timeline window* (``steps`` steps) records the device's kernels, copies and fills, the
    runtime calls that launched them and the loop's own annotations, but no host ops, so the profiler
    barely slows the host; the *ops window* right after it (``ops_steps`` steps) records every host
    op for ``top_ops``. On a CPU there is one window with every host op, and the GPU figures are None.
    Seconds are over the timeline window's wall time (first step's start to the GPU's end); the shares
    shown to people are per step of the run as it runs unprofiled (``step_shares.step_shares``).
    """

    first_step: int  # the first step the sample touched (a warm-up step runs before the timeline window)
    last_step: int  # the last step of the sample
    device_type: str  # "cuda" or "cpu"
    steps: int  # steps in the timeline window
    window_seconds: float
    images_per_sec: float  # inside the timeline window (the profiler's cost slows it a little)
    host_data_wait_seconds: float  # the host blocked in next(batch), busy GPU or not
    top_ops: tuple[NamedTime, ...] = ()  # host ops by self time over the ops window
    ops_steps: int = 0
    kernel_busy_seconds: Optional[float] = None  # union of kernel intervals, all streams merged
    memcpy_seconds: Optional[float] = None  # copies not hidden behind a kernel
    memset_seconds: Optional[float] = None  # fills not hidden behind a kernel or a copy
    communication_seconds: Optional[float] = None  # NCCL / RCCL kernels not hidden behind compute (issue 31)
    idle_waiting_for_data_seconds: Optional[float] = None  # GPU idle while the host fetched the next batch
    idle_waiting_for_host_seconds: Optional[float] = None  # GPU idle until the host launched more work
    idle_other_seconds: Optional[float] = None  # GPU idle for anything else (syncs, dependencies)
    kernels: Optional[int] = None
    launches: Optional[int] = None  # runtime calls that put a kernel, copy or fill on the device
    median_kernel_seconds: Optional[float] = None
    top_kernels: tuple[NamedTime, ...] = ()
    gpu_unavailable_reason: Optional[str] = None  # why the GPU figures are None
    trace_path: Optional[str] = None  # the timeline window's Chrome trace (.json.gz, opens in Perfetto)
    ops_trace_path: Optional[str] = None  # the ops window's trace (every host op and kernel)
    trace_unavailable_reason: Optional[str] = None
    overhead_seconds: float = 0.0  # wall time the sampler added between steps (syncs, start/stop, analysis, files)
    # True where this torch could not keep host ops out of the timeline window: recording them slows the
    # host, so the GPU's wait for the host reads higher than it is without the profiler.
    timeline_host_ops_recorded: bool = False
    # The run's own step outside any sample (the last few steady log windows before this sample, summed:
    # seconds over steps), per step: the time base of the shares people are shown (step_shares.step_shares).
    # CUPTI slows every launch by microseconds, so a sampled step runs longer than the run's own, and that
    # extra time would read as the GPU waiting for the host. None when no steady window came before the sample.
    unprofiled_step_seconds: Optional[float] = None
    unprofiled_data_wait_seconds: Optional[float] = None  # the host's wait for data per step, same windows
    unprofiled_windows: int = 0  # how many log windows those two are over

    def fraction(self, seconds: Optional[float]) -> Optional[float]:
        if seconds is None or self.window_seconds <= 0:
            return None
        return seconds / self.window_seconds

    @property
    def kernels_per_step(self) -> Optional[float]:
        return self.kernels / self.steps if self.kernels is not None and self.steps else None

    @property
    def launches_per_step(self) -> Optional[float]:
        return self.launches / self.steps if self.launches is not None and self.steps else None


@dataclass(frozen=True, kw_only=True)
class RunEnded:
    status: EndStatus
    summary: RunSummary
    reason: Optional[str] = None  # why it stopped or failed, in words
    kind: Optional[FailureKind] = None
    traceback: Optional[str] = None  # for failures nobody expected (kinds error, data_loader, out_of_memory)


Event = Union[StatusChanged, RunStarted, StepStats, EpochStats, ProfileSample, RunEnded]


@dataclass(frozen=True, kw_only=True)
class MemoryRelease:
    """What release_cached_memory() did."""

    reserved_before: Optional[int]
    reserved_after: Optional[int]
    message: str  # "reserved 2.1 GiB → 0.4 GiB", or why nothing was done
