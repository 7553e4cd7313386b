"""The largest batch that fits: double until CUDA runs out of memory, then binary-search the gap.

Lightning's BatchSizeFinder (``mode="binsearch"``) is the reference: grow the batch by doubling
from the user's size while trials succeed; after the first failure, try the midpoint of the
largest success and the smallest failure, on multiples of 64, until no multiple lies between them. Each trial is a few real
training steps with the user's model, precision, memory format and compile (an ordinary run,
recorded). A trial fails on CUDA out of memory (the engine's RunEnded of kind "out_of_memory",
which has already dropped the run's model and data), or when its peak reserved memory passes the
user's budget; the cached memory is released before every trial, in this same process. Refused on a
CPU device: there, a batch that does not fit does not fail, it swaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generator, Iterator, Optional

from workbench.config import RANGES, RunConfig
from workbench.device_info import DeviceInfo, Probe
from workbench.engine.requests import stopped_by
from workbench.experiments.events import (
    AnyEvent,
    BatchTrial,
    MaxBatchResult,
    SequenceEnded,
    SequenceStatus,
)
from workbench.experiments.members import (
    MemberRunner,
    RunFunction,
    StopFlag,
    open_sequence,
    plan_dict,
    probe_device,
)
from workbench.experiments.recording import RecorderFactory
from workbench.experiments.rounds import Arm, run_rounds
from workbench.formatting import format_bytes

Release = Callable[[], object]
LARGEST_BATCH_SETTING = int(RANGES["batch_size"][1])
# The bisection stops at a multiple of this: the last 63 images of a batch are not worth six more trials,
# and kernels tile batches in such multiples anyway. Below it the search goes on image by image.
BATCH_GRANULE = 64

@dataclass(frozen=True)
class MaxBatchPlan:
    base: RunConfig  # model, precision, memory format, compile, pipeline: as the user will train
    start_batch: Optional[int] = None  # the first size tried (default: the base's batch size)
    steps_per_trial: int = 5
    memory_budget_bytes: Optional[int] = None  # a trial whose peak reserved memory passes this does not fit
    max_trials: int = 30
    name: str = ""

    @property
    def display_name(self) -> str:
        base = self.base
        compiled = f" compiled ({base.compile})" if base.compile != "off" else ""  # "off" is a true string
        extras = (" channels_last" if base.channels_last else "") + compiled
        return self.name or f"max-batch {base.model} {base.precision}{extras}"

def cpu_refusal(device: DeviceInfo) -> Optional[str]:
    """Why the search cannot run on this device (None on a CUDA GPU)."""
    if device.type == "cuda":
        return None
    why = f" ({device.cpu_fallback_reason})" if device.cpu_fallback_reason else ""
    return (
        f"the largest batch that fits is found on a CUDA GPU, and this run would train on the CPU{why}: "
        "a CPU does not run out of memory at a batch size, it swaps"
    )

def plan_problems(plan: MaxBatchPlan, device: DeviceInfo) -> list[str]:
    refusal = cpu_refusal(device)
    if refusal:
        return [refusal]
    problems = plan.base.replace(batch_size=plan.start_batch or plan.base.batch_size).validate(device)
    if plan.steps_per_trial < 2:
        problems.append(f"a trial needs at least 2 steps (got {plan.steps_per_trial})")
    elif not problems:  # a trial is a run of that length: what a run may be (10^12 steps recorded a failed trial)
        trial = plan.base.replace(max_steps=plan.steps_per_trial, log_every=1, epochs=1, evaluate=False)
        problems.extend(f"steps per trial {plan.steps_per_trial:,}: {problem}" for problem in trial.validate(device))
    if plan.memory_budget_bytes is not None and plan.memory_budget_bytes <= 0:
        problems.append("the memory budget must be more than 0")
    if plan.max_trials < 1:
        problems.append(f"max trials must be at least 1 (got {plan.max_trials})")
    return problems

def batch_cap(config: RunConfig) -> tuple[int, str]:
    """The largest batch a trial may use, and what sets it: the training set, or the batch_size setting's range.

    Synthetic data grows with the trial (its size is a setting), so only the range caps it."""
    from workbench.data_check import train_size

    size = None if config.dataset == "synthetic" else train_size(config, count_folder=True)  # off the GUI thread
    if size is not None and size < LARGEST_BATCH_SETTING:
        return size, "training set"
    return LARGEST_BATCH_SETTING, "largest batch setting"

def next_batch(low: int, high: Optional[int], cap: int) -> Optional[int]:
    """The next size to try, given the largest success ``low`` (0: none yet) and the smallest failure
    ``high`` (None: none yet); None when the search is done. Bisection tries multiples of BATCH_GRANULE
    only, and stops when none lies between the two (below the granule: every size)."""
    if high is None:
        candidate = min(low * 2, cap)
        return candidate if candidate > low else None
    granule = BATCH_GRANULE if high > BATCH_GRANULE else 1
    first = (low // granule + 1) * granule  # the smallest multiple above the largest success
    last = (high - 1) // granule * granule  # the largest below the smallest failure
    if first > last:
        return None
    return min(max((low + high) // 2 // granule * granule, first), last)

class _BatchSearch:
    def __init__(self, plan: MaxBatchPlan, stop: StopFlag, runner: MemberRunner, release: Release):
        self.plan, self.stop, self.runner, self.release = plan, stop, runner, release
        self.trials: list[BatchTrial] = []
        self.best: Optional[BatchTrial] = None

    def trial_config(self, batch_size: int) -> RunConfig:
        # No evaluation: a trial measures training memory and speed, and a pass over the test split would
        # cost more than its few steps (and can run out of memory on its own, at twice the batch).
        config = self.plan.base.replace(
            batch_size=batch_size, max_steps=self.plan.steps_per_trial, log_every=1, epochs=1, evaluate=False
        )
        if config.dataset == "synthetic" and config.synthetic_size < batch_size:
            config = config.replace(synthetic_size=batch_size)
        return config

    def run(self) -> Generator[AnyEvent, None, tuple[SequenceStatus, str, Optional[str]]]:
        """Returns (status, what limits the batch, why the search ended early)."""
        cap, cap_reason = batch_cap(self.plan.base)
        size = min(self.plan.start_batch or self.plan.base.batch_size, cap)
        low, high = 0, None
        limited_by = "memory budget" if self.plan.memory_budget_bytes else "memory"
        while True:
            if len(self.trials) >= self.plan.max_trials:
                return "finished", "trials", f"{self.plan.max_trials} trials done before the search closed in"
            if self.stop():
                return "stopped", "stopped", f"stopped by {stopped_by(self.stop)}"
            self.release()  # a failed trial's cache (and a success's) goes back before the next one
            trial = yield from self.try_size(size)
            if trial is None:
                return "stopped", "stopped", f"stopped by {stopped_by(self.stop)}"
            yield trial
            if trial.fits:
                low = size
                self.best = trial
            else:
                high = size
            following = next_batch(low, high, cap)
            if following is None:
                if high is None:  # every size up to the cap fits
                    return "finished", cap_reason, None
                return "finished", limited_by, None
            size = following

    def try_size(self, batch_size: int) -> Generator[AnyEvent, None, Optional[BatchTrial]]:
        arm = Arm(self.trial_config(batch_size), (("batch_size", batch_size),), "trial")
        ran = yield from run_rounds(self.runner, [arm], self.stop, lambda *_: f"max-batch trial, batch_size={batch_size}")
        if ran.status == "stopped":
            return None
        member = ran.members[0]
        summary = member.summary
        reason: Optional[str] = None
        if member.status == "failed":
            if member.kind == "out_of_memory":
                reason = "CUDA out of memory"
            elif member.kind == "diverged":
                reason = None  # the steps ran: memory fitted (the loss is the lr's business, not this search's)
            else:
                raise _TrialError(f"batch_size={batch_size}: {member.reason}")
        budget = self.plan.memory_budget_bytes
        if reason is None and budget is not None:
            reserved = summary.peak_reserved_bytes
            if reserved is not None and reserved > budget:
                reason = f"peak reserved {format_bytes(reserved)} > budget {format_bytes(budget)}"
        trial = BatchTrial(
            batch_size=batch_size,
            fits=reason is None,
            reason=reason,
            run_id=member.run_id,
            images_per_sec=summary.images_per_sec,
            peak_allocated_bytes=summary.peak_allocated_bytes,
            peak_reserved_bytes=summary.peak_reserved_bytes,
            peak_nvml_device_used_bytes=summary.peak_nvml_device_used_bytes,
        )
        self.trials.append(trial)
        return trial

    def result(self, limited_by: str) -> MaxBatchResult:
        return MaxBatchResult(
            max_batch_size=self.best.batch_size if self.best else None,
            limited_by=limited_by,
            best=self.best,
            trials=tuple(self.trials),
        )

class _TrialError(Exception):
    """A trial failed for a reason other than memory: the search cannot tell what fits."""

def run_max_batch(
    plan: MaxBatchPlan,
    stop: StopFlag,
    recorders: Optional[RecorderFactory] = None,
    run_function: Optional[RunFunction] = None,
    probe: Optional[Probe] = None,
    release: Optional[Release] = None,
) -> Iterator[AnyEvent]:
    """Find the largest batch of ``plan.base`` that fits; yield every trial's run and its BatchTrial."""
    device = (probe or probe_device)(plan.base.device)
    runner = yield from open_sequence(
        "max_batch", plan.display_name, plan.base, plan_problems(plan, device),
        plan_dict(plan.base, start_batch=plan.start_batch, steps_per_trial=plan.steps_per_trial,
                  memory_budget_bytes=plan.memory_budget_bytes),
        recorders, run_function, fields=("batch_size",))
    if runner is None:
        return
    sequence_id = runner.sequence_id
    search = _BatchSearch(plan, stop, runner, release or _release_cached_memory)
    try:
        status, limited_by, reason = yield from search.run()
    except _TrialError as error:
        status, limited_by, reason = "failed", "error", str(error)
    finally:
        (release or _release_cached_memory)()
    yield SequenceEnded(kind="max_batch", sequence_id=sequence_id, status=status, result=search.result(limited_by), reason=reason)

def _release_cached_memory() -> object:
    from workbench.engine import release_cached_memory

    return release_cached_memory()
