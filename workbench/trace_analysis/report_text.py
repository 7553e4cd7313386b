"""`workbench trace` in words: one rank's report, a folder's ranks side by side, and two traces compared.

A figure that could not be read is said so ("n/a"), never printed as 0. No torch, no Qt.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

from workbench.formatting import format_step_seconds
from workbench.trace_analysis.comparing import (BATCH_HINT, MIN_STEPS, NO_STEPS_TO_COMPARE_BY, NamedChange,
                                                RankComparison, kernels_not_compared, names_compared_per_step,
                                                per_step, run_to_run_caveat, step_verdict_text, straggler, work_moved,
                                                work_moved_text)
from workbench.trace_analysis.comparison_caveats import comparison_caveats, other_device
from workbench.trace_analysis.model import EXPOSED_COPIES, NO_GPU_WORK, NamedSeconds, RankReport, TraceReport
from workbench.trace_analysis.wording import (
    PROVE_AT_THE_CLI,
    ZERO_WINDOW,
    data_wait_spans,
    dataloader_unknown,
    device_words,
    host_wait_calls_text,
    ops_on_threads_at_once_text,
    prove_a_change,
    queued_waits_text,
    short_names,
    why_unavailable,
)

TOP_SHOWN = 5


def report_lines(report: TraceReport) -> list[str]:
    numbers = len({rank.rank for rank in report.ranks})
    lines = [f"{report.path}: {numbers} rank{'s' if numbers != 1 else ''}"
             + (f" in {len({rank.file for rank in report.ranks})} files" if numbers < len(report.ranks) else "")]
    lines += [f"  note: {note}" for note in report.notes]
    if len(report.ranks) > 1:
        lines += [""] + ranks_side_by_side(report.ranks)
    several_files = len({rank.file for rank in report.ranks}) > 1  # a folder: each rank names its file
    for rank in report.ranks:
        lines += [""] + rank_lines(rank, several_files)
    prove = prove_a_change(report.ranks, PROVE_AT_THE_CLI)
    if prove:
        lines += ["", prove]
    return lines


def rank_lines(rank: RankReport, name_file: bool = False) -> list[str]:
    lines = [f"rank {rank.rank} · {device_words(rank)}" + (f" · {os.path.basename(rank.file)}" if name_file else "")]
    lines.append("  " + _steps_line(rank))
    if rank.cpu_only:
        lines.append(f"  GPU time: {NO_GPU_WORK} (the notes say why): only the host's figures below")
    else:
        over = "the steps" if rank.steps > 0 else "the first to the last GPU event"
        lines.append(f"  GPU time over {over}: compute {_pct(rank.compute_share)} · communication "
                     f"{_pct(rank.communication_share)} · memory {_pct(rank.memory_share)} · idle "
                     f"{_pct(rank.idle_share)}  ({rank.kernels:,} kernel{'' if rank.kernels == 1 else 's'})")
        if rank.idle_share == 0:
            lines.append("  idle: none (the GPU was never idle, so there is no idle time to split by cause)")
        elif rank.idle_share is None:
            lines.append(f"  idle: n/a ({ZERO_WINDOW})")
        else:
            data = (_pct(rank.idle_for_data_share) if rank.idle_for_data_share is not None
                    else f"n/a ({why_unavailable(rank, 'idle_for_data_share')})")
            lines.append(f"  idle: waiting for data {data} · for the host "
                         f"{_pct(rank.idle_for_host_share)} · kernel wait {_pct(rank.idle_kernel_wait_share)} · "
                         f"other {_pct(rank.idle_other_share)} (shares of the idle time)")
        span = rank.gpu_span or {}  # None only on a CPU-only trace, said above
        as_hta = rank.gpu_span_as_hta or {}
        by_hta = (f"; by HTA's rules (docs/gpu-time.md): idle {_pct(as_hta.get('idle_share'))} · compute "
                  f"{_pct(as_hta.get('compute_share'))} · non-compute {_pct(as_hta.get('non_compute_share'))}"
                  if as_hta else "")
        lines.append(f"  first to last GPU event (HTA's window): idle {_pct(span.get('idle_share'))} · compute "
                     f"{_pct(span.get('compute_share'))} · non-compute {_pct(span.get('non_compute_share'))}{by_hta}")
    lines.append(f"  DataLoader (host in {data_wait_spans(rank)}): "
                 + (f"{_pct(rank.dataloader_share)} of {'the step time' if rank.steps else 'the traced window'}"
                    if rank.dataloader_share is not None else f"n/a ({dataloader_unknown(rank)})"))
    if rank.top_kernels:
        lines.append("  top kernels: " + _named(rank.top_kernels))
    if rank.top_host_ops:
        lines.append("  top host ops by self time: " + _named(rank.top_host_ops))
        at_once = ops_on_threads_at_once_text(rank, NAME_CHARACTERS)
        if at_once:
            lines.append(f"  {at_once}")
    if rank.top_copies:
        lines.append("  copies and fills: " + _named(rank.top_copies))
    if rank.exposed_copies:  # what the copy-bound finding's change is chosen by
        lines.append(f"  {EXPOSED_COPIES}: {_named(rank.exposed_copies)}")
    waited_in = host_wait_calls_text(rank)
    if waited_in:  # what the launch- and allocator-bound findings are told apart by
        lines.append(f"  {waited_in}")
    lines += [f"  {line}" for line in queued_waits_text(rank)]  # the idle no finding names: where to look
    if rank.sync_calls:
        lines.append("  device syncs, by the host op that called them: " + _named(rank.sync_calls))
    lines += [f"  note: {note}" for note in rank.notes]
    if rank.findings:
        lines.append("  findings:")
        said = None
        for finding in rank.findings:  # a problem's remedies share its text: say it once, then each change
            if finding.text != said:
                lines.append(f"    {finding.text}")
                said = finding.text
            lines.append(f"      Try: {finding.change}.")
    else:
        lines.append("  findings: none past their thresholds")
    return lines


def ranks_side_by_side(ranks: Sequence[RankReport]) -> list[str]:
    lines = ["ranks side by side:",
             f"  {'rank':>4}  {'steps':>5}  {'median step':>11}  {'compute':>7}  {'comm.':>6}  {'memory':>6}  "
             f"{'idle':>6}  device"]
    for rank in ranks:
        lines.append(f"  {rank.rank:>4}  {rank.steps:>5}  {format_step_seconds(rank.step_seconds_median):>11}  "
                     f"{_pct(rank.compute_share):>7}  {_pct(rank.communication_share):>6}  "
                     f"{_pct(rank.memory_share):>6}  {_pct(rank.idle_share):>6}  {device_words(rank)}")
    lines.append(f"  slowest: {straggler(ranks)}")
    return lines


def _file_in_folder(path: str, rank: RankReport) -> str:
    """", its file's name" where the rank was read from a file of the folder ``path`` (a folder's rank may be in
    several files: one process's profiling cycles)."""
    return f", {os.path.basename(rank.file)}" if rank.file and os.path.normpath(rank.file) != os.path.normpath(path) \
        else ""


def comparison_lines(before_path: str, after_path: str, comparison: RankComparison) -> list[str]:
    before, after = comparison.before, comparison.after
    lines = [f"before: {before_path} (rank {before.rank}, {device_words(before)}{_file_in_folder(before_path, before)})",
             f"after:  {after_path} (rank {after.rank}, {device_words(after)}{_file_in_folder(after_path, after)})",
             f"step time: {_step_summary(before)} → {_step_summary(after)}"]
    if comparison.pairing_caveat:  # said before the verdict: the verdict is of these two files, whatever they are
        lines.insert(2, f"  {comparison.pairing_caveat}")
    lines.append("  " + _step_verdict(comparison))
    lines += ["  " + line for line in _throughput_lines(comparison)]
    lines += ["  " + caveat for caveat in comparison_caveats(before, after)]
    if bool(before.steps) != bool(after.steps):  # shares over two windows: said, not read as a change
        lines.append(f"  the shares below are over each trace's own window: {_window_words(before, 'before')}, "
                     f"{_window_words(after, 'after')}")
    lines.append(f"  {'':<14}  {'before':>{_CELL}}  {'after':>{_CELL}}")
    for category in comparison.categories:
        lines.append(f"  {category.label:<14}  {_share_and_seconds(category.before_share, category.before_seconds_per_step)}"
                     f"  {_share_and_seconds(category.after_share, category.after_seconds_per_step)}".rstrip())
    lines.append(f"  {'DataLoader':<14}  {_share_and_seconds(before.dataloader_share, None)}"
                 f"  {_share_and_seconds(after.dataloader_share, None)}".rstrip())
    lines.append(f"findings: before: {_kinds(before)}; after: {_kinds(after)}")
    if not names_compared_per_step(before, after):
        lines.append(f"kernels and host ops: not set side by side per step ({NO_STEPS_TO_COMPARE_BY})")
    else:
        kernels_why = kernels_not_compared(before, after)
        if kernels_why:
            lines.append(f"kernels: not set side by side ({kernels_why})")
    for title, changes in (("kernels", comparison.kernels), ("host ops", comparison.host_ops)):
        if changes:
            lines.append(f"{title} that changed most (seconds per step):")
            # names as the report shows them: head and tail, and where two read alike, from where they differ
            names = short_names([change.name for change in changes], NAME_CHARACTERS)
            lines += [f"  {_change(change, name)}" for change, name in zip(changes, names)]
    return lines


def _window_words(rank: RankReport, side: str) -> str:
    if rank.steps:
        return f"{side}'s steps"
    return f"{side}'s first to last {'host' if rank.cpu_only else 'GPU'} event (it has no ProfilerStep#N)"


def _kinds(rank: RankReport) -> str:
    """"input-bound (95%), launch-bound (41%)": each problem once, with its figure."""
    kinds = {finding.kind: finding.figure for finding in rank.findings}
    return ", ".join(f"{kind} ({figure:.0%})" for kind, figure in kinds.items()) or "none"


def _step_verdict(comparison: RankComparison) -> str:
    if comparison.step_time_ratio is None:
        return "no verdict: a trace without steps has no step time to compare"
    return step_verdict_text(comparison.step_time)


def _throughput_lines(comparison: RankComparison) -> list[str]:
    """Samples per second where the user gave each trace's batch; else a hint where the work per step moved."""
    result = comparison.throughput
    if comparison.samples_per_step is not None and result is not None:
        before, after = comparison.samples_per_step
        if result.speedup is None:
            return [f"samples per second ({before:,} then {after:,} per step): n/a without steps"]
        head = f"samples per second ({before:,} then {after:,} per step): {result.speedup:.2f}×"
        if result.speedup_low is None or result.speedup_high is None:
            return [f"{head}; no verdict: fewer than {MIN_STEPS} steps in a trace give no interval"]
        words = {"faster": "more samples per second in these two traces: a gain",
                 "slower": "fewer samples per second in these two traces: a loss",
                 "within_noise": "within the steps' own spread: not a gain"}[result.verdict]
        return [f"{head} ({result.speedup_low:.2f}–{result.speedup_high:.2f} at {result.confidence:.0%}, "
                f"{result.trials.replace('trials', 'steps')}): {words}{run_to_run_caveat(result)}"]
    first, then = comparison.before, comparison.after
    moved = work_moved(per_step(first.compute_share, first.window_seconds, first.steps),
                       per_step(then.compute_share, then.window_seconds, then.steps))
    if moved is None:
        return []
    return [work_moved_text(moved, BATCH_HINT, bool(other_device(first.device, then.device, first.cpu_only,
                                                                  then.cpu_only)))]


def _step_summary(rank: RankReport) -> str:
    if rank.step_seconds_median is None:
        return "n/a"
    return f"{format_step_seconds(rank.step_seconds_median)} ({_spread(rank)})"


def _steps_line(rank: RankReport) -> str:
    if rank.steps == 0 or rank.step_seconds_median is None:
        over = "the first to the last host event" if rank.cpu_only else "the first to the last GPU event"
        return f"steps: none found (no ProfilerStep#N): figures over {over}"
    if rank.steps == 1:
        return f"1 step: {format_step_seconds(rank.step_seconds_median)} (no spread from one step)"
    each = ", ".join(format_step_seconds(seconds) for seconds in rank.step_seconds[:8])
    more = f", … ({len(rank.step_seconds) - 8} more)" if len(rank.step_seconds) > 8 else ""
    return (f"{rank.steps} steps: median {format_step_seconds(rank.step_seconds_median)} ({_spread(rank)}); "
            f"each: {each}{more}")


def _spread(rank: RankReport) -> str:
    if rank.steps < 2 or rank.step_seconds_low is None or rank.step_seconds_high is None:
        return "no spread from one step"
    return f"spread {format_step_seconds(rank.step_seconds_low)}–{format_step_seconds(rank.step_seconds_high)}"


_SHARE, _PER_STEP = 6, 13  # "100.0%", "999.9 ms/step": a comparison's columns, each right-aligned
_CELL = _SHARE + 1 + _PER_STEP


def _share_and_seconds(share: Optional[float], seconds: Optional[float]) -> str:
    """One side's cell of the comparison's table: the share and its seconds per step, each in a column."""
    per_step = f"{format_step_seconds(seconds)}/step" if seconds is not None else ""
    return f"{_pct(share):>{_SHARE}} {per_step:>{_PER_STEP}}"


def _change(change: NamedChange, name: str) -> str:
    before = format_step_seconds(change.before_seconds) if change.before_seconds is not None else "not in the top"
    after = format_step_seconds(change.after_seconds) if change.after_seconds is not None else "not in the top"
    delta = change.change_seconds
    moved = f" ({'+' if delta >= 0 else '−'}{format_step_seconds(abs(delta))})" if delta is not None else ""
    return f"{before} → {after}{moved}  {name}"


def _named(items: Sequence[NamedSeconds]) -> str:
    shown = sorted(items, key=lambda item: -item.seconds)[:TOP_SHOWN]
    names = short_names([item.name for item in shown], NAME_CHARACTERS)
    return "; ".join(f"{name} {format_step_seconds(item.seconds)}" for name, item in zip(names, shown))


NAME_CHARACTERS = 60  # a kernel's templated name runs to thousands: its middle is elided


def _pct(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    return f"{value if round(value, 3) != 0 else 0.0:.1%}"  # a share of -0.00004 (HTA's rules replayed) is 0.0%


