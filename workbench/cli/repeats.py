"""`workbench run … --repeats N`: the same run N times, one sequence of kind "repeats" in the history, read as
the median of the runs' steady-state images/sec and its interval (experiments/rate_over_runs.py).

Prints a table of the runs and the median; with --json, one object on the last line: ``run_ids`` (the N runs),
``images_per_sec``, ``images_per_sec_low``, ``images_per_sec_high`` over them (the median and its interval),
and each run's own --json summary under ``runs``. Exit codes as `workbench run`'s: 0 every run finished,
1 one failed or was stopped, 2 bad input (one line, nothing recorded).
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from workbench.cli.bad_images import refuse_bad_images
from workbench.cli.parsing import UsageError
from workbench.cli.sequence_output import drive, recording_for
from workbench.cli.setting_flags import print_notes
from workbench.cli.summary_json import summary_json
from workbench.config import RunConfig
from workbench.engine.events import RunStarted
from workbench.experiments.events import MemberEnded, SequenceEnded, SweepResult
from workbench.experiments.rate_over_runs import RateOverRuns, rate_over
from workbench.formatting import format_table
from workbench.history.metrics import format_metric

PROG = "workbench run"
BAD_INPUT_KINDS = ("config", "data")  # as `workbench run`'s: found only by loading the data, before training


def add_repeats_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, metavar="N",
                        help="run N times, one after another, as one sequence in the history; prints each run and "
                        "the median images/sec with its interval (--json: run_ids, images_per_sec, "
                        "images_per_sec_low, images_per_sec_high over them)")
    parser.add_argument("--vary-seed", action="store_true",
                        help="with --repeats: each run with its own seed (--seed, +1, +2, …), for the spread of the "
                        "test accuracy over seeds (--json: seeds, test_accuracy_median, _min, _max)")


def run_repeats_command(args: argparse.Namespace, config: RunConfig) -> int:
    """`workbench run` with --repeats: validated as a run is, then the runs, then the table or the JSON."""
    from workbench.engine.distributed.world import launched_world

    repeats = args.repeats
    vary_seed = bool(getattr(args, "vary_seed", False))
    from workbench.experiments.rounds import MAX_REPEATS

    if not 1 <= repeats <= MAX_REPEATS:  # a trillion of them was a MemoryError, making the list of its runs
        raise UsageError(f"{PROG}: --repeats must be between 1 and {MAX_REPEATS} (got {repeats:,})")
    if launched_world() is not None:
        raise UsageError(f"{PROG}: --repeats runs its runs one after another in one process; under torchrun, "
                         "start torchrun once per repeat")
    from workbench.data_check import data_problems, label_problems

    problems = config.validate() or data_problems(config) or label_problems(config)  # before torch is imported
    if problems:
        raise UsageError(f"{PROG}: " + "; ".join(problems))
    refuse_bad_images(config, PROG)
    from workbench.experiments.repeats import RepeatsPlan, plan_problems, run_repeats

    plan = RepeatsPlan(config, repeats, getattr(args, "name", None) or "", vary_seed)
    problems = plan_problems(plan)  # what the device can run (torch is imported now)
    if problems:
        raise UsageError(f"{PROG}: " + "; ".join(problems))
    print_notes(args, PROG)

    started: list[RunStarted] = []

    def sequence(stop: Any) -> Any:
        for event in run_repeats(plan, stop, recording):
            if isinstance(event, RunStarted):
                started.append(event)
            yield event

    with recording_for(args) as recording:
        ended = drive(sequence)
    result = ended.result
    if not isinstance(result, SweepResult):
        raise UsageError(f"{PROG}: {'; '.join(ended.problems) or ended.reason}")
    members = result.members
    first = members[0] if members else None
    if first is not None and first.status == "failed" and first.kind in BAD_INPUT_KINDS and not started:
        raise UsageError(f"{PROG}: {first.reason}")  # refused on loading the data: one line, as a lone run
    rate = rate_over([member.summary for member in members])
    print(runs_table(members, vary_seed))
    print(median_line(rate, repeats))
    accuracy = accuracy_over_seeds(members) if vary_seed else None
    if vary_seed:
        print(accuracy_line(accuracy))
    if getattr(args, "json", False):
        print(json.dumps(repeats_json(ended, result, rate, config)))
    elif ended.reason:
        print(ended.reason)
    return 0 if ended.status == "finished" and all(member.status == "finished" for member in members) and \
        len(members) == repeats else 1


def runs_table(members: tuple[MemberEnded, ...], vary_seed: bool = False) -> str:
    header = ("REPEAT", "RUN", "STATUS", "IMG/S", "ITS WINDOWS' INTERVAL", "DATA WAIT", "TEST ACC")
    rows = [
        (
            str(member.index + 1) + (f" (seed {member.config.seed})" if vary_seed else ""),
            f"#{member.run_id}" if member.run_id is not None else "",
            member.status + (f" ({member.kind})" if member.kind else ""),
            format_metric("rate", member.summary.images_per_sec),
            _interval(member.summary.images_per_sec_low, member.summary.images_per_sec_high),
            format_metric("fraction", member.summary.data_wait_fraction),
            format_metric("fraction", member.summary.test_accuracy),
        )
        for member in members
    ]
    return format_table(header, rows, right_aligned={0, 3, 4, 5, 6})


def median_line(rate: RateOverRuns, repeats: int) -> str:
    """"median: 1,234 img/s over 3 runs, interval 1,200–1,260 (75 %: with 3 runs, the smallest to the largest)"."""
    if rate.images_per_sec is None:
        return f"median: n/a ({rate.unmeasured_reason})"
    line = f"median: {rate.images_per_sec:,.0f} img/s over {rate.runs} run{'s' if rate.runs != 1 else ''}"
    if rate.interval_from == "repeats" and rate.confidence is not None:
        line += f", interval {_interval(rate.images_per_sec_low, rate.images_per_sec_high)} ({rate.confidence * 100:.3g} %"
        line += ": with 3 or 4 runs, the smallest to the largest)" if rate.confidence < 0.9 else ")"
    elif rate.interval_from == "windows":
        line += (f", interval {rate.interval_text()} from its steady windows (one run cannot show run-to-run noise: "
                 "use 3 or more)")
    else:
        line += ": no interval under 3 runs"
    return line


def accuracy_over_seeds(members: tuple[MemberEnded, ...]) -> list[float]:
    """The test accuracies of the finished runs that trained whole epochs (a max_steps run's is not comparable)."""
    return [member.summary.test_accuracy for member in members
            if member.status == "finished" and member.whole_epochs and member.summary.test_accuracy is not None]


def accuracy_line(accuracies: list[float]) -> str:
    """"test accuracy over 3 seeds: median 43.9 %, from 41.2 % to 45.0 %"."""
    if not accuracies:
        return "test accuracy over seeds: n/a (no run trained whole epochs to the end: set --epochs, not --max-steps)"
    ordered = sorted(accuracies)
    return (f"test accuracy over {len(ordered)} seed{'s' if len(ordered) != 1 else ''}: median "
            f"{statistics.median(ordered):.1%}, from {ordered[0]:.1%} to {ordered[-1]:.1%}")


def accuracy_json(accuracies: list[float]) -> dict[str, Any]:
    return {"test_accuracy_median": statistics.median(accuracies) if accuracies else None,
            "test_accuracy_min": min(accuracies, default=None), "test_accuracy_max": max(accuracies, default=None)}


def _interval(low: Any, high: Any) -> str:
    return f"{low:,.0f}–{high:,.0f}" if low is not None and high is not None else ""


def repeats_json(ended: SequenceEnded, result: SweepResult, rate: RateOverRuns, config: RunConfig) -> dict[str, Any]:
    return {
        "sequence_id": ended.sequence_id,  # the "repeats" sequence in the history
        "status": ended.status,
        "reason": ended.reason,
        "repeats": result.repeats,
        "run_ids": [member.run_id for member in result.members],
        # The median of the finished runs' steady-state images/sec and the order-statistic interval of it.
        "images_per_sec": rate.images_per_sec,
        "images_per_sec_low": rate.images_per_sec_low,
        "images_per_sec_high": rate.images_per_sec_high,
        "interval_confidence": rate.confidence,  # its exact coverage: 0.75 with 3 runs, 0.875 with 4, ≥ 0.9 from 5
        "interval_from": rate.interval_from,  # "repeats"; "windows" for one run (its steady windows' spread)
        "finished_runs": rate.runs,
        "seeds": [member.config.seed for member in result.members],  # each run's (--vary-seed: one each)
        **accuracy_json(accuracy_over_seeds(result.members)),
        "config": config.to_dict(),
        # Each run's own summary, as `workbench run --json` prints it.
        "runs": [summary_json(member.summary, run_id=member.run_id, config=member.config) for member in result.members],
    }
