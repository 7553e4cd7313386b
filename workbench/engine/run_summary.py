"""The figures a run ends with (``RunSummary``, declared once: the history's columns, the CSV, --json and the
findings' facts follow from it), the findings on them (``Finding``) and what a finding's change measured
(``MeasuredChange``). Frozen dataclasses, no torch, no Qt: the GUI and the history use them.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any, Literal, Optional, Union

from workbench.experiments.ab import verdict_text

EndStatus = Literal["finished", "stopped", "failed"]
# Why a run failed: "config" and "data" are the user's input (the CLI exits 2 for them);
# the rest are the run's own trouble (exit 1).
# "data_loader": a DataLoader worker died, ran out of shared memory or raised.
FailureKind = Literal["config", "data", "out_of_memory", "diverged", "data_loader", "error"]


@dataclass(frozen=True, kw_only=True)
class NamedTime:
    """A kernel or host op and the time it took, summed over its calls."""

    name: str
    seconds: float
    count: int


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
        return verdict_text(self.speedup, self.low, self.high, self.verdict, self.trials)

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


# Steady state = every log window after the first (cuDNN autotuning, worker start-up, compilation), less the windows
# a profiler sample slowed (unless no other is left). A run of one window has none: its img/s, data wait and verdict
# are None, for the reason NO_STEADY_WINDOW gives. The run's throughput is one figure, shown under
# one name (images_per_sec, "img/s") in the window, the Runs table, the CLI, the CSV and --json; its definition:
IMAGES_PER_SEC_MEANS = ("img/s (images_per_sec): the samples trained ÷ the seconds they took, over the steady windows "
                        "(every log window after the first, which holds warm-up and compilation)")
NO_STEADY_WINDOW = ("no steady window: the run's steps all fell in its first log window, which holds the warm-up "
                    "and is left out (run more steps than log_every)")
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
    wall_seconds: float = figure("Wall time", "seconds", 0.0)  # the whole run: set-up, training, evaluation
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
    # is a negative remainder, not a measurement, and no finding reads a host wait from the run (step_shares.StepShares).
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

    @property
    def no_steady_state_reason(self) -> Optional[str]:
        """Why a run that trained has no img/s, data wait or verdict (None where it has them, or never trained)."""
        return NO_STEADY_WINDOW if self.steps > 0 and self.images_per_sec is None else None


def figure_fields() -> tuple[Field, ...]:
    """RunSummary's figures (the fields declared with ``figure``), in declaration order."""
    return tuple(item for item in fields(RunSummary) if "label" in item.metadata)
