"""`workbench sweep`: one setting over a list of values (a second for a grid), each member a normal run."""

from __future__ import annotations

import argparse
import json
from typing import Any

from workbench.cli.parsing import UsageError
from workbench.cli.setting_flags import add_setting_flags, config_from_args, print_notes
from workbench.cli.sequence_output import add_sequence_flags, drive, peaks, recording_for, refuse
from workbench.experiments.events import MemberEnded, SequenceEnded
from workbench.formatting import format_setting, format_table
from workbench.history.metrics import format_metric

PROG = "workbench sweep"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run once per value of a setting (or a grid of two) and compare",
        description="Run one member per value of --param (and per pair with --param2), one after another, each "
        "an ordinary run of the length the settings give (--max-steps or --epochs), recorded in the history "
        "with the sweep's id. Every member is checked before the first starts. Every other flag is a setting, "
        "as for `workbench run`.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--param", required=True, metavar="SETTING", help="the setting to vary (a RunConfig field)")
    parser.add_argument("--values", required=True, metavar="V1,V2,...", help="its values, comma-separated")
    parser.add_argument("--param2", metavar="SETTING", help="a second setting, for a grid")
    parser.add_argument("--values2", metavar="V1,V2,...", help="the second setting's values")
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
    return SweepPlan(base, tuple(axes), getattr(args, "name", None) or "")


def sweep_command(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    from workbench.experiments.sweep import plan_problems, run_sweep

    problems = plan_problems(plan)  # every member, before anything starts or is recorded
    if problems:
        raise UsageError(f"{PROG}: " + "; ".join(problems))
    print_notes(args, PROG)
    with recording_for(args) as recording:
        ended = drive(lambda stop: run_sweep(plan, stop, recording))
    if ended.result is None:
        refuse(PROG, ended)
    members = ended.result.members
    if getattr(args, "json", False):
        print(sweep_table(plan.fields, members))
        print(json.dumps(sweep_json(ended, plan.fields)))
    else:
        print(sweep_table(plan.fields, members))
        if ended.reason:
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


def sweep_json(ended: SequenceEnded, fields: tuple[str, ...]) -> dict[str, Any]:
    return {
        "sweep_id": ended.sequence_id,
        "status": ended.status,
        "reason": ended.reason,
        "params": list(fields),
        "members": [member_json(member) for member in ended.result.members],  # type: ignore[union-attr]
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
