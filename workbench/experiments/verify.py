"""Verify a change: a run's settings (A) against the same settings with one setting changed (B), measured.

Trials run interleaved, A B A B …, ``repeats`` of each (at least MIN_TRIALS, the fewest that give a 90 %
interval). With several changes the baseline's trials are shared honestly: each round runs A, B1, B2, … once,
so every change is compared with baseline trials measured between its own. A trial is a short ordinary run
(recorded in the history, tagged with the sequence) of ``trial_steps`` steps in WINDOWS_PER_TRIAL log windows,
the first left out as warm-up, as the search for faster settings does; profiling is off in the trials (the
profiler's cost is no part of either side's speed). Each change is then compared by experiments/ab.py
(median ratio, interval, verdict) and, with an interval, kept in the history for the findings to read.

A baseline trial that fails ends the sequence (nothing can be compared); a change whose trial fails is dropped
from the later rounds with the reason. Stop ends the sequence: the comparisons are of what finished.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from workbench.config import NOT_SPEED_SETTINGS, ConfigError, RunConfig, inactive_settings
from workbench.device_info import DeviceInfo, Probe
from workbench.engine.requests import stopped_by
from workbench.engine.run_summary import Finding, MeasuredChange, RunSummary
from workbench.experiments.ab import MIN_TRIALS, ABResult, compare_rates
from workbench.experiments.events import (
    AnyEvent,
    ChangeVerified,
    SequenceEnded,
    SequenceStatus,
    Values,
    VerifyResult,
    values_label,
)
from workbench.experiments.measured import keep, measured_change
from workbench.experiments.members import (
    RunFunction,
    StopFlag,
    open_sequence,
    plan_dict,
    probe_device,
)
from workbench.experiments.recording import RecorderFactory
from workbench.experiments.rounds import Arm, Rounds, run_rounds
from workbench.experiments.tune import MAX_TRIAL_STEPS, MIN_TRIAL_STEPS, WINDOWS_PER_TRIAL
from workbench.experiments.values import field_problem

# A trial trains about this long when its length is sized from the run's own speed: long enough that its seven
# steady windows average over a few hundred milliseconds each, short enough that 3 + 3 trials take well under a
# minute of training.
TRIAL_SECONDS = 3.0
# The shortest trial that leaves steady windows after the warm-up one.
FEWEST_TRIAL_STEPS = 4
# The budget of trials of each side: a change whose interval still straddles the noise band after MIN_TRIALS gets
# more rounds, up to this many (8 + 8 trials of ~3 s: under two minutes of training per change). Looking again
# after each round raises the chance of a false verdict above the interval's 10 %; the budget bounds the looks.
MAX_TRIALS = 8
# The baseline's own trials spreading more than this (max − min over the median) mark a busy machine: identical
# runs on a quiet one differ by 8–15 %.
BUSY_SPREAD = 0.15


@dataclass(frozen=True)
class Change:
    """One setting's change to verify, and what it is in words (a finding's text, or what the user set)."""

    field: str
    value: Any
    text: str = ""

    @property
    def values(self) -> Values:
        return ((self.field, self.value),)

    @property
    def label(self) -> str:
        return values_label(self.values)


@dataclass(frozen=True)
class VerifyPlan:
    base: RunConfig  # A: the run's own settings
    changes: tuple[Change, ...]  # each B is base with one of these
    trial_steps: int
    repeats: int = MIN_TRIALS  # trials of each side, at least
    run_id: Optional[int] = None  # the run whose settings are A, when there is one
    name: str = ""
    # Trials of each side at most: an undecided change gets another round until its interval decides or this runs out.
    max_trials: Optional[int] = None  # None: MAX_TRIALS (or ``repeats`` where that is more)

    @property
    def trial_budget(self) -> int:
        return max(self.repeats, self.max_trials if self.max_trials is not None else MAX_TRIALS)

    @property
    def display_name(self) -> str:
        if self.name:
            return self.name
        run = f" #{self.run_id}" if self.run_id is not None else ""
        return f"verify{run}: " + "; ".join(change.label for change in self.changes)

    def changed_config(self, change: Change) -> RunConfig:
        return self.base.replace(**{change.field: change.value})

    @classmethod
    def for_run(cls, config: RunConfig, summary: RunSummary, changes: tuple[Change, ...], run_id: Optional[int] = None,
                trial_steps: Optional[int] = None, repeats: int = MIN_TRIALS, name: str = "",
                max_trials: Optional[int] = None) -> VerifyPlan:
        """A plan against a run's settings; trials sized from its measured speed unless ``trial_steps`` says."""
        steps = trial_steps if trial_steps is not None else trial_steps_for(config, summary.images_per_sec,
                                                                            summary.steps or None)
        return cls(config, changes, steps, repeats, run_id, name, max_trials)


def _round_words(round_index: int, plan: VerifyPlan) -> str:
    """"round 2 of 3", or past the planned rounds "round 5, an extra one (up to 8)"."""
    if round_index < plan.repeats:
        return f"round {round_index + 1} of {plan.repeats}"
    return f"round {round_index + 1}, an extra one while the interval had not decided (up to {plan.trial_budget})"


def is_decisive(comparison: ABResult) -> bool:
    """The interval answers: it clears 1 ± MIN_EFFECT (faster or slower), or lies wholly inside that band (no change
    worth a setting). One that straddles the band's edge cannot tell yet."""
    if comparison.verdict != "within_noise":
        return True
    low, high = comparison.speedup_low, comparison.speedup_high
    return low is not None and high is not None and low >= 1 / (1 + comparison.min_effect) \
        and high <= 1 + comparison.min_effect


def load_average() -> Optional[tuple[float, int]]:
    """The 1-minute load average and the cores it is spread over (None where the system gives none)."""
    try:
        return os.getloadavg()[0], os.cpu_count() or 1
    except (AttributeError, OSError):
        return None


def busy_machine(baseline_rates: list[float], load: Optional[tuple[float, int]]) -> Optional[str]:
    """Why this machine reads as busy, in words, from the baseline's own trials (the same settings each time) and
    the load when the trials began; None when it looks quiet."""
    reasons = []
    if len(baseline_rates) >= 2:
        median = statistics.median(baseline_rates)  # the median every other output uses (an even count's mean of two)
        spread = (max(baseline_rates) - min(baseline_rates)) / median if median > 0 else 0.0
        if spread > BUSY_SPREAD:
            reasons.append(f"the baseline's own {len(baseline_rates)} trials (the same settings each time) spread "
                           f"{spread:.0%}, where a quiet machine's differ by 8–15 %")
    if load is not None and load[0] > load[1]:
        reasons.append(f"the load average was {load[0]:.1f} on {load[1]} cores")
    return "this machine is busy: " + "; ".join(reasons) if reasons else None


def measured_change_of(comparison: ABResult) -> Optional[MeasuredChange]:
    """What a finding carries of a comparison: None without a speedup (a side with no finished trial)."""
    if comparison.speedup is None:
        return None
    return MeasuredChange(speedup=comparison.speedup, low=comparison.speedup_low, high=comparison.speedup_high,
                       verdict=comparison.verdict, baseline_trials=len(comparison.baseline_rates),
                       changed_trials=len(comparison.changed_rates))


def finding_change(finding: Finding) -> Change:
    """The change a finding proposes (it must have a setting: ``finding.field``)."""
    assert finding.field is not None
    return Change(finding.field, finding.value, finding.text)


def trial_config(config: RunConfig, steps: int) -> RunConfig:
    """A trial of ``config``: ``steps`` steps in WINDOWS_PER_TRIAL log windows, unprofiled."""
    return config.replace(max_steps=steps, log_every=max(1, steps // WINDOWS_PER_TRIAL), profile=False)


def trial_steps_for(config: RunConfig, images_per_sec: Optional[float], run_steps: Optional[int] = None,
                    trial_seconds: float = TRIAL_SECONDS) -> int:
    """Steps per trial for a run that trained at ``images_per_sec``: about ``trial_seconds`` of training, no
    more steps than the run itself took (``run_steps``), and never fewer than MIN_TRIAL_STEPS."""
    if not images_per_sec or images_per_sec <= 0:
        steps = MIN_TRIAL_STEPS if run_steps is None else run_steps
    else:
        steps = math.ceil(trial_seconds * images_per_sec / config.batch_size)
        if run_steps:
            steps = min(steps, run_steps)
    return min(MAX_TRIAL_STEPS, max(MIN_TRIAL_STEPS, steps))


def change_problem(base: RunConfig, change: Change) -> Optional[str]:
    """Why ``change`` cannot be verified against ``base`` (None when it can), before any device is asked."""
    problem = field_problem(change.field)
    if problem:
        return problem
    if change.field in NOT_SPEED_SETTINGS:
        return (f"{change.field} decides what a run learns, how long it is or what it records, not how fast it "
                "trains: there is no speed to verify")  # lr, seed, epochs, profile alike
    try:
        changed = RunConfig.from_dict({**base.to_dict(), change.field: change.value})
    except ConfigError as error:
        return str(error)
    if changed == base:
        return f"{change.label} is already the run's setting: there is nothing to compare"
    return None


def plan_problems(plan: VerifyPlan, device: DeviceInfo) -> list[str]:
    """Every problem with the plan, in words; [] when it can run."""
    from workbench.data_check import data_problems

    problems: list[str] = []
    if not plan.changes:
        problems.append("nothing to verify: give a change (a finding's setting, or FIELD=VALUE)")
    if plan.repeats < MIN_TRIALS:
        problems.append(f"a verdict needs at least {MIN_TRIALS} trials of each side (got {plan.repeats})")
    if plan.trial_steps < FEWEST_TRIAL_STEPS:
        problems.append(f"a trial needs at least {FEWEST_TRIAL_STEPS} steps to measure after its warm-up "
                        f"(got trial steps {plan.trial_steps})")
    seen: set[str] = set()
    for change in plan.changes:
        if change.label in seen:
            problems.append(f"{change.label} is asked for twice")
        seen.add(change.label)
    if problems:
        return problems
    base = trial_config(plan.base, plan.trial_steps)
    base_problems = base.validate(device) or data_problems(base)
    problems.extend(f"the run's settings cannot run here: {problem}" for problem in base_problems)
    for change in plan.changes:
        problem = change_problem(plan.base, change)
        if problem is not None:
            problems.append(problem)
            continue
        idle = inactive_settings(plan.changed_config(change), on_cpu=device.type != "cuda").get(change.field)
        if change.field == "device" and _trains_on(change.value, device) == _trains_on(plan.base.device, device):
            idle = f"it trains on the {_trains_on(change.value, device).upper()} here, as device={plan.base.device} does"
        if idle is not None:  # both sides would run the same work: nothing to measure (fused_optimizer on a CPU)
            problems.append(f"{change.label} changes nothing in this run: {idle}")
            continue
        changed = trial_config(plan.changed_config(change), plan.trial_steps)
        problems.extend(f"{change.label}: {problem}" for problem in changed.validate(device) or data_problems(changed)
                        if problem not in base_problems)
    return problems


def _trains_on(requested: str, device: DeviceInfo) -> str:
    """The device type a run with ``device=requested`` trains on here ("auto" prefers CUDA, as probe_device)."""
    return "cpu" if requested == "cpu" or not device.cuda_available else "cuda"


def without_unrunnable(plan: VerifyPlan, device: DeviceInfo) -> tuple[VerifyPlan, list[str]]:
    """The plan less the changes that cannot run against its base here, and a line for each left out.

    For every finding of a run at once: one finding whose change this run's settings refuse (a finding stored by
    an older version, a setting this machine lacks) should not keep the others from being measured. The plan is
    returned whole when no change can run, so that its problems are said as they are."""
    kept, left_out = [], []
    for change in plan.changes:
        problems = plan_problems(dataclasses.replace(plan, changes=(change,)), device)
        if problems:
            left_out.append(f"{change.label} left out: " + "; ".join(problems))
        else:
            kept.append(change)
    if not kept or not left_out:
        return plan, []
    return dataclasses.replace(plan, changes=tuple(kept)), left_out


def run_verify(
    plan: VerifyPlan,
    stop: StopFlag,
    recorders: Optional[RecorderFactory] = None,
    run_function: Optional[RunFunction] = None,
    probe: Optional[Probe] = None,
) -> Iterator[AnyEvent]:
    """Measure each change of ``plan`` against its base, interleaved; yield every trial's run and the result."""
    device = (probe or probe_device)(plan.base.device)
    problems = plan_problems(plan, device)
    changes = plan.changes
    # The baseline is named by its own values of the settings the changes set ("num_workers=0"), so that both sides
    # of every comparison read as settings, never as "#1" against "2".
    def arm(config: RunConfig, values: Values, purpose: str) -> Arm:  # a failed baseline leaves nothing to compare
        return Arm(trial_config(config, plan.trial_steps), values, purpose, "end" if purpose == "baseline" else "drop",
                   needs_rate=True)

    arms = [arm(plan.base, (), "baseline")]
    if not problems:
        fields = dict.fromkeys(change.field for change in changes)
        arms = [arm(plan.base, tuple((name, getattr(plan.base, name)) for name in fields), "baseline")]
        arms += [arm(plan.changed_config(change), change.values, "change") for change in changes]
    runner = yield from open_sequence("verify", plan.display_name, plan.base, problems, plan_dict(
        plan.base, run_id=plan.run_id, trial_steps=plan.trial_steps, repeats=plan.repeats,
        changes=[{"field": change.field, "value": change.value, "text": change.text} for change in changes]),
        recorders, run_function, [arm.config for arm in arms], planned_members=plan.repeats * len(arms))
    if runner is None:
        return
    sequence_id = runner.sequence_id
    load_at_start = load_average()
    decided: set[int] = set()  # once an interval decides, that change runs no more (its verdict stands)

    def label(arm: int, round_index: int) -> str:
        values = arms[arm].values
        return f"verify {arms[arm].purpose} {round_index + 1}" + (f", {values_label(values)}" if values else "")

    def undecided(ran: Rounds) -> list[int]:
        """The baseline and the changes whose interval still straddles the noise band ([] when none does)."""
        decided.update(side for side in range(1, len(arms))
                       if is_decisive(compare_rates(ran.rates_beside(0, side), ran.rates(side))))
        left = [side for side in range(1, len(arms)) if side not in decided and side not in ran.dropped]
        return [0, *left] if left else []

    ran = yield from run_rounds(runner, arms, stop, label, plan.repeats, max_rounds=plan.trial_budget, more=undecided)
    status: SequenceStatus = ran.status
    reason: Optional[str] = None
    if ran.status == "stopped":
        where = "after" if ran.stopped_between_rounds else "in"  # a round not begun is not the one stopped in
        reason = f"stopped by {stopped_by(stop)} " + (f"{where} {_round_words(ran.rounds_begun - 1, plan)}"
                                                      if ran.rounds_begun else "before its first trial")
    elif ran.failed is not None:
        status, reason = "failed", f"the run's own settings failed in a trial: {ran.failure(0)}"
    rates = [ran.rates(side) for side in range(len(arms))]
    run_ids = [ran.run_ids(side) for side in range(len(arms))]
    failures = [ran.failure(side) for side in range(len(arms))]
    verified = []
    for side, change in enumerate(changes, start=1):
        # Against the baseline trials of its own rounds: once decided, a change runs no more while the baseline may
        # run on for another; those later trials (a busier machine, say) are not interleaved with this change's.
        baseline_ids = ran.run_ids_beside(0, side)
        comparison = compare_rates(ran.rates_beside(0, side), rates[side])
        verified.append(ChangeVerified(text=change.text or f"set {change.label}", field=change.field,
                                       value=change.value, comparison=comparison, baseline_run_ids=tuple(baseline_ids),
                                       changed_run_ids=tuple(run_ids[side]), reason=failures[side],
                                       decided=is_decisive(comparison)))
        yield from keep(runner.recorders, measured_change(
            sequence_id=sequence_id, device_type=device.type, device_name=device.name, baseline=plan.base,
            field=change.field, value=change.value, comparison=comparison, baseline_run_ids=baseline_ids,
            changed_run_ids=run_ids[side]))
    result = VerifyResult(base=plan.base, device_type=device.type, device_name=device.name,
                          trial_steps=plan.trial_steps, changes=tuple(verified),
                          busy=busy_machine(rates[0], load_at_start))
    yield SequenceEnded(kind="verify", sequence_id=sequence_id, status=status, result=result,
                        reason=reason)
