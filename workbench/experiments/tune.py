"""Find faster settings: coordinate descent over the knobs that change speed, not what is learned.

From the user's settings, each knob's values are tried with the others fixed. Every change is one
comparison (experiments/ab.py): the best settings so far (A) and the change (B), measured
interleaved, A B A B A B (``TunePlan.trials`` runs of each, 3 by default), each run's steady-state
images/sec taken after its warm-up window; the speedup is the ratio of the medians with its 90 % interval,
and the change is kept only when the verdict is faster (the whole interval above 1.02×). A change costs
2 × trials runs (6 by default). The search stops when a full pass gains less than 3 %, when the time budget
is spent (no comparison starts that the budget cannot finish), or when the user stops it. Batch size, lr
and accumulation are left alone unless the plan allows them. Every run is an ordinary run in the history,
tagged with the search.

The search begins with one short run of the start settings (``CALIBRATION_STEPS``): it warms the process up
(the first run in a process pays one-off costs the comparisons should not see) and times a step. A trial is
as long as the plan's ``trial_steps``, else the settings' own ``max_steps``, else sized from that first run to
``trial_seconds``. A budget that cannot fit one comparison is refused: before anything runs where the trial
length alone says so, else as soon as the first run has shown how long a trial takes here (start-up and
evaluation included), with the budget it needs.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterator, Optional

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo, Probe
from workbench.engine.requests import stopped_by
from workbench.experiments.ab import MIN_TRIALS, ABResult, compare_rates
from workbench.experiments.events import (
    AnyEvent,
    BestSoFar,
    MemberEnded,
    SequenceEnded,
    SequenceStatus,
    TrialOutcome,
    TrialResult,
    TuneResult,
    chained_speedup,
    changed_fields,
    values_label,
)
from workbench.experiments.measured import keep, measured_change, one_speed_setting
from workbench.experiments.members import (
    MemberRunner,
    RunFunction,
    StopFlag,
    open_sequence,
    plan_dict,
    probe_device,
)
from workbench.experiments.recording import RecorderFactory
from workbench.experiments.rounds import Arm, Rounds, run_rounds
from workbench.experiments.tune_knobs import ALLOWABLE, KNOBS, OPTIONAL_KNOBS, candidates

__all__ = ["ALLOWABLE", "KNOBS", "OPTIONAL_KNOBS", "TunePlan", "candidates", "plan_problems", "run_tune"]

CALIBRATION_STEPS = 12  # the first short run of the start settings: warms the process up, times a step
WINDOWS_PER_TRIAL = 8  # log windows per trial: the first (warm-up) is left out of its images/sec
MIN_TRIAL_STEPS = 16
MAX_TRIAL_STEPS = 20_000

Clock = Callable[[], float]


@dataclass(frozen=True)
class TunePlan:
    base: RunConfig
    allow: frozenset[str] = frozenset()  # of ALLOWABLE: batch_size, lr, accumulation_steps
    knobs: Optional[tuple[str, ...]] = None  # only these knobs (default: every one that applies here)
    budget_seconds: Optional[float] = None  # no comparison starts that this much time cannot finish
    trial_steps: Optional[int] = None  # steps per trial; None: sized from the first run to trial_seconds
    trial_seconds: float = 4.0
    min_pass_gain: float = 0.03  # a pass that gains less than this ends the search
    max_passes: int = 3
    trials: int = MIN_TRIALS  # runs of each side per comparison: the best so far and the change
    name: str = ""

    @property
    def display_name(self) -> str:
        if self.name:
            return self.name
        base = self.base
        return f"tune {base.model}, batch {base.batch_size}, {base.precision}"

    @property
    def runs_per_change(self) -> int:
        """What one change costs: the best settings and the change, ``trials`` runs each."""
        return 2 * self.trials

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
    if plan.trials < MIN_TRIALS:
        problems.append(f"a comparison needs at least {MIN_TRIALS} runs of each side for an interval (got {plan.trials})")
    if plan.knobs is not None and not plan.knobs:
        problems.append(f"no knob to search: name one or more (knobs: {', '.join(known)})")
    steps = plan.trial_length()
    if steps is not None and steps < 4:
        given = "max_steps" if plan.trial_steps is None else "trial steps"
        problems.append(f"a trial needs at least 4 steps to measure after its warm-up (got {given} {steps})")
    elif steps is not None and not problems:  # a trial is a run of the base at that length: what a run may be
        problems.extend(f"trial steps {steps:,}: {problem}" for problem in plan.base.replace(max_steps=steps).validate(
            device))
    if not plan.trial_seconds > 0:
        problems.append(f"trial seconds must be more than 0 (got {plan.trial_seconds:g})")
    elif plan.budget_seconds is not None and plan.budget_seconds > 0 and steps is None:
        # Each trial trains trial_seconds at least; one change is one comparison of runs_per_change trials.
        needed = plan.runs_per_change * plan.trial_seconds
        if plan.budget_seconds < needed:
            problems.append(f"the time budget of {plan.budget_seconds:g} s cannot fit one change: {_cost(plan)}, "
                            f"each {plan.trial_seconds:g} s of training or more; give a budget of {needed:g} s or more")
    return problems


def _cost(plan: TunePlan) -> str:
    return f"the best settings and the change run {plan.trials} times each, interleaved"


class _StopSearch(Exception):
    def __init__(self, status: SequenceStatus, reason: str, refused: bool = False):
        super().__init__(reason)
        self.status, self.reason = status, reason
        self.refused = refused  # bad input (a budget too small for one change): said as a problem, not a result


class _Search:
    def __init__(self, plan: TunePlan, stop: StopFlag, runner: MemberRunner, device: DeviceInfo, clock: Clock):
        self.plan, self.stop, self.runner, self.device, self.clock = plan, stop, runner, device, clock
        self.began = clock()
        self.trial_steps = plan.trial_length()
        self.rates: dict[RunConfig, list[float]] = {}  # every finished trial's images/sec, by settings
        self.tried: set[RunConfig] = {plan.base}
        self.trials: list[TrialResult] = []
        self.trial_seconds: list[float] = []
        self.trial_estimate = 0.0  # seconds a trial takes here, from the first run, until trials have run
        self.start = plan.base
        self.best = plan.base
        self.passes = 0

    # -- measuring -------------------------------------------------------------------------------
    def arm(self, config: RunConfig, purpose: str) -> Arm:
        """``config`` as one run of the search trains it: a short first run, or a trial; a run that fails (or gives
        no rate) ends what it was measured for."""
        calibration = purpose == "calibration"
        steps = CALIBRATION_STEPS if calibration else self.trial_steps
        assert steps is not None
        log_every = 3 if calibration else max(1, steps // WINDOWS_PER_TRIAL)
        return Arm(config.replace(max_steps=steps, log_every=log_every),
                   tuple(changed_fields(self.start, config).items()), purpose, "end", needs_rate=True)

    def run_arms(self, arms: list[Arm], rounds: int = 1) -> Generator[AnyEvent, None, Rounds]:
        """``arms`` interleaved for ``rounds`` rounds, each trial timed; stopped: the search ends."""
        began = self.clock()

        def label(arm: int, round_index: int) -> str:
            purpose, values = arms[arm].purpose, arms[arm].values
            word = "start" if purpose == "best" and not values else purpose
            count = f" {round_index + 1}/{rounds}" if purpose != "calibration" else ""
            return f"tune {word}{count}" + (f", {values_label(values)}" if values else "")

        def timed(arm: int, member: MemberEnded) -> None:
            nonlocal began
            now = self.clock()
            if arms[arm].purpose != "calibration":
                self.trial_seconds.append(now - began)
                if len(self.trial_seconds) == 1 and member.status != "stopped":  # now a trial's length here is known
                    self.require_room_for_one_change(self.trial_seconds[0], self.plan.runs_per_change - 1)
            began = now

        ran = yield from run_rounds(self.runner, arms, self.stop, label, rounds, after_run=timed)
        if ran.status == "stopped":
            raise _StopSearch("stopped", f"stopped by {stopped_by(self.stop)} ({self.changes_tried_text()})")
        return ran

    def changes_tried_text(self) -> str:
        tried = len(self.trials)
        return f"{tried} change{'s' if tried != 1 else ''} tried" if tried else "no change was tried"

    def typical_trial_seconds(self) -> float:
        return statistics.median(self.trial_seconds) if self.trial_seconds else self.trial_estimate

    def require_room_for_one_change(self, trial_seconds: float, runs_left: int) -> None:
        """Refuse a budget that cannot fit the runs one change needs, now that a trial's length here is known."""
        budget = self.plan.budget_seconds
        if budget is None:
            return
        needed = self.clock() - self.began + runs_left * trial_seconds
        if needed > budget:
            raise _StopSearch("failed", (
                f"the time budget of {budget:g} s cannot fit one change: a trial of {self.trial_steps} steps takes "
                f"about {trial_seconds:.0f} s here (start-up and evaluation included), and {_cost(self.plan)}; "
                f"give a budget of {math.ceil(needed):d} s or more, or fewer steps per trial"), refused=True)

    def check_budget(self) -> None:
        """No comparison starts that the budget cannot finish: half a comparison decides nothing."""
        budget = self.plan.budget_seconds
        if budget is None:
            return
        if self.clock() - self.began + self.plan.runs_per_change * self.typical_trial_seconds() > budget:
            raise _StopSearch("finished", f"the time budget of {budget:g} s is spent ({self.changes_tried_text()})")

    # -- the search ------------------------------------------------------------------------------
    def run(self) -> Generator[AnyEvent, None, str]:
        yield from self.calibrate()
        knobs = self.plan.searched_knobs()
        for _ in range(self.plan.max_passes):
            self.passes += 1
            gain = 1.0
            for knob in knobs:
                for change in candidates(knob, self.best, self.device, self.plan.allow):
                    candidate = self.best.replace(**change)
                    if candidate in self.tried or self._refused(candidate):
                        continue  # tried in an earlier pass, or not a run this machine can do
                    self.tried.add(candidate)
                    trial = yield from self.compare(knob, change, candidate)
                    if trial.outcome == "kept" and trial.speedup:
                        gain *= trial.speedup
            if gain - 1 < self.plan.min_pass_gain:
                return (f"a full pass gained {gain - 1:.1%} (< {self.plan.min_pass_gain:.0%}; "
                        f"{self.changes_tried_text()})")
        return f"{self.plan.max_passes} passes done ({self.changes_tried_text()})"

    def calibrate(self) -> Generator[AnyEvent, None, None]:
        """The first short run: warms the process up, sizes the trials when the plan does not, checks the budget."""
        began = self.clock()
        ran = yield from self.run_arms([self.arm(self.start, "calibration")])
        calibration = ran.members[0]
        if ran.failed is not None or not calibration.images_per_sec:
            raise _StopSearch("failed", f"the starting settings fail: {calibration.reason}")
        per_step = self.start.batch_size / calibration.images_per_sec
        if self.trial_steps is None:
            self.trial_steps = min(MAX_TRIAL_STEPS, max(MIN_TRIAL_STEPS, math.ceil(self.plan.trial_seconds / per_step)))
        # A trial costs what the first run cost (start-up, evaluation) plus its extra steps.
        self.trial_estimate = self.clock() - began + max(0, self.trial_steps - CALIBRATION_STEPS) * per_step
        self.require_room_for_one_change(self.trial_estimate, self.plan.runs_per_change)

    def _refused(self, config: RunConfig) -> bool:
        from workbench.data_check import data_problems

        return bool(config.validate(self.device) or data_problems(config))

    def compare(self, knob: str, change: dict[str, Any], candidate: RunConfig) -> Generator[AnyEvent, None, TrialResult]:
        """The best so far (A) and ``candidate`` (B), measured A B A B …; the change kept when B is faster."""
        self.check_budget()
        ran = yield from self.run_arms([self.arm(self.best, "best"), self.arm(candidate, "trial")], self.plan.trials)
        for arm, config in enumerate((self.best, candidate)):
            self.rates.setdefault(config, []).extend(ran.rates(arm))
        if ran.failed is not None:
            side, member = ran.failed
            reason = member.reason or "no steady-state images/sec"
            trial = self.record(knob, change, "failed", ran,
                                reason=reason if side == 1 else f"the best settings so far failed: {reason}")
            yield trial
            return trial
        comparison = compare_rates(ran.rates(0), ran.rates(1))
        speed = one_speed_setting(self.best, change)
        if speed is not None:  # kept for the findings of runs with these settings, as a verification's is
            yield from keep(self.runner.recorders, measured_change(
                sequence_id=self.runner.sequence_id, device_type=self.device.type, device_name=self.device.name,
                baseline=self.best, field=speed[0], value=speed[1], comparison=comparison,
                baseline_run_ids=ran.run_ids(0), changed_run_ids=ran.run_ids(1)))
        verdict = comparison.verdict
        kept = verdict == "faster"
        if kept:
            self.best = candidate
        outcome: TrialOutcome = "kept" if verdict == "faster" else verdict
        trial = self.record(knob, change, outcome, ran, comparison=comparison)
        yield trial
        if kept:
            yield self.best_so_far()
        return trial

    def record(self, knob: str, change: dict[str, Any], outcome: TrialOutcome, ran: Rounds,
               reason: Optional[str] = None, comparison: Optional[ABResult] = None) -> TrialResult:
        trial = TrialResult(
            trial=len(self.trials) + 1,
            knob=knob,
            changes=dict(change),
            images_per_sec=comparison.changed_images_per_sec if comparison else None,
            measurements=tuple(ran.rates(1)),
            run_ids=tuple(ran.run_ids(1)),
            outcome=outcome,
            reason=reason,
            comparison=comparison,
            baseline_run_ids=tuple(ran.run_ids(0)),
        )
        self.trials.append(trial)
        return trial

    def median_rate(self, config: RunConfig) -> Optional[float]:
        rates = self.rates.get(config)
        return statistics.median(rates) if rates else None

    def best_so_far(self) -> BestSoFar:
        best = self.median_rate(self.best)
        assert best is not None  # kept: measured
        return BestSoFar(config=self.best, images_per_sec=best, changes=changed_fields(self.start, self.best),
                         speedup=chained_speedup(self.trials))

    def result(self, stop_reason: str) -> TuneResult:
        return TuneResult(
            start_config=self.start,
            start_images_per_sec=self.median_rate(self.start),
            best_config=self.best,
            best_images_per_sec=self.median_rate(self.best),
            trials=tuple(self.trials),
            passes=self.passes,
            stop_reason=stop_reason,
            trial_steps=self.trial_steps,
            trials_per_side=self.plan.trials,
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
    device = (probe or probe_device)(plan.base.device)
    runner = yield from open_sequence(
        "tune", plan.display_name, plan.base, plan_problems(plan, device),
        plan_dict(plan.base, knobs=list(plan.searched_knobs()), allow=sorted(plan.allow),
                  budget_seconds=plan.budget_seconds, trial_steps=plan.trial_steps, trials=plan.trials),
        recorders, run_function)
    if runner is None:
        return
    sequence_id = runner.sequence_id
    search = _Search(plan, stop, runner, device, clock)
    status: SequenceStatus
    try:
        stop_reason = yield from search.run()
        status = "finished"
    except _StopSearch as ended:
        if ended.refused:
            yield SequenceEnded(kind="tune", sequence_id=sequence_id, status="failed", result=None, reason=ended.reason, problems=(ended.reason,))
            return
        status, stop_reason = ended.status, ended.reason
    yield SequenceEnded(kind="tune", sequence_id=sequence_id, status=status, result=search.result(stop_reason), reason=stop_reason)
