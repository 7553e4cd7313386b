"""What `workbench sweep` prints of each value over its repeats: the verdict only where an interval gives one."""

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
    assert "1.30× (no interval)" in table and "no verdict" in table and "within" not in table
