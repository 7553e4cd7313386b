"""The one primitive under every sequence: arms (settings) run in interleaved rounds, each run a recorded member.

A sweep is its values run for ``repeats`` rounds; ``run --repeats`` is one arm (or one per seed) for N rounds; a
verification is the baseline and each change, round after round until each change's interval decides; the search
for faster settings is one such comparison (the best so far and a change) after another; max-batch is a search loop
of one-arm, one-round plans. Interleaving (a b c a b c …) makes a machine that warms up, throttles or gets busy weigh
on every arm alike. What differs between them is only what a failed run means (``Arm.on_failure``) and when to run
another round (``more``); each words its own result from the one shape this returns, ``Rounds``.

No torch, no Qt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generator, Literal, Optional, Sequence

from workbench.config import RunConfig
from workbench.engine.requests import StopFlag, stopped_by
from workbench.experiments.events import AnyEvent, MemberEnded, SequenceStatus, Values
from workbench.experiments.members import MemberRunner

# What a failed run of an arm means: "go_on": it runs again next round (one value of a sweep out of memory says
# nothing of the others); "drop": that arm runs no more (a change that fails cannot be measured, the rest can);
# "end": nothing more runs (the baseline that every change is measured against; a repeat of settings that fail).
OnFailure = Literal["go_on", "drop", "end"]


@dataclass(frozen=True)
class Arm:
    config: RunConfig  # exactly as each of its runs trains (a trial's length already set)
    values: Values = ()  # what distinguishes it from the other arms
    purpose: str = ""  # "", or what the run is for: "baseline", "change", "best", "trial", "calibration"
    on_failure: OnFailure = "go_on"
    needs_rate: bool = False  # a run that finishes without a steady-state images/sec is a failed measurement


@dataclass
class Rounds:
    """What the rounds ran: every member in the order it ran, by arm; how they ended and why."""

    arms: tuple[Arm, ...]
    members: list[MemberEnded] = field(default_factory=list)
    arm_of: list[int] = field(default_factory=list)  # the arm of each member
    round_of: list[int] = field(default_factory=list)  # the round each member ran in
    status: SequenceStatus = "finished"
    stopped_during_run: bool = False  # stopped inside a run (else before one began)
    rounds_begun: int = 0
    stopped_between_rounds: bool = False  # stopped after a round's last run, before the next round's first
    failed: Optional[tuple[int, MemberEnded]] = None  # the failure that ended everything (an arm of "end")
    dropped: dict[int, MemberEnded] = field(default_factory=dict)  # arm → the failed run that dropped it

    def runs(self, arm: int) -> list[MemberEnded]:
        return [member for member, index in zip(self.members, self.arm_of) if index == arm]

    def rates(self, arm: int) -> list[float]:
        """The arm's finished runs' steady-state images/sec, in the order measured."""
        return [member.images_per_sec for member in self.runs(arm)
                if member.status == "finished" and member.images_per_sec]

    def run_ids(self, arm: int) -> list[Optional[int]]:
        """The history ids of the runs ``rates`` reads."""
        return [member.run_id for member in self.runs(arm) if member.status == "finished" and member.images_per_sec]

    def rates_beside(self, arm: int, other: int) -> list[float]:
        """``rates(arm)`` of the rounds ``other`` ran in: a comparison with ``other`` reads only the trials interleaved
        with its own (a baseline that ran on for another arm's extra rounds is not this arm's)."""
        return [member.images_per_sec for member in self._beside(arm, other) if member.images_per_sec]

    def run_ids_beside(self, arm: int, other: int) -> list[Optional[int]]:
        """The history ids of the runs ``rates_beside`` reads."""
        return [member.run_id for member in self._beside(arm, other)]

    def _beside(self, arm: int, other: int) -> list[MemberEnded]:
        rounds = {round_index for index, round_index in zip(self.arm_of, self.round_of) if index == other}
        return [member for member, index, round_index in zip(self.members, self.arm_of, self.round_of)
                if index == arm and round_index in rounds and member.status == "finished" and member.images_per_sec]

    def stop_reason(self, stop: StopFlag, planned: int, noun: str) -> Optional[str]:
        """"stopped by Ctrl-C during member 3 of 6", "… after 2 of 6 members"; None when not stopped."""
        if self.status != "stopped":
            return None
        done = len(self.members)
        return f"stopped by {stopped_by(stop)} " + (f"during {noun} {done} of {planned}" if self.stopped_during_run
                                                    else f"after {done} of {planned} {noun}s")

    def failure(self, arm: int) -> Optional[str]:
        """Why the arm stopped running on a failure (None when it did not)."""
        ended = self.dropped.get(arm) or (self.failed[1] if self.failed and self.failed[0] == arm else None)
        if ended is None:
            return None
        return ended.reason or f"the trial ended {ended.status} without a rate"


MAX_REPEATS = 100  # rounds a sweep or `run --repeats` may ask for (the window's spin box stops there too)

Label = Callable[[int, int], str]  # (arm, round) → the member's run name after its data: "num_workers=2, repeat 2/3"
More = Callable[[Rounds], Sequence[int]]  # after the planned rounds: the arms that need another round ([]: done)


def run_rounds(
    runner: MemberRunner,
    arms: Sequence[Arm],
    stop: StopFlag,
    label: Label,
    rounds: int = 1,
    *,
    max_rounds: Optional[int] = None,
    more: Optional[More] = None,
    after_run: Optional[Callable[[int, MemberEnded], None]] = None,
) -> Generator[AnyEvent, None, Rounds]:
    """Run ``arms`` round-robin for ``rounds`` rounds, then (up to ``max_rounds``) another round of the arms ``more``
    names while it names any; yield every member's events, return what ran. ``after_run`` sees each member as it
    ends and may raise to end the sequence (a time budget)."""
    done = Rounds(arms=tuple(arms))
    running = list(range(len(arms)))
    for round_index in range(max(rounds, max_rounds or 0)):
        if round_index >= rounds:
            wanted = set(more(done)) if more is not None else set()
            running = [arm for arm in running if arm in wanted]
            if not running:
                break
        for position, arm_index in enumerate(list(running)):
            if stop():
                done.status, done.stopped_between_rounds = "stopped", position == 0
                return done
            done.rounds_begun = round_index + 1  # a round begins with its first run, not before it
            arm = arms[arm_index]
            member = yield from runner.run(arm.config, arm.values, stop, label(arm_index, round_index), arm.purpose)
            done.members.append(member)
            done.arm_of.append(arm_index)
            done.round_of.append(round_index)
            if after_run is not None:
                after_run(arm_index, member)
            if member.status == "stopped":
                done.status, done.stopped_during_run = "stopped", True
                return done
            if member.status == "failed" or (arm.needs_rate and not member.images_per_sec):
                if arm.on_failure == "end":  # the sequence ends on it: failed, as its last run
                    done.failed, done.status = (arm_index, member), "failed"
                    return done
                if arm.on_failure == "drop":
                    done.dropped[arm_index] = member
                    running.remove(arm_index)
    return done
