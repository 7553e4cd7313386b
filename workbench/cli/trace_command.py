"""`workbench trace PATH [--rank N] [--json]`: any PyTorch program's profiler trace, read and explained;
`workbench trace BEFORE AFTER [--batch-size B A]`: two traces of one script compared.

PATH is a torch.profiler trace (.json, .json.gz, *.pt.trace.json.gz as tensorboard_trace_handler writes it) or a
folder of them, one file per rank. A trace that cannot be read is one line and exit code 2. No torch, no Qt.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional, Sequence

from workbench.cli.parsing import UsageError, non_negative_int, positive_int
from workbench.formatting import printable


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "trace",
        help="read a torch.profiler trace of any PyTorch program: what bounds its GPU and which change to make",
        description="Read a torch.profiler trace (.json, .json.gz, *.pt.trace.json.gz) or a folder of them (one file "
        "per rank) and report, per rank: the steps (ProfilerStep#N) with their spread, the GPU time split into "
        "compute, communication, memory and idle, what the idle time waited for, the top kernels and host ops, "
        "and findings phrased as the change to make in your script. Two paths (BEFORE AFTER) compare two traces "
        "of one script: a difference within the steps' own spread is not called a gain. "
        "How to take a trace: docs/own-script.md.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="a trace file or a folder of rank traces; two paths: BEFORE AFTER")
    parser.add_argument("--rank", type=non_negative_int, metavar="N",
                        help="only rank N of a folder of ranks (files whose heads name another rank are not read)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object on the last line (keys: docs/cli.md#workbench-trace)")
    parser.add_argument("--batch-size", nargs=2, type=positive_int, metavar=("BEFORE", "AFTER"),
                        help="with two traces: the samples per step of each, to compare samples per second too "
                             "(a trace does not record its batch size)")
    # Paths are read, not kept: a name of bytes that are not UTF-8 is a file like any other here.
    parser.set_defaults(handler=trace_command, any_bytes=("paths",), positionals_anywhere="paths")


def trace_command(args: argparse.Namespace) -> int:
    if len(args.paths) > 2:
        raise UsageError(f"workbench trace: {len(args.paths)} paths given: give one trace (or a folder of rank "
                         f"traces), or two to compare (BEFORE AFTER)")
    if args.batch_size is not None and len(args.paths) != 2:
        raise UsageError("workbench trace: --batch-size BEFORE AFTER compares two traces: give two paths")
    reports = [_read(path, args.rank) for path in args.paths]
    if len(reports) == 1 and not args.json:  # the text report says its notes inline: not on stderr as well
        return _one(reports[0], args.json)
    for report in reports:
        for note in report.notes:
            _note(f"{report.path}: {note}")
    if len(reports) == 1:
        return _one(reports[0], args.json)
    for report in reports:  # the comparison's lines hold no notes: what either trace could not read is said here
        for rank in report.ranks:
            for note in rank.notes:
                _note(f"{report.path}: rank {rank.rank}: {note}")
    return _two(reports[0], reports[1], args.json, tuple(args.batch_size) if args.batch_size else None)


def _note(text: str) -> None:
    print(printable(f"workbench trace: note: {text}"), file=sys.stderr)


def _lines(lines: Sequence[str]) -> None:
    """Report lines to stdout; each one line whatever a name in the file holds (printable)."""
    print("\n".join(printable(line) for line in lines))


def _one(report: Any, as_json: bool) -> int:
    from workbench.trace_analysis.report_json import to_json
    from workbench.trace_analysis.report_text import report_lines

    if as_json:
        # The contract has no notes key: what could not be read goes to stderr (the text report says it inline).
        for rank in report.ranks:
            for note in rank.notes:
                _note(f"rank {rank.rank}: {note}")
        print(json.dumps(to_json(report), allow_nan=False))
    else:
        _lines(report_lines(report))
    return 0


def _two(before: Any, after: Any, as_json: bool, samples_per_step: Optional[tuple[int, int]] = None) -> int:
    from workbench.trace_analysis.comparing import compare
    from workbench.trace_analysis.comparison_caveats import pairing_caveat
    from workbench.trace_analysis.report_json import comparison_json, to_json
    from workbench.trace_analysis.report_text import comparison_lines

    # one process each (one rank number each side): paired whatever the numbers, named by a file or not
    one_process_each = len({rank.rank for rank in before.ranks}) == 1 == len({rank.rank for rank in after.ranks})
    alone = (len(before.files) == 1, len(after.files) == 1)  # its one file: numbered 0 where it names no rank
    comparisons = [compare(b, a, samples_per_step, pairing_caveat(b, a, one_process_each, alone))
                   for b, a in _paired_ranks(before, after)]
    if as_json:
        print(json.dumps({"before": to_json(before), "after": to_json(after),
                          "comparison": [comparison_json(comparison) for comparison in comparisons]},
                         allow_nan=False))
        return 0
    for position, comparison in enumerate(comparisons):
        _lines(([""] if position else []) + comparison_lines(before.path, after.path, comparison))
    return 0


def _paired_ranks(before: Any, after: Any) -> list[tuple[Any, Any]]:
    """Rank with the same rank; two single-rank traces with each other whatever their rank numbers. A rank in
    several files of a folder (one process's profiling cycles) pairs its n-th with the other's n-th, in the
    folder's name order, as the Runs tab's comparison sets them side by side."""
    if len(before.ranks) == 1 and len(after.ranks) == 1:
        return [(before.ranks[0], after.ranks[0])]
    from workbench.trace_analysis.comparing import by_rank_and_entry

    before_keyed = by_rank_and_entry(before.ranks, lambda rank: rank.rank)
    after_keyed = by_rank_and_entry(after.ranks, lambda rank: rank.rank)
    pairs = [(rank, after_keyed[key]) for key, rank in before_keyed.items() if key in after_keyed]
    if not pairs:
        raise UsageError(printable(
            f"workbench trace: {before.path} and {after.path} share no rank (ranks {_numbers(before)} against "
            f"{_numbers(after)}): compare one rank of each by giving its file (BEFORE/rank-0.json.gz "
            "AFTER/rank-2.json.gz): two single ranks are compared whatever their numbers"))
    for report, keyed, others in ((before, before_keyed, after_keyed), (after, after_keyed, before_keyed)):
        alone = sorted({number for number, _ in keyed} - {number for number, _ in others})
        if alone:  # a job scaled from 2 GPUs to 3: say which ranks had nothing to be held against
            _note(f"{report.path}: rank {', '.join(map(str, alone))} not compared (the other trace has no such rank)")
        entries = sorted({number for number, entry in keyed if entry and (number, entry) not in others})
        if entries:
            _note(f"{report.path}: rank {', '.join(map(str, entries))} is in more files than in the other trace: "
                  "its files are compared in name order, the rest are not compared")
    return pairs


def _numbers(report: Any) -> str:
    numbers = sorted({rank.rank for rank in report.ranks})
    return ", ".join(map(str, numbers[:8])) + (f" and {len(numbers) - 8:,} more" if len(numbers) > 8 else "")


def _read(path: str, rank: Optional[int]) -> Any:
    from workbench.trace_analysis.model import TraceError
    from workbench.trace_analysis.reading import read_report
    from workbench.trace_analysis.script_findings import with_findings

    try:
        return with_findings(read_report(path, rank=rank))
    except TraceError as error:
        raise UsageError(printable(f"workbench trace: {error}")) from None  # one line, whatever the path holds
