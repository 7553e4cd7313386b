"""`workbench verify RUN_ID`: measure what a finding's change (or any change) does to a recorded run's speed.

The run's stored settings are A; B is a finding's setting (``--finding N``, numbered as the findings are shown),
or each ``--set FIELD=VALUE``; with neither, every finding that names a setting. Trials run interleaved on this
machine (experiments/verify.py); the measurements are kept in the history, where the findings read them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Optional

from workbench.cli.bad_images import refuse_bad_images
from workbench.cli.parsing import UsageError, positive_int
from workbench.cli.sequence_output import add_sequence_flags, drive, recording_for, refuse
from workbench.engine.run_summary import Finding
from workbench.experiments.events import SequenceEnded, VerifyResult
from workbench.formatting import format_table
from workbench.history.metrics import format_metric

PROG = "workbench verify"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="measure what a finding's change does to a recorded run's speed",
        description="Run the recorded run's settings against the same settings with one setting changed, as "
        "short interleaved trials on this machine (A B A B …, the first log window of each left out as "
        "warm-up), and compare their steady images/sec: the speedup (a ratio of medians), its 90 % interval and "
        "a verdict, faster, slower or within_noise. The change is a finding's setting (--finding N), or what "
        "you suspect (--set FIELD=VALUE, each its own comparison); with neither, every finding that names a "
        "setting, all sharing the baseline's trials. The trials are runs in the history, and the measurements "
        "are kept there: the run's findings, and those of runs with the same settings on this device, show them.",
        argument_default=argparse.SUPPRESS,
    )
    parser.add_argument("run_id", type=positive_int, metavar="RUN_ID", help="the run whose settings are the baseline")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--finding", type=positive_int, metavar="N",
                       help="verify the run's N-th finding (1-based, in the order the findings are shown)")
    which.add_argument("--set", dest="set_values", action="append", metavar="FIELD=VALUE",
                       help="verify this change instead (repeat for more, each compared on its own)")
    parser.add_argument("--trial-steps", type=positive_int, metavar="S",
                        help="steps per trial (default: about 3 s of the run's measured speed, at most the run's "
                        "own steps, at least 16)")
    parser.add_argument("--repeats", type=positive_int, metavar="K", help="trials of each side (default 3, the "
                        "fewest that give a 90 %% interval)")
    parser.add_argument("--max-trials", type=positive_int, metavar="N",
                        help="while a change's interval still straddles the noise band, add rounds up to N trials of "
                        "each side (default 8; set it to --repeats for a fixed count)")
    add_sequence_flags(parser, "verification")
    parser.set_defaults(handler=verify_command)


def verify_command(args: argparse.Namespace) -> int:
    from workbench.history.store import HistoryError

    try:
        return verify(args)
    except HistoryError as error:  # a damaged or locked history: said in one line, nothing measured is claimed
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1


def verify(args: argparse.Namespace) -> int:
    from workbench.experiments.ab import MIN_TRIALS
    from workbench.experiments.verify import VerifyPlan, plan_problems, run_verify, without_unrunnable
    from workbench.history.measured_changes import findings_as_shown
    from workbench.history.store import HistoryStore, RunNotFound

    with HistoryStore.open() as store:
        try:
            record = store.get_run(args.run_id)
        except RunNotFound as error:
            raise UsageError(f"{PROG}: {error}") from None
        if record.is_trace:  # its stored settings are none ("{}"), which would read back as the defaults
            raise UsageError(f"{PROG}: #{record.id} is a profiler trace, not a run of the workbench: it holds no "
                             "settings to verify; try its findings' changes in your script and compare two traces "
                             "(workbench trace BEFORE AFTER)")
        findings = findings_as_shown(store, record.summary.findings, record.config, record.device.get("type"),
                                     record.device.get("name"))
        changes = changes_from_args(args, record.id, findings, record.summary.findings)
        from workbench.engine import probe_device  # torch is imported only now

        device = probe_device(record.config.device)
        problem = device_problem(record.id, record.device, device)
        if problem is not None:
            raise UsageError(f"{PROG}: {problem}")
        plan = VerifyPlan.for_run(record.config, record.summary, changes, record.id,
                                  getattr(args, "trial_steps", None), getattr(args, "repeats", MIN_TRIALS),
                                  getattr(args, "name", ""), getattr(args, "max_trials", None))
        if not hasattr(args, "set_values") and not hasattr(args, "finding"):  # every finding: measure what can run
            plan, left_out = without_unrunnable(plan, device)
            for line in left_out:
                print(f"{PROG}: {line}", file=sys.stderr)
        problems = plan_problems(plan, device)
        if problems:
            raise UsageError(f"{PROG}: " + "; ".join(problems))
        refuse_bad_images(record.config, PROG)
        if record.config_dropped:
            print(f"{PROG}: run #{record.id} stored settings this version does not know "
                  f"({', '.join(record.config_dropped)}): the baseline uses their defaults", file=sys.stderr)
        extra = f" (up to {plan.trial_budget} while undecided)" if plan.trial_budget > plan.repeats else ""
        print(f"{PROG}: run #{record.id}, {len(plan.changes)} change{'s' if len(plan.changes) != 1 else ''}, "
              f"{plan.repeats} trials of each side{extra}, {plan.trial_steps} steps per trial", file=sys.stderr)
        with recording_for(args) as recording:
            ended = drive(lambda stop: run_verify(plan, stop, recording))
        if ended.result is None:
            refuse(PROG, ended)
        result: VerifyResult = ended.result  # type: ignore[assignment]
        print(results_table(result))
        for change in result.changes:
            if change.undecided_text:
                print(f"{_label(change)}: {change.undecided_text}")
        if result.busy:
            print(result.busy)
        if ended.status != "finished":
            print(f"{PROG}: {ended.status}: {ended.reason}", file=sys.stderr)
        findings = findings_as_shown(store, record.summary.findings, record.config, result.device_type,
                                     result.device_name)
    if findings:
        print(f"findings of run #{record.id}, with what was measured on this device:")
        for number, finding in enumerate(findings, start=1):
            print(f"  {number}. {finding.text}")
    if getattr(args, "json", False):
        print(json.dumps(verify_json(record.id, ended, result)))
    return 0 if ended.status == "finished" else 1


def changes_from_args(args: argparse.Namespace, run_id: int, findings: tuple[Finding, ...],
                      own: tuple[Finding, ...]) -> tuple[Any, ...]:
    """The changes asked for: each --set, the --finding (numbered as ``findings`` are shown), else every finding
    that names a setting a trial can measure (each change once); a change's words are the run's own finding's
    (``own``: without what an earlier verification added). UsageError (one line) when there is none."""
    from workbench.config import NOT_SPEED_SETTINGS
    from workbench.experiments.verify import finding_change as change_of
    from workbench.history.measured_changes import value_key

    def finding_change(shown: Finding) -> Any:
        return change_of(next(finding for finding in own if (finding.field, value_key(finding.value)) ==
                              (shown.field, value_key(shown.value))))

    if hasattr(args, "set_values"):
        return tuple(set_change(text) for text in args.set_values)
    if hasattr(args, "finding"):
        number = args.finding
        if not findings:
            raise UsageError(f"{PROG}: run #{run_id} has no findings: give --set FIELD=VALUE to verify a change "
                             "you suspect")
        if number > len(findings):
            raise UsageError(f"{PROG}: run #{run_id} has {len(findings)} finding{'s' if len(findings) != 1 else ''}: "
                             f"--finding takes 1 to {len(findings)} (got {number})")
        finding = findings[number - 1]
        if finding.field is None:
            raise UsageError(f"{PROG}: finding {number} of run #{run_id} names no setting to change "
                             f"(“{finding.headline}”): there is nothing to verify; --set FIELD=VALUE tries a change "
                             "you suspect")
        return (finding_change(finding),)
    changes, seen = [], set()
    for finding in findings:
        key = (finding.field, value_key(finding.value))
        if finding.field is None or finding.field in NOT_SPEED_SETTINGS or key in seen:
            continue
        seen.add(key)
        changes.append(finding_change(finding))
    if not changes:
        raise UsageError(f"{PROG}: no finding of run #{run_id} names a setting whose speed can be measured: give "
                         "--set FIELD=VALUE to verify a change you suspect")
    return tuple(changes)


def set_change(text: str) -> Any:
    """One --set FIELD=VALUE as a change; UsageError (one line) when it is not one."""
    from workbench.experiments.values import field_problem, parse_value
    from workbench.experiments.verify import Change

    name, equals, value_text = text.partition("=")
    name = name.strip().replace("-", "_")
    if not equals or not name:
        raise UsageError(f"{PROG}: --set takes FIELD=VALUE, such as channels_last=on (got {text!r})")
    problem = field_problem(name)
    if problem is None:
        try:
            return Change(name, parse_value(name, value_text))
        except ValueError as error:
            problem = str(error)
    raise UsageError(f"{PROG}: --set {text}: {problem}")


def device_problem(run_id: int, ran_on: dict[str, Any], here: Any) -> Optional[str]:
    """Why this machine cannot speak for the run's speed (None when it ran on this device, or never started)."""
    if not ran_on.get("type") or not ran_on.get("name"):
        return None
    if (ran_on["type"], ran_on["name"]) == (here.type, here.name):
        return None
    return (f"run #{run_id} ran on {ran_on['name']} ({ran_on['type']}), and its settings train on {here.name} "
            f"({here.type}) here: a change measured here says nothing of its speed there; verify it where it ran")


def results_table(result: VerifyResult) -> str:
    header = ("CHANGE", "BASELINE IMG/S", "CHANGED IMG/S", "SPEEDUP", "90 % INTERVAL", "TRIALS", "VERDICT", "RUNS")
    rows = []
    for change in result.changes:
        comparison = change.comparison
        interval = (f"{comparison.speedup_low:.2f}–{comparison.speedup_high:.2f}"
                    if comparison.speedup_low is not None and comparison.speedup_high is not None else "none")
        verdict = (f"not measured: {change.reason or 'stopped'}" if comparison.speedup is None
                   else _verdict(comparison).replace("_", " "))
        rows.append((
            _label(change),
            format_metric("rate", comparison.baseline_images_per_sec),
            format_metric("rate", comparison.changed_images_per_sec),
            f"{comparison.speedup:.2f}×" if comparison.speedup is not None else "n/a",
            interval,
            f"{len(comparison.baseline_rates)}+{len(comparison.changed_rates)}",
            verdict,
            " ".join(f"#{run_id}" for run_id in sorted(_run_ids(change))),
        ))
    return format_table(header, rows, right_aligned={1, 2, 3})


def _verdict(comparison: Any) -> str:
    """faster, slower or within_noise where an interval decides; no_verdict where none could be given (a change
    not measured, or too few trials: 2+2 of a stopped verification)."""
    return comparison.stated_verdict


def _label(change: Any) -> str:
    from workbench.experiments.events import values_label

    return values_label(((change.field, change.value),))


def _run_ids(change: Any) -> list[int]:
    return sorted(run_id for run_id in (*change.baseline_run_ids, *change.changed_run_ids) if run_id is not None)


def verify_json(run_id: int, ended: SequenceEnded, result: VerifyResult) -> dict[str, Any]:
    """The --json object: ``findings`` holds one entry per change verified (a finding's, or a --set)."""
    return {
        "run_id": run_id,
        "sequence_id": ended.sequence_id,
        "status": ended.status,
        "reason": ended.reason,
        "device_type": result.device_type,
        "device_name": result.device_name,
        "trial_steps": result.trial_steps,
        "busy": result.busy,
        "findings": [
            {
                "text": change.text,
                "field": change.field,
                "value": change.value,
                "baseline_images_per_sec": change.comparison.baseline_images_per_sec,
                "changed_images_per_sec": change.comparison.changed_images_per_sec,
                "speedup": change.comparison.speedup,
                "speedup_low": change.comparison.speedup_low,
                "speedup_high": change.comparison.speedup_high,
                "verdict": _verdict(change.comparison),
                "decided": change.decided,
                "run_ids": _run_ids(change),
                "baseline_run_ids": list(change.baseline_run_ids),
                "changed_run_ids": list(change.changed_run_ids),
                "reason": change.reason,
            }
            for change in result.changes
        ],
    }
