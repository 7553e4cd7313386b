"""Sweeps: one setting over a list of values (or two, as a grid), each member an ordinary run.

Every member is checked before the first starts: one bad value and nothing runs, with every
problem listed. Members run one after another with the caller's stop flag: stop ends the whole
sweep; a member that fails (out of memory, diverged) is marked failed and the sweep goes on.

With ``repeats`` N every value runs N times, interleaved: round-robin over the values, N rounds
(a b c a b c …), so a machine that warms up, throttles or gets busy weighs on every value alike. Each
value then reads as the median of its runs and its interval (experiments/rate_over_runs.py).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from workbench.config import ConfigError, RunConfig
from workbench.device_info import Probe
from workbench.experiments.events import (
    AnyEvent,
    SequenceEnded,
    SweepResult,
    Values,
    values_label,
)
from workbench.experiments.measured import keep, sweep_changes
from workbench.experiments.members import (
    RunFunction,
    StopFlag,
    open_sequence,
    plan_dict,
    probe_device,
)
from workbench.experiments.recording import RecorderFactory
from workbench.experiments.rounds import MAX_REPEATS, Arm, run_rounds
from workbench.experiments.values import field_problem

MAX_AXES = 2


@dataclass(frozen=True)
class SweepAxis:
    field: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class SweepPlan:
    base: RunConfig  # every member's settings except the swept ones; its length (epochs or max_steps) is theirs
    axes: tuple[SweepAxis, ...]
    name: str = ""
    repeats: int = 1  # runs of each value, interleaved: round-robin over the values, this many rounds

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(axis.field for axis in self.axes)

    @property
    def display_name(self) -> str:
        return self.name or "sweep " + " × ".join(self.fields)

    def combinations(self) -> list[tuple[Values, RunConfig]]:
        """(values, settings) of each value (each combination of a grid), the first setting varying slowest."""
        combinations = []
        for combination in itertools.product(*(axis.values for axis in self.axes)):
            values: Values = tuple(zip(self.fields, combination))
            combinations.append((values, self.base.replace(**dict(values))))
        return combinations

    def members(self) -> list[tuple[Values, RunConfig]]:
        """Every member in the order they run: the combinations once per round, ``repeats`` rounds."""
        return self.combinations() * self.repeats

    def to_plan_dict(self) -> dict[str, Any]:
        return plan_dict(self.base, axes=[{"field": axis.field, "values": list(axis.values)} for axis in self.axes],
                         repeats=self.repeats)


def plan_problems(plan: SweepPlan, probe: Optional[Probe] = None) -> list[str]:
    """Every problem with the sweep and with each of its members, in words; [] when all can run.

    A problem every member shares is said once; one that only some have names them by their values.
    """
    problems: list[str] = []
    if not 1 <= plan.repeats <= MAX_REPEATS:
        problems.append(f"repeats must be between 1 and {MAX_REPEATS} (got {plan.repeats:,})")
    if not plan.axes:
        problems.append("a sweep needs a setting to vary and its values")
    if len(plan.axes) > MAX_AXES:
        problems.append(f"a sweep varies at most {MAX_AXES} settings (got {len(plan.axes)})")
    fields = [axis.field for axis in plan.axes]
    for name in sorted({name for name in fields if fields.count(name) > 1}):
        problems.append(f"{name} is swept twice: give a second, different setting")
    for axis in plan.axes:
        problem = field_problem(axis.field)
        if problem:
            problems.append(problem)
        if not axis.values:
            problems.append(f"{axis.field}: no values given")
        repeated = sorted({str(value) for value in axis.values if list(axis.values).count(value) > 1})
        if repeated:
            problems.append(f"{axis.field} lists {', '.join(repeated)} more than once")
    if problems:
        return problems

    from workbench.data_check import data_problems

    probe = probe or probe_device
    found: dict[str, list[int]] = {}
    members = plan.combinations()  # a repeat is the same settings: checked once
    for index, (values, config) in enumerate(members):
        try:
            RunConfig.from_dict(config.to_dict())  # the values' types, as a stored run would be read back
            member_problems = config.validate(probe(config.device)) or data_problems(config)
        except ConfigError as error:
            member_problems = error.problems
        for problem in member_problems:
            found.setdefault(problem, []).append(index)
    for problem, indices in found.items():
        problems.append(problem if len(indices) == len(members) else f"{problem} ({_which(indices, members)})")
    return problems


def _which(indices: list[int], members: list[tuple[Values, RunConfig]]) -> str:
    """The members with a problem in the fewest words: "precision=fp16" when that value is what they
    share, else each member's values."""
    for axis in range(len(members[0][0])):
        name = members[0][0][axis][0]
        shared: list[Any] = []
        for index in indices:
            value = members[index][0][axis][1]
            if value not in shared:
                shared.append(value)
        if [i for i, (values, _) in enumerate(members) if values[axis][1] in shared] == indices:
            return ", ".join(values_label(((name, value),)) for value in shared)
    return "; ".join(values_label(members[index][0]) for index in indices)


def run_sweep(
    plan: SweepPlan,
    stop: StopFlag,
    recorders: Optional[RecorderFactory] = None,
    run_function: Optional[RunFunction] = None,
    probe: Optional[Probe] = None,
) -> Iterator[AnyEvent]:
    """Run every member of ``plan``; yield the sequence's events and each member's engine events."""
    problems = plan_problems(plan, probe)
    members = plan.members() if not problems else []
    runner = yield from open_sequence("sweep", plan.display_name, plan.base, problems, plan.to_plan_dict(), recorders,
                                      run_function, [config for _, config in members], planned_members=len(members),
                                      fields=plan.fields)
    if runner is None:
        return
    arms = [Arm(config, values) for values, config in plan.combinations()]

    def label(arm: int, round_index: int) -> str:
        return values_label(arms[arm].values) + (f", repeat {round_index + 1}/{plan.repeats}" if plan.repeats > 1 else "")

    ran = yield from run_rounds(runner, arms, stop, label, plan.repeats)
    done, reason = ran.members, ran.stop_reason(stop, len(members), "member")
    sequence_id = runner.sequence_id
    for change in sweep_changes(done, sequence_id):  # each value against each other, for the findings to read
        yield from keep(runner.recorders, change)
    yield SequenceEnded(kind="sweep", sequence_id=sequence_id, status=ran.status,
                        result=SweepResult(members=tuple(done), repeats=plan.repeats), reason=reason)
