"""`workbench tune`: search for faster settings from the given ones (coordinate descent, short trials)."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

from workbench.cli.parsing import UsageError
from workbench.cli.sequence_output import (
    add_sequence_flags,
    drive_plan,
    options_from_args,
)
from workbench.cli.setting_flags import add_setting_flags, config_from_args
from workbench.config import RunConfig
from workbench.experiments.ab import CONFIDENCE, MIN_EFFECT
from workbench.experiments.events import (
    SequenceEnded,
    TrialResult,
    TuneResult,
    values_label,
)
from workbench.formatting import format_setting, format_table, speedup_text
from workbench.history.metrics import format_metric

PROG = "workbench tune"


def register(subparsers: Any) -> None:
    from workbench.experiments.tune import ALLOWABLE, KNOBS

    parser = subparsers.add_parser(
        "tune",
        help="search for faster settings that train the same model the same way",
        description="From the given settings, try each speed knob's values with the others fixed: each change is "
        "measured against the best settings so far in short runs, interleaved (best, change, best, change, best, "
        "change: 6 runs a change), and kept only when the 90 % interval of its speedup lies above 1.02×; the "
        "search stops when a full pass gains less than 3 %. Batch size, lr and accumulation are left alone unless "
        "--allow names them. Every trial is a run in the history. Every other flag is a setting, as for "
        "`workbench run`.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("--budget-seconds", type=float, metavar="N",
                        help="start no comparison that cannot finish within N seconds")
    parser.add_argument("--trial-steps", type=int, metavar="N",
                        help="steps per trial (default: --max-steps when given, else sized by a first short run to "
                        "--trial-seconds)")
    parser.add_argument("--trial-seconds", type=float, metavar="S", help="how long a trial trains (default 4)")
    parser.add_argument("--knobs", metavar="K1,K2,...",
                        help=f"search only these knobs (default: every one that applies: {', '.join(KNOBS)})")
    parser.add_argument("--allow", metavar="SETTING,...",
                        help=f"also search settings that change what is learned: {', '.join(ALLOWABLE)} "
                        f"(lr follows batch_size)")
    parser.add_argument("--max-passes", type=int, metavar="N", help="passes over the knobs at most (default 3)")
    add_sequence_flags(parser, "search")
    add_setting_flags(parser)
    parser.set_defaults(handler=tune_command)


def plan_from_args(args: argparse.Namespace):
    from workbench.experiments.tune import TunePlan

    base = config_from_args(args, PROG)
    options = options_from_args(args, ("budget_seconds", "trial_steps", "trial_seconds", "max_passes", "name"))
    if hasattr(args, "knobs"):
        options["knobs"] = tuple(_names(args.knobs))
    if hasattr(args, "allow"):
        options["allow"] = frozenset(_names(args.allow))
    if options.get("max_passes", 1) < 1:
        raise UsageError(f"{PROG}: --max-passes must be at least 1 (got {options['max_passes']})")
    return TunePlan(base, **options)


def _names(text: str) -> list[str]:
    return [name.strip().replace("-", "_") for name in text.split(",") if name.strip()]


def tune_command(args: argparse.Namespace) -> int:
    plan = plan_from_args(args)
    from workbench.engine import probe_device
    from workbench.experiments.tune import plan_problems, run_tune

    problems = plan_problems(plan, probe_device(plan.base.device))
    ended = drive_plan(args, PROG, problems, [plan.base], lambda stop, recording: run_tune(plan, stop, recording))
    result: TuneResult = ended.result  # type: ignore[assignment]
    print(trials_table(result.trials))
    print(summary_text(result))
    if getattr(args, "json", False):
        print(json.dumps(tune_json(ended, result)))
    return 0 if ended.status == "finished" else 1


def trials_table(trials: tuple[TrialResult, ...]) -> str:
    """One row a change; its figures all from that change's comparison, so CHANGE IMG/S ÷ BEST IMG/S is VS BEST."""
    header = ("TRIAL", "KNOB", "CHANGE", "BEST IMG/S", "CHANGE IMG/S", "VS BEST (90 % INTERVAL)", "RUNS", "OUTCOME")
    rows = [
        (
            str(trial.trial),
            trial.knob,
            values_label(tuple(trial.changes.items())),
            format_metric("rate", trial.baseline_images_per_sec),
            format_metric("rate", trial.images_per_sec),
            speedup_text(trial.speedup, trial.speedup_low, trial.speedup_high),
            " ".join(f"#{run_id}" for run_id in trial.run_ids if run_id is not None),
            trial.outcome.replace("_", " ") + (f": {trial.reason}" if trial.reason else ""),
        )
        for trial in trials
    ]
    table = format_table(header, rows, right_aligned={0, 3, 4})
    if not rows:
        return table
    return table + ("\nBEST IMG/S, CHANGE IMG/S: medians of the best so far's and the change's runs in the row's own "
                    "comparison; VS BEST = CHANGE ÷ BEST")


def summary_text(result: TuneResult) -> str:
    tried = result.changes_tried
    lines = [
        f"start: {format_metric('rate', result.start_images_per_sec) or 'n/a'} img/s; "
        f"best: {format_metric('rate', result.best_images_per_sec) or 'n/a'} img/s"
        + (f" (medians of all their runs, taken at different times); {result.speedup:.2f}× faster: the kept "
           "changes' measured speedups multiplied" if result.speedup and result.best_changes else ""),
        f"each change: {result.trials_per_side}+{result.trials_per_side} runs interleaved with the best so far, kept "
        f"when the {CONFIDENCE * 100:.0f} % interval of its speedup lies above {1 + MIN_EFFECT:.2f}×; "
        f"trials of {result.trial_steps or 'n/a'} steps; {result.stop_reason}",
    ]
    changes = result.best_changes
    if changes:
        lines.append("best changes: " + values_label(tuple(changes.items())))
        lines.append("train with them: " + run_command_line(result.best_config))
    elif tried:
        lines.append(f"no change was measured faster than the start settings beyond the noise ({tried} tried)")
    else:
        lines.append("no change was tried, so nothing is known to be faster: give the search more time")
    return "\n".join(lines)


def run_command_line(config: RunConfig) -> str:
    """`workbench run` with every setting that differs from the defaults."""
    defaults = RunConfig().to_dict()
    words = ["workbench", "run"]
    for name, value in config.to_dict().items():
        if value == defaults[name]:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            words.append(flag if value else "--no-" + flag[2:])
        else:
            words += [flag, format_setting(value)]
    return shlex.join(words)


def tune_json(ended: SequenceEnded, result: TuneResult) -> dict[str, Any]:
    return {
        "sequence_id": ended.sequence_id,
        "status": ended.status,
        "stop_reason": result.stop_reason,
        "start_images_per_sec": result.start_images_per_sec,
        "best_images_per_sec": result.best_images_per_sec,
        "speedup": result.speedup,
        "best_config": result.best_config.to_dict(),
        "best_changes": result.best_changes,
        "passes": result.passes,
        "trial_steps": result.trial_steps,
        # The rule each change was decided by (experiments/ab.py).
        "trials_per_side": result.trials_per_side,
        "confidence": CONFIDENCE,
        "min_effect": MIN_EFFECT,
        "trials": [trial_json(trial) for trial in result.trials],
    }


def trial_json(trial: TrialResult) -> dict[str, Any]:
    comparison = trial.comparison
    return {
        "trial": trial.trial,
        "knob": trial.knob,
        "changes": trial.changes,
        "images_per_sec": trial.images_per_sec,  # median of the change's runs
        "measurements": list(trial.measurements),
        "run_ids": list(trial.run_ids),
        "baseline_images_per_sec": comparison.baseline_images_per_sec if comparison else None,
        "baseline_measurements": list(comparison.baseline_rates) if comparison else [],
        "baseline_run_ids": list(trial.baseline_run_ids),
        "speedup": trial.speedup,
        "speedup_low": trial.speedup_low,
        "speedup_high": trial.speedup_high,
        "verdict": trial.verdict,  # faster, slower, within_noise; None when the trial failed
        "outcome": trial.outcome,  # kept (the verdict was faster), slower, within_noise, failed
        "reason": trial.reason,
    }
