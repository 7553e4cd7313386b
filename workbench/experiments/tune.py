"""Find faster settings: coordinate descent over the knobs that change speed, not what is learned.

From the user's settings, each knob's values are tried with the others fixed (one short run each,
measuring steady-state images/sec after the warm-up window). A change is kept only when it beats the
best so far by more than the measured noise; a result within the noise is measured again before it
is decided. The search stops when a full pass over the knobs gains less than 3 %, when the time
budget is spent, or when the user stops it. Batch size, lr and accumulation are left alone unless
the plan allows them. Every trial is an ordinary run in the history, tagged with the search.

A trial is as long as the plan's ``trial_steps``, else the settings' own ``max_steps``, else sized by a
first short calibration run. A budget that cannot fit the start settings twice and one change is
refused: before anything runs where the trial length alone says so, else as soon as the first run
has shown how long a trial takes here (start-up and evaluation included), with the budget it needs.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterator, Optional

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo, Probe
from workbench.engine.requests import stopped_by
from workbench.experiments.events import (
    AnyEvent,
    BestSoFar,
    MemberEnded,
    SequenceEnded,
    SequenceStarted,
    TrialResult,
    TuneResult,
    changed_fields,
    values_label,
)
from workbench.experiments.members import (
    MemberRunner,
    RunFunction,
    StopFlag,
    default_run_function,
    plan_dict,
    probe_device,
)
from workbench.experiments.recording import NoRecording, RecorderFactory

# The knobs, in the order a pass tries them: where the input work runs first (usually the largest
# effect), then the model's arithmetic, then the loader's fine settings, compile last (slow to try).
KNOBS: tuple[str, ...] = (
    "placement",  # pipeline and augmentation placement together: augment=cpu needs the dataloader
    "precision",
    "channels_last",
    "num_workers",
    "pin_memory",
    "non_blocking",
    "persistent_workers",
    "prefetch_factor",
    "fused_optimizer",
    "compile",
)
# Settings that change what is learned: searched only when the user allows them. lr is not a speed
# knob; allowed, it follows the batch size (the linear scaling rule).
OPTIONAL_KNOBS: tuple[str, ...] = ("batch_size", "accumulation_steps")
ALLOWABLE: tuple[str, ...] = ("batch_size", "lr", "accumulation_steps")

CALIBRATION_STEPS = 12  # a first short run of the start settings sizes the trials
RUNS_FOR_ONE_CHANGE = 3  # the start settings twice (their noise), then one change
WINDOWS_PER_TRIAL = 8  # log windows per trial: the first (warm-up) is left out of its images/sec
MIN_TRIAL_STEPS = 16
MAX_TRIAL_STEPS = 20_000
PREFETCH_VALUES = (2, 4, 8)
ACCUMULATION_VALUES = (1, 2, 4)

Clock = Callable[[], float]


@dataclass(frozen=True)
class TunePlan:
    base: RunConfig
    allow: frozenset[str] = frozenset()  # of ALLOWABLE: batch_size, lr, accumulation_steps
    knobs: Optional[tuple[str, ...]] = None  # only these knobs (default: every one that applies here)
    budget_seconds: Optional[float] = None  # no new trial starts once this much time has passed
    trial_steps: Optional[int] = None  # steps per trial; None: sized from a calibration run to trial_seconds
    trial_seconds: float = 4.0
    min_pass_gain: float = 0.03  # a pass that gains less than this ends the search
    noise_floor: float = 0.02  # the smallest run-to-run spread assumed, however quiet two runs were
    max_passes: int = 3
    name: str = ""

    @property
    def display_name(self) -> str:
        if self.name:
            return self.name
        base = self.base
        return f"tune {base.model}, batch {base.batch_size}, {base.precision}"

    def trial_length(self) -> Optional[int]:
        """Steps per trial when the plan says (trial_steps, else the settings' max_steps); None: calibrated."""
        return self.trial_steps if self.trial_steps is not None else self.base.max_steps

    def searched_knobs(self) -> tuple[str, ...]:
        chosen = self.knobs if self.knobs is not None else KNOBS
        extra = tuple(knob for knob in OPTIONAL_KNOBS if knob in self.allow and knob not in chosen)
        return tuple(chosen) + extra


def plan_problems(plan: TunePlan, device: DeviceInfo) -> list[str]:
    from workbench.data_check import data_problems

    problems = plan.base.validate(device) or data_problems(plan.base)
    known = KNOBS + OPTIONAL_KNOBS
    for knob in plan.knobs or ():
        if knob not in known:
            problems.append(f"{knob} is not a knob the search can try (knobs: {', '.join(known)})")
    for name in sorted(plan.allow - set(ALLOWABLE)):
        problems.append(f"{name} cannot be allowed (only {', '.join(ALLOWABLE)})")
    if plan.budget_seconds is not None and not plan.budget_seconds > 0:
        problems.append(f"the time budget must be more than 0 seconds (got {plan.budget_seconds:g})")
    steps = plan.trial_length()
    if steps is not None and steps < 4:
        given = "max_steps" if plan.trial_steps is None else "trial steps"
        problems.append(f"a trial needs at least 4 steps to measure after its warm-up (got {given} {steps})")
    if not plan.trial_seconds > 0:
        problems.append(f"trial seconds must be more than 0 (got {plan.trial_seconds:g})")
    elif plan.budget_seconds is not None and plan.budget_seconds > 0 and steps is None:
        # Each trial trains trial_seconds at least; one change needs the start settings twice and the change once.
        needed = RUNS_FOR_ONE_CHANGE * plan.trial_seconds
        if plan.budget_seconds < needed:
            problems.append(f"the time budget of {plan.budget_seconds:g} s cannot fit one trial: the start settings "
                            f"run twice and a change once, each {plan.trial_seconds:g} s of training or more; give "
                            f"a budget of {needed:g} s or more")
    return problems


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def candidates(knob: str, config: RunConfig, device: DeviceInfo, allow: frozenset[str] = frozenset(),
               cores: Optional[int] = None) -> list[dict[str, Any]]:
    """The changes worth trying for ``knob`` from ``config`` on this device (none where it has no effect)."""
    on_cuda = device.type == "cuda"
    loader = config.pipeline == "dataloader"
    workers = loader and config.num_workers > 0
    options: list[dict[str, Any]]
    if knob == "placement":
        if config.augment == "none":  # no augmentation to place: only where batches come from
            options = [{"pipeline": "dataloader"}, {"pipeline": "gpu-resident"}]
        else:  # the same crop + flip, per image in the workers or batched on the device
            options = [
                {"pipeline": "dataloader", "augment": "cpu"},
                {"pipeline": "dataloader", "augment": "gpu"},
                {"pipeline": "gpu-resident", "augment": "gpu"},
            ]
    elif knob == "num_workers":
        if not loader:
            return []
        cores = cores or usable_cores()
        values = {value for value in (0, 1, 2, 4, 8, 16, 32, 64) if value <= cores} | {min(cores, 64)}
        options = [{"num_workers": value} for value in sorted(values)]
    elif knob in ("pin_memory", "non_blocking"):
        if not (loader and on_cuda):  # both act on the host → device copy
            return []
        options = [{knob: not getattr(config, knob)}]
    elif knob == "persistent_workers":
        options = [{knob: not config.persistent_workers}] if workers else []
    elif knob == "prefetch_factor":
        options = [{knob: value} for value in PREFETCH_VALUES] if workers else []
    elif knob == "precision":
        options = [{knob: value} for value in ("fp32", "fp16", "bf16")] if on_cuda else []
    elif knob == "channels_last":
        options = [{knob: not config.channels_last}]
    elif knob == "fused_optimizer":
        options = [{knob: not config.fused_optimizer}] if on_cuda else []  # the fused kernels are CUDA's
    elif knob == "compile":
        # max-autotune is left out: it compiles for minutes, more than a trial's budget; CUDA graphs need CUDA.
        modes = ("off", "default", "reduce-overhead") if on_cuda else ("off", "default")
        options = [{knob: mode} for mode in modes]
    elif knob == "batch_size":
        options = []
        for size in (config.batch_size // 2, config.batch_size * 2, config.batch_size * 4):
            if size >= 1:
                change: dict[str, Any] = {"batch_size": size}
                if "lr" in allow:
                    change["lr"] = config.lr * size / config.batch_size
                options.append(change)
    elif knob == "accumulation_steps":
        options = [{knob: value} for value in ACCUMULATION_VALUES]
    else:
        raise ValueError(f"unknown knob {knob!r}")
    # Only real changes, and only settings this machine can run.
    return [change for change in options if config.replace(**change) != config]


@dataclass
class _Measured:
    rates: list[float]
    run_ids: list[Optional[int]]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.rates)


class _StopSearch(Exception):
    def __init__(self, status: str, reason: str, refused: bool = False):
        super().__init__(reason)
        self.status, self.reason = status, reason
        self.refused = refused  # bad input (a budget too small for one trial): said as a problem, not a result


class _Search:
    def __init__(self, plan: TunePlan, stop: StopFlag, runner: MemberRunner, device: DeviceInfo, clock: Clock):
        self.plan, self.stop, self.runner, self.device, self.clock = plan, stop, runner, device, clock
        self.began = clock()
        self.trial_steps = plan.trial_length()
        self.measured: dict[RunConfig, _Measured] = {}
        self.trials: list[TrialResult] = []
        self.trial_seconds: list[float] = []
        self.start = plan.base
        self.best = plan.base
        self.start_rate: Optional[float] = None
        self.passes = 0

    # -- measuring -------------------------------------------------------------------------------
    @property
    def noise(self) -> float:
        """The typical relative difference between two runs of the same settings, at least the floor."""
        spreads = [
            (max(m.rates) - min(m.rates)) / m.mean for m in self.measured.values() if len(m.rates) > 1 and m.mean > 0
        ]
        return max(self.plan.noise_floor, statistics.fmean(spreads) if spreads else 0.0)

    def trial_config(self, config: RunConfig, steps: int, log_every: int) -> RunConfig:
        return config.replace(max_steps=steps, log_every=log_every)

    def run_once(self, config: RunConfig, purpose: str) -> Generator[AnyEvent, None, MemberEnded]:
        self.check_stop()
        steps = self.trial_steps or CALIBRATION_STEPS
        log_every = max(1, steps // WINDOWS_PER_TRIAL) if self.trial_steps else 3
        changes = changed_fields(self.start, config)
        label = f"tune {purpose}" + (f", {values_label(tuple(changes.items()))}" if changes else "")
        began = self.clock()
        member = yield from self.runner.run(
            self.trial_config(config, steps, log_every), tuple(changes.items()), self.stop, label, purpose
        )
        if purpose != "calibration":
            self.trial_seconds.append(self.clock() - began)
        if member.status == "stopped":
            raise _StopSearch("stopped", f"stopped by {stopped_by(self.stop)}")
        return member

    def measure(self, config: RunConfig, purpose: str) -> Generator[AnyEvent, None, Optional[MemberEnded]]:
        """One trial run of ``config``; its rate joins the config's measurements when it finished."""
        member = yield from self.run_once(config, purpose)
        if member.status == "finished" and member.images_per_sec:
            entry = self.measured.setdefault(config, _Measured([], []))
            entry.rates.append(member.images_per_sec)
            entry.run_ids.append(member.run_id)
        return member

    def check_stop(self) -> None:
        if self.stop():
            raise _StopSearch("stopped", f"stopped by {stopped_by(self.stop)} ({self.changes_tried_text()})")
        budget = self.plan.budget_seconds
        if budget is not None:
            typical = statistics.median(self.trial_seconds) if self.trial_seconds else 0.0
            if self.clock() - self.began + typical > budget:
                raise _StopSearch("finished", f"the time budget of {budget:g} s is spent ({self.changes_tried_text()})")

    @property
    def changes_tried(self) -> int:
        return sum(trial.knob != "start" for trial in self.trials)

    def changes_tried_text(self) -> str:
        tried = self.changes_tried
        return f"{tried} change{'s' if tried != 1 else ''} tried" if tried else "no change was tried"

    def require_room_for_one_change(self, trial_seconds: float, runs_left: int) -> None:
        """Refuse a budget that cannot fit the runs one change needs, now that a trial's length here is known."""
        budget = self.plan.budget_seconds
        if budget is None:
            return
        needed = self.clock() - self.began + runs_left * trial_seconds
        if needed > budget:
            raise _StopSearch("failed", (
                f"the time budget of {budget:g} s cannot fit one trial: a trial of {self.trial_steps} steps takes "
                f"about {trial_seconds:.0f} s here (start-up and evaluation included), and one change needs the "
                f"start settings twice and the change once; give a budget of {math.ceil(needed):d} s or more, "
                "or fewer steps per trial"), refused=True)

    # -- the search ------------------------------------------------------------------------------
    def run(self) -> Generator[AnyEvent, None, str]:
        if self.trial_steps is None:
            began = self.clock()
            calibration = yield from self.run_once(self.start, "calibration")
            if calibration.status != "finished" or not calibration.images_per_sec:
                raise _StopSearch("failed", f"the starting settings fail: {calibration.reason}")
            per_step = self.start.batch_size / calibration.images_per_sec
            self.trial_steps = min(MAX_TRIAL_STEPS, max(MIN_TRIAL_STEPS, math.ceil(self.plan.trial_seconds / per_step)))
            # A trial costs what the calibration run cost (start-up, evaluation) plus its extra steps.
            estimate = self.clock() - began + max(0, self.trial_steps - CALIBRATION_STEPS) * per_step
            self.require_room_for_one_change(estimate, RUNS_FOR_ONE_CHANGE)
        first = yield from self.measure(self.start, "start")
        if self.trial_seconds:
            self.require_room_for_one_change(self.trial_seconds[-1], RUNS_FOR_ONE_CHANGE - 1)
        second = yield from self.measure(self.start, "start")
        if self.start not in self.measured:
            failed = second if second is not None and second.status == "failed" else first
            raise _StopSearch("failed", f"the starting settings fail: {failed.reason if failed else 'no result'}")
        start = self.measured[self.start]
        self.start_rate = start.mean
        yield self.record_trial("start", {}, self.start, "start")
        yield self.best_so_far()
        knobs = self.plan.searched_knobs()
        for _ in range(self.plan.max_passes):
            self.passes += 1
            rate_before = self.best_rate
            for knob in knobs:
                for change in candidates(knob, self.best, self.device, self.plan.allow):
                    candidate = self.best.replace(**change)
                    if candidate in self.measured or self._refused(candidate):
                        continue  # tried in an earlier pass, or not a run this machine can do
                    yield from self.try_candidate(knob, change, candidate)
            gain = self.best_rate / rate_before - 1
            if gain < self.plan.min_pass_gain:
                return f"a full pass gained {gain:.1%} (< {self.plan.min_pass_gain:.0%}; {self.changes_tried_text()})"
        return f"{self.plan.max_passes} passes done ({self.changes_tried_text()})"

    def _refused(self, config: RunConfig) -> bool:
        from workbench.data_check import data_problems

        return bool(config.validate(self.device) or data_problems(config))

    @property
    def best_rate(self) -> float:
        return self.measured[self.best].mean

    def try_candidate(self, knob: str, change: dict[str, Any], candidate: RunConfig) -> Generator[AnyEvent, None, None]:
        member = yield from self.measure(candidate, "trial")
        if candidate not in self.measured:
            yield self.record_trial(knob, change, candidate, "failed", reason=member.reason if member else None)
            return
        if self._decide(candidate) == "within noise":
            # A close call: measure the candidate again, and the best too if it has fewer measurements.
            yield from self.measure(candidate, "repeat")
            if len(self.measured[self.best].rates) < len(self.measured[candidate].rates):
                yield from self.measure(self.best, "repeat")
        outcome = self._decide(candidate)
        if outcome == "kept":
            self.best = candidate
        yield self.record_trial(knob, change, candidate, outcome)
        if outcome == "kept":
            yield self.best_so_far()

    def _decide(self, candidate: RunConfig) -> str:
        rate, best = self.measured[candidate].mean, self.best_rate
        if rate > best * (1 + self.noise):
            return "kept"
        if rate >= best * (1 - self.noise):
            return "within noise"
        return "slower"

    def record_trial(self, knob: str, change: dict[str, Any], config: RunConfig, outcome: str,
                     reason: Optional[str] = None) -> TrialResult:
        measured = self.measured.get(config)
        trial = TrialResult(
            trial=len(self.trials) + 1,
            knob=knob,
            changes=dict(change),
            images_per_sec=measured.mean if measured else None,
            measurements=tuple(measured.rates) if measured else (),
            run_ids=tuple(measured.run_ids) if measured else (),
            outcome=outcome,  # type: ignore[arg-type]
            best_images_per_sec=self.best_rate,
            reason=reason,
        )
        self.trials.append(trial)
        return trial

    def best_so_far(self) -> BestSoFar:
        return BestSoFar(config=self.best, images_per_sec=self.best_rate, changes=changed_fields(self.start, self.best),
                         speedup=self.best_rate / self.start_rate if self.start_rate else 1.0)

    def result(self, stop_reason: str) -> TuneResult:
        measured_start = self.measured.get(self.start)
        measured_best = self.measured.get(self.best)
        return TuneResult(
            start_config=self.start,
            start_images_per_sec=measured_start.mean if measured_start else None,
            best_config=self.best,
            best_images_per_sec=measured_best.mean if measured_best else None,
            trials=tuple(self.trials),
            noise_fraction=self.noise if self.measured else None,
            passes=self.passes,
            stop_reason=stop_reason,
            trial_steps=self.trial_steps,
        )


def run_tune(
    plan: TunePlan,
    stop: StopFlag,
    recorders: Optional[RecorderFactory] = None,
    run_function: Optional[RunFunction] = None,
    probe: Optional[Probe] = None,
    clock: Clock = time.monotonic,
) -> Iterator[AnyEvent]:
    """Search for faster settings from ``plan.base``; yield every trial's run and the search's findings."""
    recorders = recorders or NoRecording()
    device = (probe or probe_device)(plan.base.device)
    problems = plan_problems(plan, device)
    if problems:
        yield SequenceEnded(kind="tune", sequence_id=None, status="failed", result=None, reason="; ".join(problems), problems=tuple(problems))
        return
    name = plan.display_name
    sequence_id = recorders.begin_sequence(
        "tune", name, plan_dict(plan.base, knobs=list(plan.searched_knobs()), allow=sorted(plan.allow),
                                budget_seconds=plan.budget_seconds, trial_steps=plan.trial_steps)
    )
    yield SequenceStarted(kind="tune", sequence_id=sequence_id, name=name, base=plan.base)
    search = _Search(plan, stop, MemberRunner(run_function or default_run_function(), recorders, sequence_id), device, clock)
    try:
        stop_reason = yield from search.run()
        status = "finished"
    except _StopSearch as ended:
        if ended.refused:
            yield SequenceEnded(kind="tune", sequence_id=sequence_id, status="failed", result=None, reason=ended.reason, problems=(ended.reason,))
            return
        status, stop_reason = ended.status, ended.reason
    yield SequenceEnded(kind="tune", sequence_id=sequence_id, status=status, result=search.result(stop_reason), reason=stop_reason)  # type: ignore[arg-type]
