"""An opened trace's report as the window's Trace tab shows it, without Qt: per rank, the steps and their spread,
the GPU time split and the idle split (bars of labelled shares), the top kernels and host ops, the findings with the
figure and threshold that fired each and the change to make. The tab (gui/trace_tab.py) only draws these."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence

from workbench.formatting import format_short_seconds, format_step_seconds
from workbench.trace_analysis.model import EXPOSED_COPIES, NO_GPU_WORK, NamedSeconds, RankReport, TraceReport
from workbench.trace_analysis.wording import (PROVE_IN_THE_WINDOW, data_wait_spans, device_words,
                                             host_wait_calls_text, ops_on_threads_at_once_text, prove_a_change,
                                             queued_waits_text, short_names)
from workbench.trace_analysis.comparing import straggler

# The GPU time over the steps, and idle time by cause: (label, RankReport field, colour), in the bars' order.
GPU_TIME_PARTS: tuple[tuple[str, str, str], ...] = (
    ("compute", "compute_share", "#4c8fd6"),
    ("communication", "communication_share", "#9b6ad6"),
    ("memory", "memory_share", "#e0a030"),
    ("idle", "idle_share", "#d0d0d0"),
)
IDLE_PARTS: tuple[tuple[str, str, str], ...] = (
    ("waiting for data", "idle_for_data_share", "#e07b6a"),
    ("waiting for the host", "idle_for_host_share", "#e0b85a"),
    ("kernel wait", "idle_kernel_wait_share", "#8fb8de"),
    ("other", "idle_other_share", "#b8b8b8"),
)
TOP_COUNT = 8  # rows of each top list
NAME_CHARACTERS = 110  # a kernel's templated name runs to thousands: its middle is elided


@dataclass(frozen=True)
class Share:
    label: str
    share: float  # 0–1
    colour: str

    @property
    def text(self) -> str:
        return f"{self.label} {self.share * 100:.1f} %"


@dataclass(frozen=True)
class FindingLine:
    """One problem, its text saying the figure that fired it and the threshold (as the text report prints it), and
    every change offered for it (a finding per change in the report)."""

    kind: str
    text: str
    changes: tuple[str, ...]


@dataclass(frozen=True)
class RankSection:
    title: str  # "Rank 0 · NVIDIA A100-SXM4-80GB"
    steps: str  # the steps found and their time's spread, in words
    gpu_time: tuple[Share, ...]  # empty for a CPU-only trace (no GPU figures to read)
    idle: tuple[Share, ...]  # empty when the GPU was never idle
    facts: tuple[str, ...]  # HTA's window, the DataLoader's share, kernels
    top_kernels: tuple[tuple[str, str], ...]  # (name, time) rows
    top_host_ops: tuple[tuple[str, str], ...]
    top_copies: tuple[tuple[str, str], ...]  # copies and fills by name ("Memcpy HtoD (Pinned -> Device)")
    sync_calls: tuple[tuple[str, str], ...]
    findings: tuple[FindingLine, ...]
    notes: tuple[str, ...]
    gpu_time_title: str = "GPU time over the steps"  # or over the first to the last GPU event, without steps


@dataclass(frozen=True)
class TracePage:
    title: str  # the file or folder
    history: str  # where the history keeps it, or why it does not
    sections: tuple[RankSection, ...]
    notes: tuple[str, ...]
    # Several ranks: one row each (rank, steps, median step, compute, communication, memory, idle, device) and
    # the slowest named, since in a data-parallel job every other rank waits for it in communication.
    ranks_header: tuple[str, ...] = ()
    ranks_rows: tuple[tuple[str, ...], ...] = ()
    slowest: str = ""
    prove: str = ""  # how to prove a finding's change ("" where no rank has a finding)


RANKS_HEADER = ("rank", "steps", "median step", "compute", "communication", "memory", "idle", "device")
# Ranks drawn in full below the table (a section each). A 1,024-rank job's folder, or a process's thousand profiling
# cycles, would hold the window for seconds while drawn (2,000 sections: 1 s on the 2-core VM); the table holds them
# all, and `workbench trace PATH --rank N` prints any one.
MAX_SECTIONS = 64


def trace_page(report: TraceReport, history: str) -> TracePage:
    several_files = len({rank.file for rank in report.ranks}) > 1  # a folder: each section names its file
    sections = tuple(_rank_section(rank, several_files) for rank in report.ranks[:MAX_SECTIONS])
    notes = tuple(report.notes)
    if len(report.ranks) > MAX_SECTIONS:
        notes += (f"The first {MAX_SECTIONS} of the {len(report.ranks):,} reports are drawn in full below; the table "
                  "holds them all, and `workbench trace PATH --rank N` prints any one",)
    prove = prove_a_change(report.ranks, PROVE_IN_THE_WINDOW)
    prove = f"{prove[0].upper()}{prove[1:]}." if prove else ""
    if len(report.ranks) < 2:
        return TracePage(os.path.abspath(report.path), history, sections, notes, prove=prove)
    rows = tuple((str(rank.rank), str(rank.steps), _seconds(rank.step_seconds_median), _percent(rank.compute_share),
                  _percent(rank.communication_share), _percent(rank.memory_share), _percent(rank.idle_share),
                  device_words(rank)) for rank in report.ranks)
    return TracePage(os.path.abspath(report.path), history, sections, notes, RANKS_HEADER, rows,
                     f"Slowest rank: {straggler(report.ranks)}", prove)


def _seconds(seconds: Optional[float]) -> str:
    return "–" if seconds is None else format_step_seconds(seconds)


def history_line(record_id: Optional[int], kept_before: bool, note: Optional[str]) -> str:
    """Where the Runs tab lists the opened trace."""
    if record_id is None:
        return note or "not kept in the history"
    if kept_before and note:  # its figures were brought up to date, or could not be
        return f"Opened before: the Runs tab lists it as #{record_id} (the same bytes, by sha256); {note}"
    if kept_before:
        return (f"Opened before: the Runs tab lists it as #{record_id} (the same bytes, by sha256; kept once, "
                "with these figures)")
    return f"Kept in the history as #{record_id}: the Runs tab lists it, to compare and export"


def _rank_section(rank: RankReport, name_file: bool = False) -> RankSection:
    cpu_only = bool(getattr(rank, "cpu_only", False))
    gpu_time = () if cpu_only else _shares(rank, GPU_TIME_PARTS)
    idle = () if cpu_only or not rank.idle_share else _shares(rank, IDLE_PARTS)
    facts = []
    if cpu_only:
        facts.append(f"{NO_GPU_WORK[0].upper()}{NO_GPU_WORK[1:]} (the notes say why): only the host's figures below")
    else:
        span = rank.gpu_span or {}
        parts = (("idle", "idle_share"), ("compute", "compute_share"), ("non-compute", "non_compute_share"))
        as_hta = rank.gpu_span_as_hta or {}
        facts.append("Over HTA's window (first to last GPU event): " + ", ".join(
            f"{label} {_percent(span.get(key))}" for label, key in parts) + (
            "; by HTA's rules: " + ", ".join(f"{label} {_percent(as_hta.get(key))}" for label, key in parts)
            if as_hta else ""))
    if not cpu_only and rank.dataloader_share is None and not rank.data_spans:  # (None too where nothing was idle)
        facts.append("Waiting for data: n/a (the trace has no DataLoader spans): time the host spent loading "
                     "data is counted as waiting for the host")
    if rank.dataloader_share is not None:
        facts.append(f"DataLoader: {_percent(rank.dataloader_share)} of "
                     f"{'the step' if rank.steps else 'the traced window (no steps)'} "
                     f"(host time in {data_wait_spans(rank)}, as TensorBoard's plugin counted it)")
    if rank.exposed_copies:  # what the copy-bound finding's change is chosen by
        facts.append(f"{EXPOSED_COPIES[0].upper()}{EXPOSED_COPIES[1:]}: " + ", ".join(
            f"{copy.name} {format_step_seconds(copy.seconds)}" for copy in rank.exposed_copies))
    waited_in = host_wait_calls_text(rank)
    if waited_in:
        facts.append(f"{waited_in[0].upper()}{waited_in[1:]}")
    facts += [f"{line[0].upper()}{line[1:]}" for line in queued_waits_text(rank, NAME_CHARACTERS)]
    at_once = ops_on_threads_at_once_text(rank, NAME_CHARACTERS)
    if at_once:
        facts.append(f"{at_once[0].upper()}{at_once[1:]}")
    if not cpu_only:  # without GPU figures no kernel was read, which is not to say none ran
        facts.append(f"{rank.kernels:,} kernel{'' if rank.kernels == 1 else 's'}")
    return RankSection(
        title=f"Rank {rank.rank} · {device_words(rank)}" + (f" · {os.path.basename(rank.file)}" if name_file else ""),
        steps=_steps_text(rank),
        gpu_time=gpu_time,
        idle=idle,
        facts=tuple(facts),
        top_kernels=_top(rank.top_kernels),
        top_host_ops=_top(rank.top_host_ops),
        top_copies=_top(rank.top_copies),
        sync_calls=_top(rank.sync_calls),
        findings=_finding_lines(rank),
        notes=tuple(rank.notes),
        gpu_time_title="GPU time over the steps" if rank.steps else "GPU time over the first to the last GPU event",
    )


def _finding_lines(rank: RankReport) -> tuple[FindingLine, ...]:
    """The findings with the same problem (kind and text) as one line with its changes, in the report's order."""
    lines: dict[tuple[str, str], FindingLine] = {}
    for finding in rank.findings:
        key = (finding.kind, finding.text)
        if key in lines:
            line = lines[key]
            lines[key] = FindingLine(line.kind, line.text, (*line.changes, finding.change))
        else:
            lines[key] = FindingLine(finding.kind, finding.text, (finding.change,))
    return tuple(lines.values())


def _steps_text(rank: RankReport) -> str:
    if rank.steps == 0 or rank.step_seconds_median is None:
        over = "the first to the last host event" if rank.cpu_only else "the first to the last GPU event"
        return f"No ProfilerStep#N in the trace: the figures are over {over}"
    if rank.steps == 1:
        return f"1 step (ProfilerStep#N): {format_step_seconds(rank.step_seconds_median)}"
    text = (f"{rank.steps} steps (ProfilerStep#N), "
            f"{format_step_seconds(rank.step_seconds_median)} each (median)")
    if rank.step_seconds_low is not None and rank.step_seconds_high is not None:
        text += f", from {format_step_seconds(rank.step_seconds_low)} to {format_step_seconds(rank.step_seconds_high)}"
    return text




def _shares(rank: RankReport, parts: Sequence[tuple[str, str, str]]) -> tuple[Share, ...]:
    # A share the reading could not compute (None) is left out of the bar, not drawn as 0.
    return tuple(Share(label, float(getattr(rank, name)), colour) for label, name, colour in parts
                 if getattr(rank, name) is not None)


def _top(items: Sequence[NamedSeconds]) -> tuple[tuple[str, str], ...]:
    shown = items[:TOP_COUNT]
    names = short_names([item.name for item in shown], NAME_CHARACTERS)
    return tuple((name, format_short_seconds(item.seconds)) for name, item in zip(names, shown))


def _percent(value: Optional[float]) -> str:
    if value is None:
        return "n/a"  # as the text report says it
    return f"{value * 100 if round(value, 3) != 0 else 0.0:.1f} %"  # never "-0.0 %"

