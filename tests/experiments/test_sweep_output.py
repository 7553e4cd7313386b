"""What `workbench sweep` prints of each value over its repeats: the verdict only where an interval gives one."""

import dataclasses
import json

from builders import GPU, TimedRuns, probe_of, tiny

from workbench.cli.sweep_command import per_value_table, sweep_json
from workbench.experiments.sweep import SweepAxis, SweepPlan, run_sweep


def test_two_repeats_a_value_give_a_ratio_but_no_verdict_not_within_the_noise():
    """2+2 runs give no interval: the table said "within noise" and --json "within_noise", a band never measured
    (verify says no_verdict for the same 2+2)."""
    speed = {"fp32": 1000.0, "bf16": 1300.0}
    runs = TimedRuns(lambda config: speed[config.precision], noise=0.0, device=GPU)
    plan = SweepPlan(tiny(device="auto"), (SweepAxis("precision", ("fp32", "bf16")),), repeats=2)
    ended = list(run_sweep(plan, lambda: False, run_function=runs, probe=probe_of(GPU)))[-1]
    first, bf16 = json.loads(json.dumps(sweep_json(ended, plan.fields)))["per_value"]
    assert first["verdict"] is None
    assert bf16["speedup"] == 1.3 and bf16["speedup_low"] is None and bf16["verdict"] == "no_verdict"
    table = per_value_table(plan.fields, ended.result.members)
    assert "1.30× (no interval)" in table and "no verdict" in table and "within noise" not in table


def test_a_value_with_one_finished_repeat_says_its_interval_is_within_that_run():
    """One of two repeats failed: the other's own windows' interval stood in the column of intervals of the median
    over the runs, unmarked, as if it measured run-to-run noise."""
    runs = TimedRuns(lambda config: 1000.0, noise=0.0, device=GPU,
                     fail=lambda config: "out_of_memory" if config.batch_size == 64 and len(runs.configs) > 2 else None)
    plan = SweepPlan(tiny(device="auto"), (SweepAxis("batch_size", (32, 64)),), repeats=2)
    members = list(run_sweep(plan, lambda: False, run_function=runs, probe=probe_of(GPU)))[-1].result.members
    members = tuple(member if member.status != "finished" else dataclasses.replace(
        member, summary=dataclasses.replace(member.summary, images_per_sec_low=990.0, images_per_sec_high=1010.0))
        for member in members)
    rows = per_value_table(plan.fields, members).splitlines()
    assert rows[2].split()[:2] == ["64", "1/2"] and rows[2].endswith("990–1,010 within its one run")
    assert "within" not in rows[1]  # two runs: no interval at all, and none claimed
