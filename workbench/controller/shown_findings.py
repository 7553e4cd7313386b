"""The findings the GPU time tab shows, and what their changes measured (no Qt).

The tab shows the findings of the last run that ended (a verification's own trials leave them in place): first
as the run gave them, then, once the history has been read off the GUI thread, with what their changes measured
on that run's device from its settings (findings.with_measured_changes); a verification that just ended adds its own
measurements, which show even when the history keeps nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from workbench.config import RunConfig
from workbench.engine.finding_measurements import MeasuredChangeLookup, with_measured_changes
from workbench.engine.run_summary import Finding, MeasuredChange, RunSummary
from workbench.experiments.events import VerifyResult
from workbench.experiments.verify import measured_change_of
from workbench.history.measured_changes import lookup, value_key

if TYPE_CHECKING:
    from workbench.controller.view import WindowView
    from workbench.history.measured_changes import MeasuredChangeRecord


@dataclass(frozen=True)
class FindingsOf:
    """A run whose findings are shown: what Verify measures against."""

    config: RunConfig
    summary: RunSummary
    run_id: Optional[int]  # None when the history does not have the run

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.summary.findings

    @property
    def measurable(self) -> bool:
        """A finding names a setting, and the run's device is known: the history may hold a measurement."""
        return (any(finding.field is not None for finding in self.findings)
                and bool(self.summary.device_type) and bool(self.summary.device_name))


def read_measured_changes(recordings: Callable[[], Any], source: FindingsOf) -> list[MeasuredChangeRecord]:
    """What the history holds for ``source``'s settings on its device: called off the GUI thread, through a
    recorder factory of its own (a SQLite connection belongs to the thread that opens it), closed after."""
    recorders = recordings()
    try:
        return recorders.measured_changes(source.config, source.summary.device_type, source.summary.device_name)
    finally:
        close = getattr(recorders, "close", None)
        if close is not None:
            close()


def verified_lookup(result: Optional[VerifyResult]) -> MeasuredChangeLookup:
    """What a verification that just ended measured, by (field, value)."""
    measured: dict[tuple[str, str], MeasuredChange] = {}
    for change in result.changes if result is not None else ():
        measurement = measured_change_of(change.comparison)
        if measurement is not None and measurement.low is not None:
            measured[(change.field, value_key(change.value))] = measurement
    return lambda field, value: measured.get((field, value_key(value)))


def either(first: MeasuredChangeLookup, then: MeasuredChangeLookup) -> MeasuredChangeLookup:
    return lambda field, value: first(field, value) or then(field, value)


class ShownFindings:
    """The findings on the GPU time tab: whose they are (``source``, what Verify measures against) and drawing them."""

    def __init__(self, view: WindowView, recordings: Callable[[], Any]):
        self.view, self.recordings = view, recordings
        self.source: Optional[FindingsOf] = None
        self._drawn = 0  # counts the draws: a history read that comes back after a newer draw is dropped

    def show(self, source: FindingsOf, verified: Optional[VerifyResult] = None) -> None:
        """Draw ``source``'s findings with what a verification just measured, then, read off the GUI thread,
        with what the history holds for them."""
        self.source = source
        self._drawn += 1
        drawn = self._drawn
        just_measured = verified_lookup(verified)
        self.view.draw_findings(with_measured_changes(source.findings, just_measured))
        if not source.measurable:
            return

        def read_back(changes: list) -> None:
            if drawn == self._drawn:  # nothing newer was drawn meanwhile
                self.view.draw_findings(with_measured_changes(source.findings, either(just_measured, lookup(changes))))

        # A history that cannot be read leaves the findings as drawn (what a verification just measured included).
        self.view.run_in_background(lambda: read_measured_changes(self.recordings, source), read_back,
                                    lambda error: None)
