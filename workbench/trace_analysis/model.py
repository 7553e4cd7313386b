"""What reading a profiler trace gives: the report's dataclasses, shared by reading, findings, CLI and window.

A ``TraceReport`` holds one ``RankReport`` per rank (one file per rank, or one per GPU of a file that holds
several). Shares are fractions (0.25 = 25 %); seconds are seconds. A figure that cannot be read is None, and
``notes`` says why in words. Nothing here imports torch, Qt or the history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


class TraceError(ValueError):
    """One line for the user: why this file cannot be read (the CLI exits 2)."""


class TraceCancelled(TraceError):
    """The reader was asked to stop (``cancelled()`` returned True)."""


@dataclass(frozen=True)
class Fingerprint:
    """A file as it was read: the sha256 of its bytes and their count (the same pass that read the figures)."""

    sha256: str
    size_bytes: int


@dataclass(frozen=True)
class NamedSeconds:
    name: str
    seconds: float
    count: int = 0  # how many events carried the name (0: not counted)


@dataclass(frozen=True)
class QueuedWait:
    """GPU idle time ended by work launched before it began, by that work's name and the call that launched it."""

    name: str
    launched_by: Optional[str]  # the runtime call ("cudaGraphLaunch"); None where the trace holds no launch for it
    seconds: float
    count: int  # the idle spans it ended


@dataclass(frozen=True)
class Finding:
    """One finding, as ``--json`` prints it: what fired, the figure and the threshold, the change to make."""

    kind: str
    text: str
    figure: float
    threshold: float
    change: str


@dataclass(frozen=True)
class ScriptTraits:
    """What the script already does, as its host ops' names say: findings never advise it again."""

    compiled: bool = False  # torch.compile's code runs ("Torch-Compiled Region: 0/0", CompiledFunction)
    optimizer: Optional[str] = None  # the optimizer class stepping ("AdamW" from Optimizer.step#AdamW.step)
    fused_optimizer: bool = False  # its step runs fused (aten::_fused_adamw_, _fused_adam_, _fused_sgd_)
    # The DataLoader's worker processes, as its spans name its iterator: True where every one is
    # _MultiProcessingDataLoaderIter (num_workers > 0), False where every one is _SingleProcessDataLoaderIter
    # (num_workers=0); None without DataLoader spans, or with both (two loaders)
    loader_workers: Optional[bool] = None
    # The waits for data are PyTorch Lightning's fetch spans ([pl][profile]…_next) with no DataLoader span anywhere:
    # its batches come from an iterable of the script's own, where DataLoader's num_workers is not the knob
    lightning_fetch_only: bool = False


UNKNOWN_DEVICE = "unknown"  # a rank's device where the trace names none
NO_GPU_WORK = "no GPU work read from this trace"  # a rank without GPU figures, in words (its notes say why)
# RankReport.exposed_copies in words, as the CLI's text and the window's page say it
EXPOSED_COPIES = "copies and fills not hidden behind compute, by where the bytes go"


@dataclass(frozen=True)
class RankReport:
    rank: int
    device: str  # e.g. "NVIDIA A100-SXM4-80GB", "cuda:1", or UNKNOWN_DEVICE
    steps: int  # ProfilerStep#N found (0: none; then the window is first-to-last GPU event)
    step_seconds: tuple[float, ...]  # each step's time
    step_seconds_median: Optional[float]
    step_seconds_low: Optional[float]
    step_seconds_high: Optional[float]
    # GPU time over the steps (or the GPU window without steps); they sum to 1.
    # None (not 0) on a CPU-only trace, which has no GPU time to share out; ``notes`` says so.
    compute_share: Optional[float]
    communication_share: Optional[float]  # NCCL / RCCL kernels not hidden behind compute
    memory_share: Optional[float]  # copies and fills not hidden behind compute or communication
    idle_share: Optional[float]
    # Idle time by cause, as shares of idle (sum to 1; None where the GPU was never idle: a split of no time is no
    # figure).
    idle_for_data_share: Optional[float]
    idle_for_host_share: Optional[float]
    idle_kernel_wait_share: Optional[float]
    idle_other_share: Optional[float]
    dataloader_share: Optional[float]  # host time in enumerate(DataLoader)#…__next__ ÷ step time (TensorBoard plugin)
    gpu_span: Optional[dict[str, float]]  # {idle_share, compute_share, non_compute_share} over HTA's window
    top_kernels: tuple[NamedSeconds, ...]
    top_host_ops: tuple[NamedSeconds, ...]
    sync_calls: tuple[NamedSeconds, ...]  # sync runtime time, named "<calling host op> → <sync call>"
    runtime_calls: dict[str, float]  # seconds per runtime/driver call name
    kernels: int
    notes: tuple[str, ...]  # what could not be read, in words
    findings: tuple[Finding, ...] = ()  # filled by script_findings.findings_for(rank_report)
    # Added by 27a (defaults, so hand-made reports in tests need not set them):
    window_seconds: float = 0.0  # the time the shares are over (the steps, or first-to-last GPU event)
    device_index: Optional[int] = None  # the GPU's index in the trace (None: no device work)
    gpu_span_window_ns: Optional[tuple[int, int]] = None  # HTA's window on the trace's clock
    data_wait_seconds: float = 0.0  # host time blocked on the next batch (DataLoader __next__ or our annotation)
    data_spans: int = 0  # the spans data_wait_seconds is read from (0: the trace has none, so no figure of it)
    launches: int = 0  # runtime calls that put device work on the GPU
    cpu_only: bool = False  # no device work was read (a CPU-only trace, or its device events unreadable): no GPU figures
    # HTA's idle split, replayed ({host_wait, kernel_wait, other}: each stream's gaps on their own, summed), beside
    # ours over the merged streams: see docs/gpu-time.md for which a user can act on.
    per_stream_idle_split: Optional[dict[str, float]] = None
    # gpu_span with HTA 0.5.0's two rules replayed (work launched outside the steps dropped, µs rounding):
    # equals HTA's own figures; gpu_span differs from it by exactly those rules (docs/gpu-time.md).
    gpu_span_as_hta: Optional[dict[str, float]] = None
    traits: ScriptTraits = ScriptTraits()
    top_copies: tuple[NamedSeconds, ...] = ()  # copies and fills by name ("Memcpy HtoD (Pageable -> Device)")
    # copy and fill time no kernel hides, by where the bytes go (kineto.copy_direction: "to the GPU", …), most first
    exposed_copies: tuple[NamedSeconds, ...] = ()
    # Runtime calls the host was in while the GPU sat idle waiting for it (HTA's host wait), by name, the longest
    # first: what the host did instead of launching (cudaFree, a pageable cudaMemcpyAsync, cudaLaunchKernel itself)
    host_wait_calls: tuple[NamedSeconds, ...] = ()
    host_wait_seconds: Optional[float] = None  # the idle time waiting for the host, over the steps
    # The "other" idle (ended by work launched before it began) whose launch call had returned: by the work that
    # waited and the call that launched it, the longest first; and all of that time
    queued_waits: tuple[QueuedWait, ...] = ()
    queued_wait_seconds: float = 0.0
    # The rest of the "other" idle: its launch call began before the GPU went idle and was still running in the gap
    # (the host inside a launch that blocked), by the call; and all of that time
    blocked_launches: tuple[NamedSeconds, ...] = ()
    blocked_launch_seconds: float = 0.0
    # The time in communication in each step, in the steps' order: a GPU's NCCL/RCCL kernels not hidden behind compute
    # (as communication_share), or on a CPU-only rank the time some collective was under way on the host (gloo's and
    # c10d's ops on any thread, merged: communication_wait.COLLECTIVE_HOST_OPS). The ranks' wait for one another,
    # step by step (communication_wait). None without steps, and on a CPU-only rank whose trace holds no collective
    communication_by_step: Optional[tuple[float, ...]] = None
    file: str = ""  # the file the rank was read from (a folder's reports name it)
    compute_capability: Optional[tuple[int, int]] = None  # the GPU's (major, minor), where deviceProperties has it
    # False where the file names no rank (no distributedInfo, no rank-N in its name): its number is its place in its
    # folder, or 0 where it is the only file read. A folder's such files are not known to be one job's ranks (a
    # folder of unrelated traces), so no straggler is named among them
    rank_named: bool = True
    # The torch.profiler options that lengthen the host's time the file says were on (with_stack, record_shapes, …)
    profiler_options: tuple[str, ...] = ()


@dataclass(frozen=True)
class TraceReport:
    path: str
    ranks: tuple[RankReport, ...]
    notes: tuple[str, ...] = ()
    files: tuple[str, ...] = field(default=())  # the files read, one per rank (a folder lists each)
