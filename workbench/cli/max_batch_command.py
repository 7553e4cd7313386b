"""`workbench max-batch`: the largest batch that fits on this CUDA GPU for the given settings."""

from __future__ import annotations

import argparse
import json
from typing import Any

from workbench.cli.parsing import UsageError
from workbench.cli.sequence_output import (
    add_sequence_flags,
    drive_plan,
    options_from_args,
    peaks,
)
from workbench.cli.setting_flags import add_setting_flags, config_from_args
from workbench.experiments.events import BatchTrial, MaxBatchResult, SequenceEnded, edge_note
from workbench.formatting import format_bytes, format_table
from workbench.history.metrics import format_metric

PROG = "workbench max-batch"
GIB = 2**30


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "max-batch",
        help="find the largest batch that fits on the GPU",
        description="Double the batch (from --batch-size) until CUDA runs out of memory or the peak reserved "
        "memory passes --memory-budget-gib, then binary-search between the last size that fitted and the first "
        "that did not. Each trial is a few real training steps with the given model, precision, memory format "
        "and compile, recorded in the history. Needs a CUDA GPU. Every other flag is a setting, as for "
        "`workbench run`.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--memory-budget-gib", type=float, metavar="GIB",
                        help="a batch whose peak reserved memory passes this does not fit")
    parser.add_argument("--steps-per-trial", type=int, metavar="N", help="training steps per trial (default 5)")
    parser.add_argument("--max-trials", type=int, metavar="N", help="trials at most (default 30)")
    add_sequence_flags(parser, "search")
    add_setting_flags(parser)
    parser.set_defaults(handler=max_batch_command)


def plan_from_args(args: argparse.Namespace):
    from workbench.experiments.max_batch import MaxBatchPlan

    base = config_from_args(args, PROG)
    options = options_from_args(args, ("steps_per_trial", "max_trials", "name"))
    if hasattr(args, "memory_budget_gib"):
        if not args.memory_budget_gib > 0:
            raise UsageError(f"{PROG}: --memory-budget-gib must be more than 0 (got {args.memory_budget_gib:g})")
        options["memory_budget_bytes"] = int(args.memory_budget_gib * GIB)
    return MaxBatchPlan(base, **options)


def max_batch_command(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    from workbench.engine import probe_device
    from workbench.experiments.max_batch import plan_problems, run_max_batch

    problems = plan_problems(plan, probe_device(plan.base.device))  # on a CPU: refused, with the reason
    ended = drive_plan(args, PROG, problems, [plan.base],
                       lambda stop, recording: run_max_batch(plan, stop, recording))
    result: MaxBatchResult = ended.result  # type: ignore[assignment]
    print(trials_table(result.trials))
    print(summary_text(ended, result))
    if getattr(args, "json", False):
        print(json.dumps(max_batch_json(ended, result)))
    return 0 if ended.status == "finished" and result.max_batch_size is not None else 1


def trials_table(trials: tuple[BatchTrial, ...]) -> str:
    header = ("BATCH", "FITS", "RUN", "IMG/S", "PEAK ALLOC", "PEAK RESERVED", "NVML USED (DEVICE)", "WHY NOT")
    rows = [
        (
            f"{trial.batch_size:,}",
            "yes" if trial.fits else "no",
            f"#{trial.run_id}" if trial.run_id is not None else "",
            format_metric("rate", trial.images_per_sec) if trial.fits else "",
            format_metric("bytes", trial.peak_allocated_bytes),
            format_metric("bytes", trial.peak_reserved_bytes),
            format_metric("bytes", trial.peak_nvml_device_used_bytes),
            trial.reason or "",
        )
        for trial in trials
    ]
    return format_table(header, rows, right_aligned={0, 3, 4, 5, 6})


def summary_text(ended: SequenceEnded, result: MaxBatchResult) -> str:
    best = result.best
    if best is None:
        return "no batch size fits" + (f" ({ended.reason})" if ended.reason else "")
    limit = {
        "memory": "the next size runs out of CUDA memory",
        "memory budget": "the next size passes the memory budget",
        "training set": "the training set has no more images",
        "largest batch setting": "the batch_size setting goes no higher",
    }.get(result.limited_by, ended.reason or result.limited_by)
    note = edge_note(result)
    return (
        f"largest batch that fits: {best.batch_size:,} ({limit}); "
        f"{format_metric('rate', best.images_per_sec) or 'n/a'} img/s; peak allocated "
        f"{format_bytes(best.peak_allocated_bytes)}, reserved {format_bytes(best.peak_reserved_bytes)}, "
        f"NVML used (whole device) {format_bytes(best.peak_nvml_device_used_bytes)}"
    ) + (f"\n{note}" if note else "")


def max_batch_json(ended: SequenceEnded, result: MaxBatchResult) -> dict[str, Any]:
    best, fastest = result.best, result.fastest
    return {
        "sequence_id": ended.sequence_id,
        "status": ended.status,
        "reason": ended.reason,
        "max_batch_size": result.max_batch_size,
        "limited_by": result.limited_by,
        "run_id": best.run_id if best else None,
        "images_per_sec": best.images_per_sec if best else None,
        "fastest_batch_size": fastest.batch_size if fastest else None,
        "fastest_images_per_sec": fastest.images_per_sec if fastest else None,
        "peak_memory_bytes": peaks(best),
        "trials": [
            {
                "batch_size": trial.batch_size,
                "fits": trial.fits,
                "reason": trial.reason,
                "run_id": trial.run_id,
                "images_per_sec": trial.images_per_sec,
                "peak_memory_bytes": peaks(trial),
            }
            for trial in result.trials
        ],
    }
