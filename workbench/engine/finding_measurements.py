"""Findings with what their changes measured on this run's device (the history's measured changes), ranked by it.

Pure: the caller reads the history and binds the lookup to the run's settings and device.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

from workbench.engine.run_summary import Finding, MeasuredChange

# What a change measured on this run's device against its settings (the history's measured changes), by
# (field, value); None where it was never measured. The caller binds the run's settings and device.
MeasuredChangeLookup = Callable[[str, Any], Optional[MeasuredChange]]


def with_measured_changes(findings: Sequence[Finding], lookup: MeasuredChangeLookup) -> tuple[Finding, ...]:
    """The findings with what their changes measured here, ranked by it.

    A measured remedy's text ends with its measurement ("measured 1.31×: faster (1.25–1.37, 3+3 trials)").
    Measured gains come first (the largest first), measured losses last, so a measured loss is never the first
    "Try" while anything else is offered. Within a problem its remedies are reordered so; problems with a measured
    gain move to the front (the largest gain first) and one whose remedies all measured slower to the back (a
    problem keeps its remedies together: the GPU time tab shows each under its headline). Findings without a
    setting, and unmeasured or within-the-noise ones, keep their order. Pure: the caller reads the history.
    """
    measured = [_measured(finding, lookup) for finding in findings]
    groups: list[list[Finding]] = []
    for finding in measured:
        if groups and groups[-1][0].headline == finding.headline:
            groups[-1].append(finding)
        else:
            groups.append([finding])
    for group in groups:
        group.sort(key=_remedy_rank)  # stable: equal ranks keep the rules' order
    groups.sort(key=_problem_rank)
    return tuple(finding for group in groups for finding in group)


def _measured(finding: Finding, lookup: MeasuredChangeLookup) -> Finding:
    if finding.field is None:
        return finding
    measurement = lookup(finding.field, finding.value)
    if measurement is None:
        return finding
    text = finding.text.rstrip().rstrip(".")
    return dataclasses.replace(finding, measured=measurement, text=f"{text}; {measurement.describe()}.")


def _remedy_rank(finding: Finding) -> tuple[int, float]:
    measured = finding.measured
    if measured is None or measured.verdict == "within_noise":
        return (1, 0.0)
    if measured.verdict == "faster":
        return (0, -measured.speedup)
    return (2, 0.0)


def _problem_rank(group: list[Finding]) -> tuple[int, float]:
    """A problem with a measured gain first (the largest gain first), one whose remedies all measured slower last."""
    gains = [f.measured.speedup for f in group if f.measured is not None and f.measured.verdict == "faster"]
    if gains:
        return (0, -max(gains))
    remedies = [f for f in group if f.field is not None]
    if remedies and all(f.measured is not None and f.measured.verdict == "slower" for f in remedies):
        return (2, 0.0)
    return (1, 0.0)
