"""One setting run N times (`workbench run --repeats N`): a sequence of kind "repeats", every run an ordinary
run in the history grouped under it, read as the median of their images/sec and its interval
(experiments/rate_over_runs.py).

The runs go one after another in this process with the caller's stop flag: stop ends the sequence. A run
that fails ends it too: the same settings would fail the same way, and a failure is not noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

from workbench.config import ConfigError, RunConfig
from workbench.device_info import Probe
from workbench.experiments.events import (
    AnyEvent,
    SequenceEnded,
    SweepResult,
)
from workbench.experiments.members import (
    RunFunction,
    StopFlag,
    open_sequence,
    plan_dict,
    probe_device,
)
from workbench.experiments.recording import RecorderFactory
from workbench.experiments.rounds import MAX_REPEATS, Arm, run_rounds
from workbench.history.naming import run_name


@dataclass(frozen=True)
class RepeatsPlan:
    base: RunConfig
    repeats: int
    name: str = ""
    # Each repeat with its own seed (base.seed, base.seed + 1, …): for a question about accuracy, whose spread over
    # seeds is the noise; with one seed every repeat reaches the same accuracy and only the speed varies.
    vary_seed: bool = False

    @property
    def display_name(self) -> str:
        return self.name or f"{run_name(self.base)} ×{self.repeats}" + (" seeds" if self.vary_seed else "")

    def member(self, index: int) -> RunConfig:
        return self.base.replace(seed=self.base.seed + index) if self.vary_seed else self.base


def plan_problems(plan: RepeatsPlan, probe: Optional[Probe] = None) -> list[str]:
    """What stops the runs from starting, in words; [] when they can run."""
    if not 1 <= plan.repeats <= MAX_REPEATS:
        return [f"repeats must be between 1 and {MAX_REPEATS} (got {plan.repeats:,})"]
    from workbench.data_check import data_problems

    try:
        return plan.base.validate((probe or probe_device)(plan.base.device)) or data_problems(plan.base)
    except ConfigError as error:
        return list(error.problems)


def run_repeats(
    plan: RepeatsPlan,
    stop: StopFlag,
    recorders: Optional[RecorderFactory] = None,
    run_function: Optional[RunFunction] = None,
    probe: Optional[Probe] = None,
) -> Iterator[AnyEvent]:
    """Run ``plan.base`` ``plan.repeats`` times; yield the sequence's events and each run's engine events."""
    runner = yield from open_sequence("repeats", plan.display_name, plan.base, plan_problems(plan, probe),
                                      plan_dict(plan.base, repeats=plan.repeats, vary_seed=plan.vary_seed), recorders,
                                      run_function, planned_members=plan.repeats)
    if runner is None:
        return
    members = [plan.member(index) for index in range(plan.repeats)] if plan.vary_seed else [plan.base]
    arms = [Arm(config, (("seed", config.seed),) if plan.vary_seed else (), on_failure="end") for config in members]

    def label(arm: int, round_index: int) -> str:  # a seed is an arm of one round; one seed, one arm of N rounds
        return f"repeat {arm + round_index + 1}/{plan.repeats}" + (f", seed {arms[arm].config.seed}" if plan.vary_seed
                                                                    else "")

    ran = yield from run_rounds(runner, arms, stop, label, 1 if plan.vary_seed else plan.repeats)
    done, reason = ran.members, ran.stop_reason(stop, plan.repeats, "run")
    if ran.failed is not None:
        left = plan.repeats - len(done)
        reason = f"run {len(done)} of {plan.repeats} failed ({ran.failed[1].reason})" + (
            f"; the other {left} {'was' if left == 1 else 'were'} not run" if left else "")
    yield SequenceEnded(kind="repeats", sequence_id=runner.sequence_id, status=ran.status,
                        result=SweepResult(members=tuple(done), repeats=plan.repeats), reason=reason)
