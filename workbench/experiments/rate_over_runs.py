"""What repeated runs of one setting came to: the median of their steady-state images/sec and its interval.

Runs of the same settings differ by 8–15 % on one machine, so a setting measured N times (``--repeats N``)
reads as the median of its runs' rates with the order-statistic interval of that median
(``ab.median_interval``: exact coverage, 75 % with 3 runs, 90 % from 5). A setting measured once has
only its run's own interval, from the spread of its steady windows (engine/spread.py): narrower, because it
cannot see the run-to-run noise; ``interval_from`` says which one a figure carries. No torch, no Qt.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal, Optional, Sequence

from workbench.experiments.ab import CONFIDENCE, ABResult, compare_rates, median_interval
from workbench.formatting import rate_interval_text

if TYPE_CHECKING:
    from workbench.engine.run_summary import RunSummary
    from workbench.experiments.events import MemberEnded, Values

IntervalFrom = Literal["repeats", "windows"]


@dataclass(frozen=True)
class RateOverRuns:
    """images/sec over one setting's runs: the median of the finished ones, and its interval (None without one)."""

    rates: tuple[float, ...]  # the finished runs' steady-state images/sec, in the order they ran
    images_per_sec: Optional[float]
    images_per_sec_low: Optional[float] = None
    images_per_sec_high: Optional[float] = None
    confidence: Optional[float] = None  # the interval's coverage
    interval_from: Optional[IntervalFrom] = None  # the runs' spread, or (one run) its steady windows' spread
    no_rate_reason: Optional[str] = None  # why images_per_sec is None: no run finished, or none had a steady state

    @property
    def runs(self) -> int:
        return len(self.rates)

    @property
    def unmeasured_reason(self) -> str:
        """Why there is no images/sec ("no run finished", or that the finished runs had no steady window)."""
        return self.no_rate_reason or "no run finished"

    def interval_text(self) -> str:
        """"1,200–1,260" ("… (75 %)" where the coverage is not 90 %); "" without an interval."""
        return rate_interval_text(self.images_per_sec_low, self.images_per_sec_high, self.confidence)

    def describe(self) -> str:
        """"1,234 img/s (median of 3 runs, 1,200–1,260 (75 %))", or for one run "… (one run; within it …)"."""
        if self.images_per_sec is None:
            return self.unmeasured_reason
        interval = self.interval_text()
        if self.runs == 1:  # its windows' interval is within the run: the next run may differ by more
            return (f"{self.images_per_sec:,.0f} img/s (one run" + (f"; within it {interval}" if interval else "")
                    + ": the next run may differ by more)")
        return (f"{self.images_per_sec:,.0f} img/s (median of {self.runs} runs"
                + (f", {interval})" if interval else ", no interval under 3 runs)"))


def rate_over(summaries: Sequence[RunSummary]) -> RateOverRuns:
    """The rate of one setting over its runs' summaries (failed and stopped runs are left out)."""
    rated = [(summary, float(summary.images_per_sec)) for summary in summaries
             if summary.status == "finished" and summary.images_per_sec]
    finished = [summary for summary, _ in rated]
    rates = tuple(rate for _, rate in rated)
    if not rates:
        return RateOverRuns(rates=(), images_per_sec=None, no_rate_reason=no_rate_reason(summaries))
    if len(rates) == 1:
        only = finished[0]
        has_interval = only.images_per_sec_low is not None and only.images_per_sec_high is not None
        return RateOverRuns(rates=rates, images_per_sec=rates[0], images_per_sec_low=only.images_per_sec_low,
                            images_per_sec_high=only.images_per_sec_high,
                            confidence=CONFIDENCE if has_interval else None,
                            interval_from="windows" if has_interval else None)
    interval = median_interval(rates)
    low, high, coverage = interval if interval is not None else (None, None, None)
    return RateOverRuns(rates=rates, images_per_sec=statistics.median(rates), images_per_sec_low=low,
                        images_per_sec_high=high, confidence=coverage,
                        interval_from="repeats" if interval is not None else None)


def no_rate_reason(summaries: Sequence[RunSummary]) -> str:
    """Why runs give no images/sec: none finished, or those that did had no steady window (too few steps)."""
    finished = [summary for summary in summaries if summary.status == "finished"]
    if not finished:
        return "no run finished"
    why = next((summary.no_steady_state_reason for summary in finished if summary.no_steady_state_reason), None)
    return f"no finished run had a steady-state img/s ({len(finished)} finished" + (f"; {why})" if why else ")")


def compared(baseline: RateOverRuns, changed: RateOverRuns) -> Optional[ABResult]:
    """The A/B of two settings' runs (ab.compare_rates); None unless each has at least two runs (one run
    each says nothing about run-to-run noise: a verdict needs repeats)."""
    if baseline.runs < 2 or changed.runs < 2:
        return None
    return compare_rates(baseline.rates, changed.rates)


@dataclass(frozen=True)
class ValueResult:
    """One swept value (or combination) over its repeats."""

    values: Values
    members: tuple[MemberEnded, ...]  # every repeat, finished or not, in the order they ran
    rate: RateOverRuns

    @property
    def run_ids(self) -> tuple[Optional[int], ...]:
        return tuple(member.run_id for member in self.members)


def per_value(members: Sequence[MemberEnded]) -> list[ValueResult]:
    """The members grouped by their values, in the order each value first ran."""
    groups: dict[Values, list[MemberEnded]] = {}
    for member in members:
        groups.setdefault(member.values, []).append(member)
    return [ValueResult(values, tuple(group), rate_over([member.summary for member in group]))
            for values, group in groups.items()]


def fastest_text(results: Sequence[ValueResult], label: Callable[[ValueResult], str]) -> str:
    """"Fastest: 4 at 1,234 img/s, median of 3; against 2: measured 1.30× faster (1.20–1.40, 3+3 trials)" where the
    interval against the runner-up says so; else "Highest median: …" with what the comparison says ("within the
    noise …"), or, without repeats, that the order of single runs is no verdict. "" with fewer than two measured
    values. No ratio to the slowest: a ratio of two medians without its interval would read as a gain."""
    measured = sorted((result for result in results if result.rate.images_per_sec),
                      key=lambda result: result.rate.images_per_sec or 0.0, reverse=True)
    if len(measured) < 2:
        return ""
    best, runner_up = measured[0], measured[1]
    rate = best.rate.images_per_sec or 0.0
    median = f", median of {best.rate.runs}" if best.rate.runs > 1 else ""
    comparison = compared(runner_up.rate, best.rate)
    title = "Fastest" if comparison is not None and comparison.verdict == "faster" else (
        "Highest median" if best.rate.runs > 1 else "Highest")
    text = f"{title}: {label(best)} at {rate:,.0f} img/s{median}"
    if comparison is not None:
        text += f"; against {label(runner_up)}: {comparison.describe()}"
    else:  # the order of single runs is no verdict: runs of the same settings differ by 8–15 %
        alone = "one run each" if best.rate.runs == runner_up.rate.runs == 1 else "one of them is one run"
        text += f"; no verdict against {label(runner_up)}: {alone} (repeats measure the noise)"
    return text


def against_baseline_text(results: Sequence[ValueResult], baseline: Values, label: Callable[[ValueResult], str]) -> str:
    """Each change against the baseline, the ratio always change ÷ baseline as the findings and `verify` state it:
    "num_workers=2 against num_workers=0: measured 0.86×: slower here, not recommended (0.84–0.93, 3+3 trials)";
    "" before the baseline has a run."""
    base = next((result for result in results if result.values == baseline), None)
    if base is None or base.rate.images_per_sec is None:
        return ""
    texts = []
    for result in results:
        if result is base:
            continue
        comparison = compared(base.rate, result.rate)
        if comparison is not None:
            texts.append(f"{label(result)} against {label(base)}: {comparison.describe()}")
        elif result.rate.images_per_sec is not None:
            texts.append(f"{label(result)} against {label(base)}: "
                         f"{result.rate.images_per_sec / base.rate.images_per_sec:.2f}×, no verdict before each side "
                         "has 2 trials")
    return "; ".join(texts)
