"""`workbench runs` lists the run history; `workbench export` writes it to CSV (the GUI's files, byte for byte)."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from workbench.cli.parsing import UsageError, positive_int

STANDARD_OUTPUT = "-"  # export's FILE that means standard output, as for other Unix tools (a file named - is ./-)


def register(subparsers) -> None:
    runs = subparsers.add_parser("runs", help="list recorded runs, newest first")
    runs.add_argument("--limit", type=positive_int, metavar="N", help="show only the N newest runs")
    runs.set_defaults(handler=list_runs_command)

    export = subparsers.add_parser(
        "export",
        help="write runs to CSV",
        description="Write one row per run (settings and summary metrics) to a CSV file, or with --steps "
        "the runs' step metrics in long format (run_id, step, metric, value). FILE - writes the CSV to standard "
        "output (`workbench export - | less`), and what was written to standard error.",
    )
    export.add_argument("path", nargs="?", metavar="FILE",
                        help="the CSV file to write, or - for standard output (or --out FILE)")
    export.add_argument("--out", metavar="FILE",
                        help="the CSV file to write, or - for standard output (replaced if it exists; a FIFO or a "
                        "device is written to, never replaced; never the history, nor a file in the workbench home "
                        "that is not a CSV it wrote)")
    export.add_argument("--runs", type=positive_int, nargs="+", metavar="ID", help="run ids to export (default: all)")
    export.add_argument("--steps", action="store_true", help="write the step metrics instead of one row per run")
    # The file is written, its name kept nowhere (the history holds no export): bytes that are not UTF-8 are a name
    # like any other here, written as given.
    export.set_defaults(handler=export_command, any_bytes=("path", "out"))

    tag = subparsers.add_parser(
        "tag", help="tag a run", description="Add words to a run's tags (the Runs tab's Tags column, the CSV's "
        "tags column), or take some away; with no TAG and no --remove, print its tags.")
    tag.add_argument("run_id", type=positive_int, metavar="RUN_ID")
    tag.add_argument("tags", nargs="*", metavar="TAG", help="words to add (quote one with spaces)")
    tag.add_argument("--remove", nargs="+", default=[], metavar="TAG", help="tags to take away")
    tag.set_defaults(handler=tag_command)


def list_runs_command(args: argparse.Namespace) -> int:
    from workbench.formatting import printable
    from workbench.history.store import HistoryStore

    # Only reads: a read-only or full disk lists the runs all the same. A HistoryError (damaged, newer) is one
    # line from cli.main, exit 1.
    with HistoryStore.open_for_reading() as store:
        records = store.list_runs()
        path, note = store.path, store.note
    if note:
        print(f"workbench runs: {note}", file=sys.stderr)
    if not records:
        print(printable(f"No runs recorded yet in {path}."))  # the home's path is the user's: no escape reaches the terminal
        return 0
    if args.limit is not None:
        records = records[: args.limit]
    print(format_runs_table(records))
    return 0


def export_command(args: argparse.Namespace) -> int:
    from workbench.formatting import printable
    from workbench.history.export import ExportError, export_runs_csv, export_steps_csv
    from workbench.history.records import records_count_text
    from workbench.history.store import HistoryStore, RunNotFound

    if (args.path is None) == (args.out is None):
        raise UsageError("workbench export: name the CSV file once: `workbench export FILE` or `--out FILE`"
                         + (f" (got {args.path} and --out {args.out})" if args.path is not None else ""))
    args.out = args.out if args.out is not None else args.path
    if args.out == "":  # Path("") is the current folder: it said "cannot write .: it is a folder"
        raise UsageError("workbench export: the file name is empty: give the CSV file to write, or - for standard "
                         "output")
    to_stdout = args.out == STANDARD_OUTPUT
    if to_stdout:
        sys.stdout.flush()
    target = sys.stdout.buffer if to_stdout else args.out

    try:
        with HistoryStore.open_for_reading() as store:  # only reads, as `workbench runs`
            if store.note:
                print(f"workbench export: {store.note}", file=sys.stderr)
            if args.steps:
                rows = export_steps_csv(store, target, args.runs)
                what = f"{rows} step metric row{'s' if rows != 1 else ''}"
            else:
                what = records_count_text(export_runs_csv(store, target, args.runs))
    except (ExportError, RunNotFound) as error:
        raise UsageError(f"workbench export: {error}") from error
    if to_stdout:  # standard output holds the CSV alone
        print(f"Wrote {what} to standard output", file=sys.stderr)
    else:
        print(printable(f"Wrote {what} to {args.out}"))  # a file name may hold a newline or an escape sequence
    return 0


def tag_command(args: argparse.Namespace) -> int:
    from workbench.formatting import printable
    from workbench.history.store import HistoryStore, RunNotFound

    with HistoryStore.open() as store:
        try:
            record = store.get_run(args.run_id)
        except RunNotFound as error:
            raise UsageError(f"workbench tag: {error}") from None
        if args.tags or args.remove:
            removed = set(args.remove)
            try:
                tags = store.set_tags(record.id, [tag for tag in (*record.tags, *args.tags) if tag not in removed])
            except ValueError as error:
                raise UsageError(f"workbench tag: {error}") from None
        else:
            tags = record.tags
    print(printable(f"#{record.id}: " + (", ".join(tags) if tags else "no tags")))
    return 0


def format_runs_table(records: Sequence) -> str:
    from workbench.formatting import format_duration, format_table, printable
    from workbench.history.metrics import format_metric, local_time

    header = ("ID", "NAME", "STATUS", "FROM", "SEQUENCE", "STARTED", "WORLD SIZE", "IMG/S", "DATA WAIT", "PEAK MEMORY",
              "FINAL LOSS", "TEST ACC", "DURATION", "KIND")
    right_aligned = {0, 6, 7, 8, 9, 10, 11, 12}
    rows = [
        tuple(printable(cell) for cell in (  # a name or tag holds what the user typed: no escape reaches the terminal
            str(record.id),
            _clip(record.name + (f" [{', '.join(record.tags)}]" if record.tags else ""), 48),
            record.shown_status,
            record.source,
            _sweep_label(record),
            local_time(record.started_at),
            "" if record.is_trace else str(record.summary.world_size),  # a trace's ranks are no run's processes
            format_metric("rate", record.summary.images_per_sec),
            format_metric("fraction", record.summary.data_wait_fraction),
            _peak_memory(record),
            format_metric("loss", record.summary.final_loss),
            format_metric("fraction", record.summary.test_accuracy),
            "" if record.is_trace else format_duration(record.duration_seconds),  # opened, not run: no duration
            record.noun,  # run, or trace: a profiler trace opened in the window
        ))
        for record in records
    ]
    return format_table(header, rows, right_aligned)


def _peak_memory(record) -> str:
    """"2.1 GiB alloc" (torch, on a GPU) or "1.1 GiB RSS" (the process's resident memory, on a CPU)."""
    from workbench.history.metrics import format_metric

    summary = record.summary
    if summary.peak_allocated_bytes is not None:
        return f"{format_metric('bytes', summary.peak_allocated_bytes)} alloc"
    if summary.peak_process_rss_bytes is not None:
        return f"{format_metric('bytes', summary.peak_process_rss_bytes)} RSS"
    return ""


def _sweep_label(record) -> str:
    """"3 num_workers × precision": the sequence a run was a member of ("" for a lone run)."""
    if record.sequence_id is None:
        return ""
    return _clip(f"{record.sequence_id} {record.sequence_name or ''}".strip(), 28)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())  # a name with a newline must not break the table
    return text if len(text) <= width else text[: width - 1] + "…"

