"""What a sequence of runs yields besides each member's own engine events: small frozen dataclasses.

A sequence (a sweep, a search for faster settings, a max-batch search) yields, in order:
``SequenceStarted``; for each member ``MemberStarted``, that run's engine events (StatusChanged,
RunStarted, StepStats, EpochStats, RunEnded, exactly as ``engine.run`` yields them) and
``MemberEnded``; the search's own findings as they land (``TrialResult``, ``BestSoFar``,
``BatchTrial``); and always exactly one final ``SequenceEnded`` with the result. Each run, alone or a
member, is announced by ``RunRecorded`` when the history has it (``RecordingFailed`` when it could not).
No torch, no Qt: the GUI and the CLI read these alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Sequence, Union

from workbench.config import RunConfig
from workbench.engine.events import Event
from workbench.engine.run_summary import RunSummary
from workbench.experiments.ab import ABResult, Verdict
from workbench.formatting import format_setting

SequenceKind = Literal["sweep", "tune", "max_batch", "repeats", "verify"]
# finished: ran to its end; stopped: the user stopped it; failed: refused before anything ran (bad input),
# or ended by an error that is not one member's own trouble.
SequenceStatus = Literal["finished", "stopped", "failed"]

# What became of one change the search for faster settings tried (TrialResult.outcome).
TrialOutcome = Literal["kept", "slower", "within_noise", "failed"]

# A member's settings that distinguish it: (field, value) pairs in the order they were swept or changed.
Values = tuple[tuple[str, Any], ...]


def values_label(values: Values) -> str:
    """"num_workers=2, precision=bf16"."""
    return ", ".join(f"{name}={format_setting(value)}" for name, value in values)



@dataclass(frozen=True, kw_only=True)
class SequenceStarted:
    kind: SequenceKind
    sequence_id: Optional[int]  # the sequence's id in the history (None when not recorded)
    name: str
    base: RunConfig
    planned_members: Optional[int] = None  # known for a sweep; a search decides as it goes
    fields: tuple[str, ...] = ()  # the settings a sweep varies (for the view's columns)


@dataclass(frozen=True, kw_only=True)
class MemberStarted:
    index: int  # 0-based, in the order the members run
    config: RunConfig
    values: Values
    run_id: Optional[int]  # in the history (None when not recorded)
    purpose: str = ""  # "", or for a search what the run is for: "calibration", "best" (the best so far), "trial"


@dataclass(frozen=True, kw_only=True)
class MemberEnded:
    index: int
    config: RunConfig
    values: Values
    run_id: Optional[int]  # None when not recorded, or when the run was refused before it started
    status: str  # finished, stopped, failed
    summary: RunSummary
    reason: Optional[str] = None
    kind: Optional[str] = None  # the failure kind: out_of_memory, diverged, error, config, data
    purpose: str = ""

    @property
    def images_per_sec(self) -> Optional[float]:
        return self.summary.images_per_sec

    @property
    def whole_epochs(self) -> bool:
        """The member ran whole epochs (no max_steps), so its test accuracy compares with the others'."""
        return self.config.max_steps is None and self.summary.epochs_completed > 0


@dataclass(frozen=True, kw_only=True)
class RunRecorded:
    """A run (alone, or a member of a sequence) has its record in the history: "#7 synthetic: …".

    Yielded before the run's own engine events, so a view can name the run as the history does."""

    run_id: int
    label: str


@dataclass(frozen=True, kw_only=True)
class RecordingFailed:
    """The history could not take this run (or the rest of it): the run goes on, unrecorded from here."""

    run_id: Optional[int]  # None when the record could not even be created
    reason: str


@dataclass(frozen=True, kw_only=True)
class TrialResult:
    """One change tried by the search for faster settings: measured interleaved with the best so far
    (experiments/ab.py) and decided: kept only when the comparison's verdict is faster."""

    trial: int  # 1-based
    knob: str  # "num_workers", "placement", ...
    changes: dict[str, Any]  # the settings this trial changed against the best so far
    images_per_sec: Optional[float]  # median of its measurements; None when it failed
    measurements: tuple[float, ...]
    run_ids: tuple[Optional[int], ...]
    outcome: TrialOutcome
    reason: Optional[str] = None  # why it failed
    comparison: Optional[ABResult] = None  # against the best so far; None when the trial failed
    baseline_run_ids: tuple[Optional[int], ...] = ()  # the best settings' runs in this comparison

    @property
    def baseline_images_per_sec(self) -> Optional[float]:
        """The best so far's median in this comparison: what ``speedup`` divides by. Not the median of all its runs
        across comparisons, which ran at other times (a machine slower later would set this row's change against
        a figure its own comparison never measured)."""
        return self.comparison.baseline_images_per_sec if self.comparison else None

    @property
    def speedup(self) -> Optional[float]:
        return self.comparison.speedup if self.comparison else None

    @property
    def speedup_low(self) -> Optional[float]:
        return self.comparison.speedup_low if self.comparison else None

    @property
    def speedup_high(self) -> Optional[float]:
        return self.comparison.speedup_high if self.comparison else None

    @property
    def verdict(self) -> Optional[Verdict]:
        return self.comparison.verdict if self.comparison else None


@dataclass(frozen=True, kw_only=True)
class BestSoFar:
    config: RunConfig
    images_per_sec: float
    changes: dict[str, Any]  # against where the search started
    speedup: float  # images_per_sec ÷ the start's


@dataclass(frozen=True, kw_only=True)
class BatchTrial:
    """One batch size tried by the max-batch search."""

    batch_size: int
    fits: bool
    reason: Optional[str]  # why it did not fit: "CUDA out of memory", "peak reserved 21 GiB > budget 20 GiB"
    run_id: Optional[int]
    images_per_sec: Optional[float]
    peak_allocated_bytes: Optional[int]
    peak_reserved_bytes: Optional[int]
    peak_nvml_device_used_bytes: Optional[int]


# -- results ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class SweepResult:
    members: tuple[MemberEnded, ...]
    repeats: int = 1  # runs of each value (a "repeats" sequence: of its one setting), interleaved


def chained_speedup(trials: Sequence[TrialResult]) -> float:
    """The best settings' speedup over the start: each kept change's speedup, measured interleaved against the best
    before it, multiplied (1.0 with none kept). The medians of every run of the start and of the best are not set
    against each other: those runs come from comparisons made at different times, when the machine ran at other
    speeds (both sides of a later comparison running twice as fast read a 1.05× gain as 2.10×)."""
    gain = 1.0
    for trial in trials:
        if trial.outcome == "kept" and trial.comparison is not None and trial.comparison.speedup:
            gain *= trial.comparison.speedup
    return gain


@dataclass(frozen=True, kw_only=True)
class TuneResult:
    start_config: RunConfig
    start_images_per_sec: Optional[float]
    best_config: RunConfig
    best_images_per_sec: Optional[float]
    trials: tuple[TrialResult, ...]
    passes: int
    stop_reason: str  # why the search ended: "a full pass gained 1.2 % (< 3 %)", "time budget of 300 s spent"
    trial_steps: Optional[int] = None
    trials_per_side: int = 3  # each comparison measured the best and the change this many times each

    @property
    def speedup(self) -> Optional[float]:
        """Best ÷ start: the kept changes' measured speedups multiplied (``chained_speedup``); None unmeasured."""
        if self.start_images_per_sec and self.best_images_per_sec:
            return chained_speedup(self.trials)
        return None

    @property
    def best_changes(self) -> dict[str, Any]:
        return changed_fields(self.start_config, self.best_config)

    @property
    def changes_tried(self) -> int:
        return len(self.trials)


@dataclass(frozen=True, kw_only=True)
class MaxBatchResult:
    max_batch_size: Optional[int]  # None when not even the smallest batch tried fits
    limited_by: str  # "memory", "memory budget", "training set", "largest batch setting", "trials"
    best: Optional[BatchTrial]
    trials: tuple[BatchTrial, ...] = field(default_factory=tuple)

    @property
    def fastest(self) -> Optional[BatchTrial]:
        """The fitting trial with the most images/sec (None when no fitting trial has a rate)."""
        timed = [(trial.images_per_sec, trial) for trial in self.trials
                 if trial.fits and trial.images_per_sec is not None]
        return max(timed, key=lambda rated: rated[0])[1] if timed else None


# At the very edge of memory the caching allocator frees and retries (a device sync) inside the steps:
# on an H100, resnet18 bf16 at batch 34,304 (77.4 GiB peak) ran at 3,497 images/s where 33,792 ran at
# 30,873. A largest batch this much slower than the fastest fitting one is worth saying (the retries
# are the likely cause, not a measured one: a trial's few steps do not count them).
EDGE_SLOWDOWN = 0.8


def edge_note(result: MaxBatchResult) -> Optional[str]:
    """A sentence when the largest fitting batch trains much slower than a smaller one did (else None)."""
    best, fastest = result.best, result.fastest
    if best is None or fastest is None or best.images_per_sec is None or fastest is best:
        return None
    if fastest.images_per_sec is None:  # (the fastest has a rate)
        return None
    if best.images_per_sec >= EDGE_SLOWDOWN * fastest.images_per_sec:
        return None
    return (f"at the edge of memory it trains at {best.images_per_sec:,.0f} images/s, "
            f"{best.images_per_sec / fastest.images_per_sec:.0%} of what batch {fastest.batch_size:,} "
            f"did ({fastest.images_per_sec:,.0f} images/s), most likely because the allocator is short of room "
            f"there; a batch near {fastest.batch_size:,} trains faster")


@dataclass(frozen=True, kw_only=True)
class ChangeVerified:
    """One change measured against the baseline by interleaved trials (verify)."""

    text: str  # what was verified, in words: the finding's text, or "set num_workers=4"
    field: str
    value: Any
    comparison: ABResult
    baseline_run_ids: tuple[Optional[int], ...]  # the trials' runs, in the order they ran
    changed_run_ids: tuple[Optional[int], ...]
    reason: Optional[str] = None  # why a trial of the change failed (its later trials were not run)
    decided: bool = True  # False: the trial budget ran out with the interval still straddling the noise band

    @property
    def undecided_text(self) -> Optional[str]:
        """"too noisy here to tell: 8+8 trials, the interval spans 0.84–1.20"; None when the interval decided."""
        comparison = self.comparison
        if self.decided or comparison.speedup_low is None or comparison.speedup_high is None:
            return None
        return (f"too noisy here to tell: {comparison.trials}, the interval spans "
                f"{comparison.speedup_low:.2f}–{comparison.speedup_high:.2f}")


@dataclass(frozen=True, kw_only=True)
class VerifyResult:
    base: RunConfig  # the settings verified against (the run's own)
    device_type: str
    device_name: str
    trial_steps: int
    changes: tuple[ChangeVerified, ...]
    busy: Optional[str] = None  # "this machine is busy: …" (the baseline's own spread, the load), None when quiet


SequenceResult = Union[SweepResult, TuneResult, MaxBatchResult, VerifyResult]


@dataclass(frozen=True, kw_only=True)
class SequenceEnded:
    kind: SequenceKind
    sequence_id: Optional[int]
    status: SequenceStatus
    result: Optional[SequenceResult]  # None when refused before anything ran
    reason: Optional[str] = None  # why it stopped or failed, in words
    problems: tuple[str, ...] = ()  # bad input: every problem, nothing ran


SequenceEvent = Union[SequenceStarted, MemberStarted, MemberEnded, TrialResult, BestSoFar, BatchTrial, SequenceEnded,
                      RunRecorded, RecordingFailed]
# What a sequence generator yields: the engine's events of each member, and its own.
AnyEvent = Union[Event, SequenceEvent]


def changed_fields(before: RunConfig, after: RunConfig) -> dict[str, Any]:
    """{field: new value} for every setting that differs."""
    old, new = before.to_dict(), after.to_dict()
    return {name: value for name, value in new.items() if old[name] != value}
