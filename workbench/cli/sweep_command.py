"""`workbench sweep`: one setting over a list of values (a second for a grid), each member a normal run."""

from __future__ import annotations

import argparse
import json
from typing import Any

from workbench.cli.parsing import UsageError
from workbench.cli.sequence_output import (
    add_sequence_flags,
    drive_plan,
    peaks,
)
from workbench.cli.setting_flags import add_setting_flags, config_from_args
from workbench.experiments.events import MemberEnded, SequenceEnded, SweepResult
from workbench.experiments.rate_over_runs import ValueResult, compared, per_value
from workbench.formatting import format_setting, format_table, speedup_text
from workbench.history.metrics import format_metric

PROG = "workbench sweep"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run once per value of a setting (or a grid of two) and compare",
        description="Run one member per value of --param (and per pair with --param2), one after another, each "
        "an ordinary run of the length the settings give (--max-steps or --epochs), recorded in the history "
        "with the sweep's id. Every member is checked before the first starts. --repeats N runs every value N "
        "times, interleaved (round-robin over the values), and reads each as the median of its runs with an "
        "interval. Every other flag is a setting, as for `workbench run`.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--param", required=True, metavar="SETTING", help="the setting to vary (a RunConfig field)")
    parser.add_argument("--values", required=True, metavar="V1,V2,...", help="its values, comma-separated")
    parser.add_argument("--param2", metavar="SETTING", help="a second setting, for a grid")
    parser.add_argument("--values2", metavar="V1,V2,...", help="the second setting's values")
    parser.add_argument("--repeats", type=int, metavar="N",
                        help="run every value N times, interleaved (a b a b …); each value reads as the median of its "
                        "runs and its interval (default 1)")
    add_sequence_flags(parser, "sweep")
    add_setting_flags(parser)
    parser.set_defaults(handler=sweep_command)


def plan_from_args(args: argparse.Namespace):
    from workbench.experiments.sweep import SweepAxis, SweepPlan
    from workbench.experiments.values import parse_values

    base = config_from_args(args, PROG)
    pairs = [(args.param, args.values)]
    param2, values2 = getattr(args, "param2", None), getattr(args, "values2", None)
    if (param2 is None) != (values2 is None):
        raise UsageError(f"{PROG}: --param2 and --values2 go together")
    if param2 is not None:
        pairs.append((param2, values2))
    axes, problems = [], []
    for name, text in pairs:
        name = name.replace("-", "_")
        values, found = parse_values(name, text)
        problems += found
        axes.append(SweepAxis(name, values))
    if problems:
        raise UsageError(f"{PROG}: " + "; ".join(problems))
    repeats = getattr(args, "repeats", 1)
    from workbench.experiments.rounds import MAX_REPEATS

    if not 1 <= repeats <= MAX_REPEATS:  # a trillion of them was a MemoryError, making the list of its runs
        raise UsageError(f"{PROG}: --repeats must be between 1 and {MAX_REPEATS} (got {repeats:,})")
    return SweepPlan(base, tuple(axes), getattr(args, "name", None) or "", repeats)


def sweep_command(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    from workbench.experiments.sweep import plan_problems, run_sweep

    problems = plan_problems(plan)  # every member, before anything starts or is recorded
    ended = drive_plan(args, PROG, problems, [member for _, member in plan.combinations()],
                       lambda stop, recording: run_sweep(plan, stop, recording))
    members = ended.result.members
    print(sweep_table(plan.fields, members))
    if plan.repeats > 1:
        print()
        print(per_value_table(plan.fields, members))
    if getattr(args, "json", False):
        print(json.dumps(sweep_json(ended, plan.fields)))
    elif ended.reason:
        print(ended.reason)
    all_finished = ended.status == "finished" and all(member.status == "finished" for member in members)
    return 0 if all_finished else 1


def sweep_table(fields: tuple[str, ...], members: tuple[MemberEnded, ...]) -> str:
    header = (*(name.upper() for name in fields), "RUN", "STATUS", "IMG/S", "DATA WAIT", "PEAK ALLOC", "PEAK RESERVED",
              "PEAK RSS", "TEST ACC")
    first = len(fields)
    rows = [
        (
            *(format_setting(value) for _, value in member.values),
            f"#{member.run_id}" if member.run_id is not None else "",
            member.status + (f" ({member.kind})" if member.kind else ""),
            format_metric("rate", member.images_per_sec),
            format_metric("fraction", member.summary.data_wait_fraction),
            format_metric("bytes", member.summary.peak_allocated_bytes),
            format_metric("bytes", member.summary.peak_reserved_bytes),
            format_metric("bytes", member.summary.peak_process_rss_bytes),  # the process's resident memory
            format_metric("fraction", member.summary.test_accuracy),
        )
        for member in members
    ]
    return format_table(header, rows, right_aligned={first, *range(first + 2, first + 8)})


def per_value_table(fields: tuple[str, ...], members: tuple[MemberEnded, ...]) -> str:
    """One row per value over its repeats: the median images/sec, its interval, and the A/B against the first
    value (ab.compare_rates)."""
    results = per_value(members)
    header = (*(name.upper() for name in fields), "RUNS", "MEDIAN IMG/S", "INTERVAL", "VS FIRST (90 % INTERVAL)",
              "VERDICT")
    rows = []
    for result in results:
        comparison = compared(results[0].rate, result.rate) if result is not results[0] else None
        rows.append((
            *(format_setting(value) for _, value in result.values),
            f"{result.rate.runs}/{len(result.members)}",
            format_metric("rate", result.rate.images_per_sec),
            _interval_text(result),
            speedup_text(comparison.speedup, comparison.speedup_low, comparison.speedup_high) if comparison else "",
            comparison.stated_verdict.replace("_", " ") if comparison else "",
        ))
    first = len(fields)
    note = ("RUNS: finished/run. INTERVAL: of the median over the runs (90 % from 5 runs; with 3 or 4, the "
            "smallest to the largest at the coverage shown); a value with one finished run: that run's own, within it")
    return format_table(header, rows, right_aligned={first, first + 1, first + 2}) + "\n" + note


def _interval_text(result: ValueResult) -> str:
    """The value's interval, said as within its run where one run finished: its windows' spread cannot show how
    much the next run differs, and under the column of medians over runs it read as run-to-run."""
    text = result.rate.interval_text()
    return f"{text} within its one run" if text and result.rate.interval_from == "windows" else text


def sweep_json(ended: SequenceEnded, fields: tuple[str, ...]) -> dict[str, Any]:
    result = ended.result
    assert isinstance(result, SweepResult)
    values = per_value(result.members)
    return {
        "sequence_id": ended.sequence_id,
        "status": ended.status,
        "reason": ended.reason,
        "params": list(fields),
        "repeats": result.repeats,
        "members": [member_json(member) for member in result.members],
        # Each value over its repeats (with one repeat, its run's own interval from its steady windows).
        "per_value": [value_json(value, values[0]) for value in values],
    }


def value_json(value: ValueResult, first: ValueResult) -> dict[str, Any]:
    rate = value.rate
    comparison = compared(first.rate, rate) if value is not first else None
    settings = dict(value.values)
    return {
        **settings,
        "values": settings,
        "run_ids": list(value.run_ids),
        "finished_runs": rate.runs,
        "images_per_sec": rate.images_per_sec,  # the median of the finished runs' steady-state images/sec
        "images_per_sec_low": rate.images_per_sec_low,
        "images_per_sec_high": rate.images_per_sec_high,
        "interval_confidence": rate.confidence,  # the interval's exact coverage
        "interval_from": rate.interval_from,  # "repeats" (the runs' spread) or "windows" (one run's)
        # Against the first value: the ratio of medians, its interval and the verdict (None for the first, or
        # without 2 finished runs on each side; no_verdict where the runs give no interval, under 3 a side).
        "speedup": comparison.speedup if comparison else None,
        "speedup_low": comparison.speedup_low if comparison else None,
        "speedup_high": comparison.speedup_high if comparison else None,
        "verdict": comparison.stated_verdict if comparison else None,  # no_verdict without an interval
    }


def member_json(member: MemberEnded) -> dict[str, Any]:
    """One member: its run, its swept settings (by name, and together as ``values``), what came of it."""
    summary = member.summary
    values = dict(member.values)
    return {
        "run_id": member.run_id,
        **values,
        "values": values,
        "status": member.status,
        "reason": member.reason,
        "failure_kind": member.kind,
        "images_per_sec": summary.images_per_sec,  # steady state: samples ÷ seconds after the warm-up window
        "data_wait_fraction": summary.data_wait_fraction,
        "peak_memory_bytes": peaks(summary),
        "test_accuracy": summary.test_accuracy,
        "epochs_completed": summary.epochs_completed,
        "steps": summary.steps,
        "wall_seconds": summary.wall_seconds,
    }
