"""Keeping what a comparison measured, for the findings to read back.

A change of one setting measured against a baseline on one device, interleaved, with an interval, is one row of
the history's ``comparisons`` table (history/measured_changes.py). A finding of any later run with the same speed
settings on that device then carries it, whichever sequence measured it: a verification, the search for faster
settings (each change it tried against the best settings so far), or a sweep with repeats (each pair of its
values that differ in one setting, both ways, compared over their repeats). No torch, no Qt.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

from workbench.config import NOT_SPEED_SETTINGS, RunConfig
from workbench.experiments.ab import ABResult, compare_rates
from workbench.experiments.events import MemberEnded, RecordingFailed, values_label
from workbench.experiments.recording import RecorderFactory
from workbench.history.measured_changes import MeasuredChangeRecord


def measured_change(
    *, sequence_id: Optional[int], device_type: Optional[str], device_name: Optional[str], baseline: RunConfig,
    field: str, value: Any, comparison: ABResult, baseline_run_ids: Sequence[Optional[int]],
    changed_run_ids: Sequence[Optional[int]],
) -> Optional[MeasuredChangeRecord]:
    """The row to keep; None when there is nothing worth keeping: no interval (too few trials), no device to
    match, or a setting that decides no speed."""
    if (comparison.speedup is None or comparison.speedup_low is None or comparison.speedup_high is None
            or not device_type or not device_name or field in NOT_SPEED_SETTINGS):
        return None
    return MeasuredChangeRecord(
        sequence_id=sequence_id, device_type=device_type, device_name=device_name, baseline=baseline, field=field,
        value=value, speedup=comparison.speedup, speedup_low=comparison.speedup_low,
        speedup_high=comparison.speedup_high, verdict=comparison.verdict, baseline_run_ids=tuple(baseline_run_ids),
        changed_run_ids=tuple(changed_run_ids))


def keep(recorders: RecorderFactory, change: Optional[MeasuredChangeRecord]) -> Iterator[RecordingFailed]:
    """Store ``change``; a history that cannot take it (a full disk, a locked database) is said, not raised: the
    measurement itself still stands."""
    if change is None:
        return
    try:
        recorders.add_measured_change(change)
    except Exception as error:
        yield RecordingFailed(run_id=None, reason=f"the measurement of {values_label(((change.field, change.value),))} "
                                                  f"was not kept: {type(error).__name__}: {error}")


def one_speed_setting(baseline: RunConfig, change: dict[str, Any]) -> Optional[tuple[str, Any]]:
    """(field, value) when ``change`` moves ``baseline`` in one setting that decides speed (lr, scaled with a batch
    size, aside); None for a change of several (pipeline and augment together), which no finding proposes."""
    speed = [(field, value) for field, value in change.items()
             if field not in NOT_SPEED_SETTINGS and getattr(baseline, field) != value]
    return speed[0] if len(speed) == 1 else None


def sweep_changes(members: Sequence[MemberEnded], sequence_id: Optional[int]) -> list[MeasuredChangeRecord]:
    """A sweep's measured changes: each two of its values (combinations of a grid) that differ in one setting,
    both ways, compared over their finished repeats when both ran on one device."""
    groups: dict[Any, list[MemberEnded]] = {}
    for member in members:
        groups.setdefault(member.values, []).append(member)
    finished = {values: [m for m in group if m.status == "finished" and m.images_per_sec]
                for values, group in groups.items()}
    changes: list[MeasuredChangeRecord] = []
    for a, a_runs in finished.items():
        for b, b_runs in finished.items():
            differing = [(field, value) for (field, value), (_, base) in zip(b, a) if value != base]
            if len(differing) != 1 or not a_runs or not b_runs:
                continue
            devices = {(m.summary.device_type, m.summary.device_name) for m in (*a_runs, *b_runs)}
            if len(devices) != 1:
                continue
            ((device_type, device_name),) = devices
            field, value = differing[0]
            change = measured_change(
                sequence_id=sequence_id, device_type=device_type, device_name=device_name, baseline=a_runs[0].config,
                field=field, value=value, comparison=compare_rates([m.images_per_sec or 0.0 for m in a_runs],
                                                                   [m.images_per_sec or 0.0 for m in b_runs]),
                baseline_run_ids=[m.run_id for m in a_runs], changed_run_ids=[m.run_id for m in b_runs])
            if change is not None:
                changes.append(change)
    return changes
