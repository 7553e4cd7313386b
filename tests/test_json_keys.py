"""docs/cli.md's table of --json keys is the keys the commands print: one row per key, none missing, none stale.

Each command's --json object is built here from results of every shape (a finding with a measurement, a trial
with a comparison, a largest batch that fits), as the commands build them, and its keys are read as paths
("peak_memory_bytes.nvml_device_used", "members[].run_id"). Settings objects (``config``, ``best_config``, a
swept value's settings) are one key each: their keys are the settings, `workbench run --help`'s.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from builders import CPU, summary

from workbench.cli.ceiling_command import ceiling_json
from workbench.cli.max_batch_command import max_batch_json
from workbench.cli.models_command import models_json
from workbench.cli.repeats import repeats_json
from workbench.cli.summary_json import summary_json
from workbench.cli.sweep_command import sweep_json
from workbench.cli.tune_command import tune_json
from workbench.cli.verify_command import verify_json
from workbench.config import FIELD_NAMES, RunConfig
from workbench.engine.ceiling_cache import Ceiling, ceiling_key
from workbench.engine.run_summary import Finding, MeasuredChange, NamedTime
from workbench.experiments.ab import compare_rates
from workbench.experiments.events import (
    BatchTrial,
    ChangeVerified,
    MaxBatchResult,
    MemberEnded,
    SequenceEnded,
    SweepResult,
    TrialResult,
    TuneResult,
    VerifyResult,
)
from workbench.experiments.rate_over_runs import rate_over

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
# Objects whose keys are settings (RunConfig fields): one row each.
SETTINGS_OBJECTS = {"config", "best_config", "values", "changes", "best_changes", "key"}
SETTING = "<setting>"  # a swept setting's own key in a sweep's member and value objects


def key_paths(document, prefix=""):
    if isinstance(document, list):
        paths = set()
        for item in document:
            paths |= key_paths(item, prefix + "[]")
        return paths
    if not isinstance(document, dict):
        return set()
    paths = set()
    for key, value in document.items():
        name = SETTING if key in FIELD_NAMES and prefix.split(".")[-1] in ("members[]", "per_value[]") else key
        path = f"{prefix}.{name}" if prefix else name
        paths.add(path)
        if key not in SETTINGS_OBJECTS and not (prefix == "" and key == "runs"):
            paths |= key_paths(value, path)
    return paths


MEASURED = MeasuredChange(speedup=1.3, low=1.2, high=1.4, verdict="faster", baseline_trials=3, changed_trials=3)
FINDING = Finding(kind="input-bound", headline="Input-bound.", text="Input-bound: more workers.", figure=0.4,
                  figure_name="data_wait_fraction", threshold=0.15, field="num_workers", value=4, measured=MEASURED)


def run_summary():
    return summary(findings=(FINDING,), profile_samples=1, top_ops=(NamedTime(name="aten::conv2d", seconds=0.5, count=10),),
                   top_kernels=(NamedTime(name="sm90_xmma_fprop", seconds=0.4, count=10),), rank_peak_allocated_bytes=(1, 2),
                   rank_peak_reserved_bytes=(3, 4), rank_peak_nvml_device_used_bytes=(5, 6))


def member(index, batch_size):
    return MemberEnded(index=index, config=RunConfig(batch_size=batch_size), values=(("batch_size", batch_size),),
                       run_id=index + 1, status="finished", summary=run_summary())


def ended(kind, result):
    return SequenceEnded(kind=kind, sequence_id=1, status="finished", result=result)


COMPARISON = compare_rates([100.0, 101.0, 99.0], [130.0, 131.0, 129.0])


def outputs():
    members = (member(0, 32), member(1, 64), member(2, 32), member(3, 64))
    sweep = SweepResult(members=members, repeats=2)
    repeats = SweepResult(members=(member(0, 32),), repeats=1)
    trial = TrialResult(trial=1, knob="num_workers", changes={"num_workers": 2}, images_per_sec=130.0,
                        measurements=(130.0, 131.0, 129.0), run_ids=(2, 4, 6), outcome="kept",
                        comparison=COMPARISON, baseline_run_ids=(1, 3, 5))
    tune = TuneResult(start_config=RunConfig(), start_images_per_sec=100.0, best_config=RunConfig(num_workers=2),
                      best_images_per_sec=130.0, trials=(trial,), passes=1, stop_reason="a pass gained nothing",
                      trial_steps=20)
    verify = VerifyResult(base=RunConfig(), device_type="cpu", device_name=CPU.name, trial_steps=20,
                          changes=(ChangeVerified(text="set num_workers=4", field="num_workers", value=4,
                                                  comparison=COMPARISON, baseline_run_ids=(2, 4, 6),
                                                  changed_run_ids=(3, 5, 7)),))
    batch = BatchTrial(batch_size=256, fits=True, reason=None, run_id=3, images_per_sec=900.0,
                       peak_allocated_bytes=1, peak_reserved_bytes=2, peak_nvml_device_used_bytes=3)
    max_batch = MaxBatchResult(max_batch_size=256, limited_by="memory", best=batch, trials=(batch,))
    ceiling = Ceiling(images_per_sec=2000.0, steady=True, timed_steps=40, timed_seconds=2.0,
                      key=ceiling_key(RunConfig(), CPU, 10), measured_at=0.0)
    return {
        "run": summary_json(run_summary(), run_id=1, config=RunConfig(profile=True)),
        "run --repeats": repeats_json(ended("repeats", repeats), repeats,
                                      rate_over([m.summary for m in repeats.members]), RunConfig()),
        "sweep": sweep_json(ended("sweep", sweep), ("batch_size",)),
        "tune": tune_json(ended("tune", tune), tune),
        "verify": verify_json(1, ended("verify", verify), verify),
        "max-batch": max_batch_json(ended("max_batch", max_batch), max_batch),
        "ceiling": ceiling_json(ceiling, "/home/u/.local/share/workbench/ceilings.json"),
        "models": models_json(["resnet18"]),
    }


def documented():
    """(command, key) of each row of docs/cli.md's --json table."""
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- json-keys -->")[1]
    rows = set()
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows.add((cells[0].strip("`"), cells[1].strip("`")))
    return rows


def test_the_docs_table_lists_every_json_key_and_no_other():
    printed = {(command, path) for command, document in outputs().items()
               for path in key_paths(json.loads(json.dumps(document)))}
    rows = documented()
    assert sorted(printed - rows) == [] and sorted(rows - printed) == []


def test_every_row_says_a_meaning_and_a_unit():
    table = DOC.read_text(encoding="utf-8").split("<!-- json-keys -->")[1]
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            assert cells[2] and cells[3], line


@pytest.mark.parametrize("command", ["run", "run --repeats", "sweep", "max-batch"])
def test_images_per_sec_is_a_number_everywhere(command):
    document = outputs()[command]
    if command == "sweep":
        document = document["members"][0]
    assert isinstance(document["images_per_sec"], float)
    if command == "run --repeats":
        assert all(isinstance(run["images_per_sec"], float) for run in document["runs"])


def test_the_table_names_each_thing_once():
    """The old spellings are aliases (docs/cli.md's other table), never keys."""
    keys = {re.split(r"[.\[\]]+", path)[-1] for _, path in documented()}
    assert not keys & {"sweep_id", "nvml_used", "device", "images_per_sec_mean", "images_per_sec_median"}
