"""What `workbench sweep | tune | max-batch` share: driving a sequence with Ctrl-C as its stop flag,
one progress line per member on stderr, the recorder factory, tables and JSON figures."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any, Callable, Iterable, Iterator, Optional

from workbench.cli.interrupts import take_stop_signals
from workbench.cli.progress_line import ProgressLine
from workbench.config import RunConfig
from workbench.engine.events import (
    EpochStats, Event, ProfileSample, RunEnded, RunStarted, StatusChanged, StepStats,
)
from workbench.engine.requests import StopRequest
from workbench.experiments.events import (
    BatchTrial,
    BestSoFar,
    MemberEnded,
    MemberStarted,
    RecordingFailed,
    RunRecorded,
    SequenceEnded,
    SequenceStarted,
    TrialResult,
    values_label,
)
from workbench.experiments.recording import HistoryRecording, NoRecording
from workbench.formatting import format_bytes, printable, speedup_text
from workbench.history.metrics import format_metric


def add_sequence_flags(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--name", help=f"a name for this {what} in the history")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object on the last line")
    parser.add_argument("--no-history", action="store_true", help="do not record the runs in the history")


def recording_for(args: argparse.Namespace) -> HistoryRecording | NoRecording:
    return NoRecording() if getattr(args, "no_history", False) else HistoryRecording(source="cli")


def drive(sequence: Callable[[Callable[[], bool]], Iterator[Any]]) -> SequenceEnded:
    """Iterate a sequence to its end; the first Ctrl-C (SIGTERM, SIGHUP) stops it at the next step, a second aborts."""
    stop = StopRequest()
    progress = SequenceProgress(sys.stderr)
    ended: Optional[SequenceEnded] = None
    give_back_signals = take_stop_signals(stop, progress.progress)
    try:
        for event in sequence(stop):
            progress.show(event)
            if isinstance(event, SequenceEnded):
                ended = event
    finally:
        give_back_signals()
        progress.close()
    assert ended is not None  # every sequence ends with SequenceEnded
    return ended


class SequenceProgress:
    """One line per member and per finding on stderr; the run's own progress bar on a terminal."""

    def __init__(self, stream: Any):
        self.progress = ProgressLine(stream)
        self.planned: Optional[int] = None
        self.notes_shown = False

    @functools.singledispatchmethod
    def show(self, event: object) -> None:
        """Each event a sequence yields, by its type; another type is a TypeError (a new event needs its line here)."""
        raise TypeError(f"the sequence's progress has no handler for {type(event).__name__} events: add one in "
                        "cli/sequence_output.py")

    @show.register
    def _(self, event: SequenceStarted) -> None:
        self.planned = event.planned_members
        where = f" (sequence {event.sequence_id} in the history)" if event.sequence_id is not None else ""
        self.progress.message(printable(f"{event.name}{where}"))  # --name is the user's: no escape reaches the terminal

    @show.register
    def _(self, event: MemberStarted) -> None:
        label = values_label(event.values) or ("start settings" if event.purpose else "")
        run = f" run #{event.run_id}" if event.run_id is not None else ""
        self.progress.message(f"{self._position(event.index)} {event.purpose + ': ' if event.purpose else ''}{label}"
                              f"{run}".replace("  ", " "))

    @show.register
    def _(self, event: RunStarted) -> None:
        if not self.notes_shown:  # the members share their device and data: say it once
            self.progress.show(event)
            self.notes_shown = True

    @show.register
    def _(self, event: MemberEnded) -> None:
        rate = format_metric("rate", event.images_per_sec)
        figures = f", {rate} img/s" if rate else ""
        wait = format_metric("fraction", event.summary.data_wait_fraction)
        figures += f", data wait {wait}" if wait else ""
        why = f" ({event.reason})" if event.status != "finished" and event.reason else ""
        self.progress.message(f"{self._position(event.index)} {event.status}{why}{figures}")

    @show.register
    def _(self, event: TrialResult) -> None:
        rate = format_metric("rate", event.images_per_sec) or "n/a"
        change = values_label(tuple(event.changes.items())) or "start settings"
        speedup = speedup_text(event.speedup, event.speedup_low, event.speedup_high)
        # The best so far's rate in this comparison, the one the speedup divides by (not its runs' at other times).
        best = format_metric("rate", event.baseline_images_per_sec)
        self.progress.message(f"  trial {event.trial} {change}: {rate} img/s"
                              + (f" against the best's {best} img/s" if best else "")
                              + (f", {speedup}" if speedup else "")
                              + f", {event.outcome.replace('_', ' ')}")

    @show.register
    def _(self, event: BatchTrial) -> None:
        verdict = "fits" if event.fits else f"does not fit: {event.reason}"
        self.progress.message(f"  batch {event.batch_size:,} {verdict}"
                              + (f", peak allocated {format_bytes(event.peak_allocated_bytes)}" if event.fits else ""))

    @show.register
    def _(self, event: RecordingFailed) -> None:  # the run goes on; what the history lacks is said
        run = f"run #{event.run_id}" if event.run_id is not None else "this run"
        self.progress.message(f"  {run} is not being recorded in the history: {event.reason}")

    @show.register(StatusChanged)
    @show.register(StepStats)
    @show.register(EpochStats)
    @show.register(ProfileSample)
    @show.register(RunEnded)
    def _(self, event: Event) -> None:
        self.progress.show(event)  # a member's own progress: the bar on a terminal, its epochs

    @show.register(BestSoFar)  # the trial's line says the best so far
    @show.register(RunRecorded)  # the member's line names its run
    @show.register(SequenceEnded)  # the command prints the result
    def _(self, event: object) -> None:
        pass

    def _position(self, index: int) -> str:
        return f"[{index + 1}/{self.planned}]" if self.planned else f"[{index + 1}]"

    def close(self) -> None:
        self.progress.close()


def peaks(source: Any) -> dict[str, Optional[int]]:
    """The peak figures, named as `workbench run --json` names them (None for no source)."""
    if source is None:
        return {"torch_allocated": None, "torch_reserved": None, "nvml_device_used": None, "process_rss": None}
    return {
        "torch_allocated": source.peak_allocated_bytes,
        "torch_reserved": source.peak_reserved_bytes,
        "nvml_device_used": source.peak_nvml_device_used_bytes,
        "process_rss": getattr(source, "peak_process_rss_bytes", None),
    }


def options_from_args(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    """The plan options given on the command line (flags use argparse.SUPPRESS: absent means the plan's default)."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def drive_plan(args: argparse.Namespace, prog: str, problems: list[str], members: Iterable[RunConfig],
               sequence: Callable[[Callable[[], bool], HistoryRecording | NoRecording], Iterator[Any]]
               ) -> SequenceEnded:
    """Every sequence command's course: a plan with problems, or an image folder of the ``members`` with unreadable
    files, is one line, exit 2, nothing recorded (as for `workbench run`); else the notes, then the sequence driven
    (Ctrl-C, SIGTERM) and recorded unless --no-history. A sequence refused once it looked further (the data, say)
    is bad input too; what comes back has its result."""
    from workbench.cli.bad_images import refuse_bad_images_of
    from workbench.cli.parsing import UsageError
    from workbench.cli.setting_flags import print_notes

    if problems:
        raise UsageError(f"{prog}: " + "; ".join(problems))
    refuse_bad_images_of(members, prog)
    print_notes(args, prog)
    with recording_for(args) as recording:
        ended = drive(lambda stop: sequence(stop, recording))
    if ended.result is None:
        refuse(prog, ended)
    return ended


def refuse(prog: str, ended: SequenceEnded) -> None:
    """A sequence refused before anything ran: bad input, one line, exit 2."""
    from workbench.cli.parsing import UsageError

    raise UsageError(f"{prog}: {'; '.join(ended.problems) or ended.reason}")
