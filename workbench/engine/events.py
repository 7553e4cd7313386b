"""What the engine yields: small frozen dataclasses, no tensors, no Qt.

A run yields, in order: zero or more ``StatusChanged`` (what it is doing before training),
``RunStarted`` (once settings, device and data are known), then ``StepStats`` every
``log_every`` steps, ``EpochStats`` after each epoch and a ``ProfileSample`` after each
profiler-sampled window, and always exactly one final ``RunEnded`` (finished, stopped or
failed, with the run's summary).
Importing this module must stay cheap (no torch): the GUI and the history use it.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any, Literal, Optional, Union

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo  # re-exported: events carry it

EndStatus = Literal["finished", "stopped", "failed"]
# Why a run failed: "config" and "data" are the user's input (the CLI exits 2 for them);
# the rest are the run's own trouble (exit 1).
# "data_loader": a DataLoader worker died, ran out of shared memory or raised.
FailureKind = Literal["config", "data", "out_of_memory", "diverged", "data_loader", "error"]


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


@dataclass(frozen=True, kw_only=True)
class RankStepStats:
    """One process's own figures for a StepStats window of a multi-process (data-parallel) run."""

    rank: int
    samples: int  # images this rank trained on in the window
    images_per_sec: float  # this rank's samples / its window seconds
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
    images_per_sec: float  # window samples / window wall seconds
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

    @property
    def world_size(self) -> int:
        return max(1, len(self.ranks))

    @property
    def data_wait_fraction(self) -> float:
        return self.data_wait_seconds / self.window_seconds if self.window_seconds > 0 else 0.0


@dataclass(frozen=True, kw_only=True)
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
    memory: MemorySnapshot = field(default_factory=MemorySnapshot)  # multi-process: each figure the highest rank's
    rank_memory: tuple[MemorySnapshot, ...] = ()  # each rank's own, by rank; () for a one-process run

    @property
    def evaluated(self) -> bool:
        """False where the run did not evaluate (evaluate=false): the test figures are NaN, not measured."""
        return self.test_accuracy == self.test_accuracy


@dataclass(frozen=True, kw_only=True)
class NamedTime:
    """A kernel or host op and the time it took, summed over its calls."""

    name: str
    seconds: float
    count: int


@dataclass(frozen=True, kw_only=True)
class ProfileSample:
    """One profiler-sampled stretch of steps: where the GPU's time went, from its own timeline.

    The *timeline window* (``steps`` steps) records the device's kernels, copies and fills, the
    runtime calls that launched them and the loop's own annotations, but no host ops, so the profiler
    barely slows the host; the *ops window* right after it (``ops_steps`` steps) records every host
    op for ``top_ops``. On a CPU there is one window with every host op, and the GPU figures are None.
    Seconds are over the timeline window's wall time (first step's start to the GPU's end); the shares
    shown to people are per step of the run as it runs unprofiled (``timeline.step_shares``).
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
    # seconds over steps), per step: the time base of the shares people are shown (timeline.step_shares).
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


# What a comparison of two settings' speeds decided (experiments/ab.py).
Verdict = Literal["faster", "slower", "within_noise"]


@dataclass(frozen=True, kw_only=True)
class MeasuredChange:
    """What a finding's change did when it was measured on this device against these settings: interleaved
    short runs of each (experiments/verify.py, compared by experiments/ab.py), stored in the history.

    ``speedup`` is median(changed) ÷ median(baseline) images/sec, ``low``–``high`` its interval (None without
    one), ``verdict`` faster / slower / within_noise as the comparison decided it."""

    speedup: float
    low: Optional[float]
    high: Optional[float]
    verdict: Verdict
    baseline_trials: int
    changed_trials: int

    @property
    def trials(self) -> str:
        return f"{self.baseline_trials}+{self.changed_trials} trials"

    def describe(self) -> str:
        """"measured 1.31×: faster (1.25–1.37, 3+3 trials)": the words of ABResult.describe."""
        interval = (f"{self.low:.2f}–{self.high:.2f}, " if self.low is not None and self.high is not None
                    else "no interval: ")
        words = {"faster": "faster", "slower": "slower here, not recommended",
                 "within_noise": "within the noise"}[self.verdict]
        return f"measured {self.speedup:.2f}×: {words} ({interval}{self.trials})"

    def to_dict(self) -> dict:
        return {"speedup": self.speedup, "low": self.low, "high": self.high, "verdict": self.verdict,
                "baseline_trials": self.baseline_trials, "changed_trials": self.changed_trials}

    @classmethod
    def from_dict(cls, data: Any) -> Optional["MeasuredChange"]:
        """None for anything that is not a stored measurement (an older or damaged record)."""
        try:
            return cls(speedup=float(data["speedup"]), low=_optional_float(data.get("low")),
                       high=_optional_float(data.get("high")), verdict=data["verdict"],
                       baseline_trials=int(data["baseline_trials"]), changed_trials=int(data["changed_trials"]))
        except (TypeError, KeyError, ValueError, AttributeError):
            return None


def _optional_float(value: Any) -> Optional[float]:
    return None if value is None else float(value)


@dataclass(frozen=True, kw_only=True)
class Finding:
    """What bounds a run, or what it leaves unused, and the one setting to change for it.

    ``figure`` is the measured value that triggered the finding (named by ``figure_name``) and
    ``threshold`` the value it was held against; ``field``/``value`` is the RunConfig setting to
    change (None when no setting helps). ``headline`` is the problem in one sentence; ``text`` adds
    the remedy.
    """

    kind: str  # diverged, input-bound, launch-bound, communication-bound, compute-bound, model-bound, memory-headroom, unmeasured, balanced
    headline: str
    text: str
    figure: Optional[float]
    figure_name: str
    threshold: Optional[float] = None
    field: Optional[str] = None
    value: Union[str, int, float, bool, None] = None
    # What this change did when measured here (the history's measured changes, findings.with_measured_changes);
    # None if never.
    measured: Optional[MeasuredChange] = None

    def to_dict(self) -> dict:
        return {
            "kind": self.kind, "headline": self.headline, "text": self.text, "figure": self.figure,
            "figure_name": self.figure_name, "threshold": self.threshold, "field": self.field, "value": self.value,
            "measured": self.measured.to_dict() if self.measured is not None else None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Finding":
        measured = data.get("measured")
        stored: dict[str, Any] = {name: data.get(name) for name in (
            "kind", "headline", "text", "figure", "figure_name", "threshold", "field", "value")}
        return cls(**stored, measured=MeasuredChange.from_dict(measured) if measured is not None else None)


# Steady state = every log window after the first (cuDNN autotuning, worker start-up, compilation), unless the
# first is the only one, less the windows a profiler sample slowed. The run's throughput is one figure, shown under
# one name (images_per_sec, "img/s") in the window, the Runs table, the CLI, the CSV and --json; its definition:
IMAGES_PER_SEC_MEANS = ("img/s (images_per_sec): the samples trained ÷ the seconds they took, over the steady windows "
                        "(every log window after the first, which holds warm-up and compilation)")
# What a run's own interval covers: how its windows varied, not how much the next run of the same settings may differ
# (a run on a quiet machine read 1,055–1,137 img/s; the next three runs' median was 1,376).
WITHIN_ONE_RUN = ("within one run: the 90 % interval of its steady windows, not run-to-run noise (the next run may "
                  "differ by more; --repeats 3 or more measures that)")

# How a figure reads (history/metrics.py formats each kind): 1,234 img/s, 12.5 %, 1.2 GiB, 0.1234, 2 m 5 s.
# "efficiency" is a fraction that reads "ceiling stale — measure again" above 100 %.
FigureKind = Literal["rate", "count", "fraction", "efficiency", "bytes", "loss", "seconds", "text"]


def figure(label: str, kind: FigureKind, default: Any = None, *, timeline: bool = False) -> Any:
    """A RunSummary field that is a figure runs are compared by. ``label`` heads its column in the app and the
    CLI (its field name is its name in the history, the CSV and --json); ``timeline``: one of the
    profiler-sampled GPU timeline's figures (the --json ``profile`` object holds those)."""
    return field(default=default, metadata={"label": label, "kind": kind, "timeline": timeline})


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """The figures a run is compared by: printed by the CLI, stored in the history, exported to CSV.

    This declaration is the one list of them: the history's columns (history/schema.py), the CSV and the
    comparison (history/metrics.py), --json (cli/summary_json.py) and the findings' facts (findings.RunFacts)
    are derived from its fields, and tests/history/test_summary_carried.py fails for a figure one of them drops.
    """

    status: EndStatus
    reason: Optional[str] = None
    failure_kind: Optional[FailureKind] = None
    # The run's one throughput figure (IMAGES_PER_SEC_MEANS says what it is, wherever it is shown).
    images_per_sec: Optional[float] = figure("Img/s", "rate")
    # Its 90 % interval within this run (WITHIN_ONE_RUN), from a block bootstrap of the steady windows
    # (engine/spread.py); None with < 3 windows.
    images_per_sec_low: Optional[float] = figure("Img/s low", "rate")
    images_per_sec_high: Optional[float] = figure("Img/s high", "rate")
    test_accuracy: Optional[float] = figure("Test acc", "fraction")
    final_loss: Optional[float] = figure("Final loss", "loss")
    data_wait_fraction: Optional[float] = figure("Data wait", "fraction")  # of the steady state's wall time
    device_span_fraction: Optional[float] = figure("Event span", "fraction")  # event-pair spans / wall time
    peak_allocated_bytes: Optional[int] = figure("Peak alloc", "bytes")
    peak_reserved_bytes: Optional[int] = figure("Peak reserved", "bytes")
    # Highest NVML readings at log points (sampled, not true peaks): device-wide "used" (every process's memory
    # and CUDA contexts), and this process's own.
    peak_nvml_device_used_bytes: Optional[int] = figure("Peak NVML", "bytes")
    peak_nvml_process_used_bytes: Optional[int] = figure("Peak NVML (this process)", "bytes")
    # The training process's highest resident memory (RSS) at log points: the memory figure a CPU run has.
    peak_process_rss_bytes: Optional[int] = figure("Peak RSS (process)", "bytes")
    skipped_optimizer_steps: int = figure("Skipped steps (fp16)", "count", 0)  # GradScaler skips (inf/NaN grads)
    wall_seconds: float = figure("Train time", "seconds", 0.0)
    steps: int = figure("Steps", "count", 0)
    samples_seen: int = figure("Images seen", "count", 0)
    # An image folder's files the run left out because they cannot be read as images (skip_bad_images).
    skipped_bad_images: int = figure("Bad images skipped", "count", 0)
    epochs_completed: int = figure("Epochs", "count", 0)
    device_type: Optional[str] = figure("Device type", "text")  # "cuda" or "cpu"
    device_name: Optional[str] = figure("Device", "text")
    torch_version: Optional[str] = figure("Torch", "text")
    # The profiler-sampled timeline, over every sample's timeline window (see ProfileSample). The GPU
    # figures are None without a sample, and on a CPU (gpu_timeline_unavailable_reason says why).
    profile_samples: int = figure("Profile samples", "count", 0)
    kernel_busy_fraction: Optional[float] = figure("Kernel busy", "fraction", timeline=True)
    memcpy_fraction: Optional[float] = figure("Memcpy", "fraction", timeline=True)
    memset_fraction: Optional[float] = figure("Memset", "fraction", timeline=True)
    # NCCL / RCCL kernels (gradient all-reduce) not hidden behind compute: apart from kernel busy, as HTA keeps them.
    communication_fraction: Optional[float] = figure("Communication", "fraction", timeline=True)
    idle_waiting_for_data_fraction: Optional[float] = figure("Idle: data", "fraction", timeline=True)
    idle_waiting_for_host_fraction: Optional[float] = figure("Idle: host", "fraction", timeline=True)
    idle_other_fraction: Optional[float] = figure("Idle: other", "fraction", timeline=True)
    kernels_per_step: Optional[float] = figure("Kernels/step", "count", timeline=True)
    launches_per_step: Optional[float] = figure("Launches/step", "count", timeline=True)
    median_kernel_seconds: Optional[float] = figure("Median kernel (s)", "seconds", timeline=True)  # of the samples' medians
    gpu_timeline_unavailable_reason: Optional[str] = figure("No timeline because", "text")
    # Set when a sample's base step (the run's own) was shorter than the GPU's work per step in it: its host wait
    # is a negative remainder, not a measurement, and no finding reads a host wait from the run (timeline.StepShares).
    timeline_flag: Optional[str] = figure("Timeline flag", "text")
    top_ops: tuple[NamedTime, ...] = ()
    top_kernels: tuple[NamedTime, ...] = ()
    trace_paths: tuple[str, ...] = ()
    # torch.compile: the first step's wall time (the compilation; left out of images/sec with the warm-up window)
    # and, for compile=reduce-overhead, whether the CUDA graphs were used: "on", or "skipped: <torch's reason>".
    compile_seconds: Optional[float] = figure("Compile time", "seconds")
    cuda_graphs: Optional[str] = figure("CUDA graphs", "text")
    # The compute ceiling for these settings (model on on-device batches) and images_per_sec ÷ it.
    ceiling_images_per_sec: Optional[float] = figure("Ceiling img/s", "rate")
    pipeline_efficiency: Optional[float] = figure("Efficiency", "efficiency")
    findings: tuple[Finding, ...] = ()  # ranked, most costly first
    # NVML's telemetry over the steady windows, each the median of its readings (rank 0's GPU in a multi-process
    # run). NVML's "utilisation" is the share of time any kernel ran, however few SMs it used; GPM's SM activity
    # says how much of the GPU was at work (Hopper and newer).
    nvml_kernel_time_fraction: Optional[float] = figure("Any kernel ran (NVML)", "fraction")
    power_watts: Optional[float] = figure("Power (W)", "count")
    sm_clock_mhz: Optional[float] = figure("SM clock (MHz)", "count")
    clock_event_reasons: Optional[str] = figure("Clocks held by", "text")  # the reasons seen, "none" if none
    pcie_rx_bytes_per_sec: Optional[float] = figure("PCIe rx/s", "bytes")
    pcie_tx_bytes_per_sec: Optional[float] = figure("PCIe tx/s", "bytes")
    sm_activity_fraction: Optional[float] = figure("SM activity (GPM)", "fraction")
    sm_occupancy_fraction: Optional[float] = figure("SM occupancy (GPM)", "fraction")
    tensor_activity_fraction: Optional[float] = figure("Tensor activity (GPM)", "fraction")
    dram_bandwidth_fraction: Optional[float] = figure("DRAM bandwidth (GPM)", "fraction")
    telemetry_unavailable_reason: Optional[str] = figure("No telemetry because", "text")
    gpm_unavailable_reason: Optional[str] = figure("No GPM because", "text")
    # Processes that trained together; the peaks above are then the highest rank's.
    world_size: int = figure("Processes", "count", 1)
    # Each rank's own peaks, by rank (() for a one-process run); None where a rank's figure was unreadable.
    rank_peak_allocated_bytes: tuple[Optional[int], ...] = ()
    rank_peak_reserved_bytes: tuple[Optional[int], ...] = ()
    rank_peak_nvml_device_used_bytes: tuple[Optional[int], ...] = ()

    @property
    def verdict(self) -> Optional[str]:
        """What bounds this run, in one plain sentence: the first finding's headline (None before any)."""
        return self.findings[0].headline if self.findings else None


def figure_fields() -> tuple[Field, ...]:
    """RunSummary's figures (the fields declared with ``figure``), in declaration order."""
    return tuple(item for item in fields(RunSummary) if "label" in item.metadata)


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
