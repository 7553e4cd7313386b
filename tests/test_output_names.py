"""One name per thing in the output (issue 29): files written before it read in today's names, and the old
spellings live in one place.

tests/data/before_issue_29/ holds what the release before wrote: `workbench run --json`, `workbench sweep --json`
and `workbench export` of their runs (a synthetic CPU run of 6 steps and a sweep of batch_size 16, 32).
"""

from __future__ import annotations

import csv
import json
import os
import re
import threading
from pathlib import Path

import pytest

from workbench.cli.summary_json import summary_json
from workbench.config import RunConfig
from workbench.history.export import RUNS_CSV_COLUMNS, STEP_COLUMNS
from workbench.output_aliases import DROPPED, RENAMED, current_json, read_runs_csv, read_steps_csv
from builders import summary

ROOT = Path(__file__).resolve().parents[1]
OLD = Path(__file__).parent / "data" / "before_issue_29"


def test_an_old_runs_csv_reads_in_todays_column_names():
    rows = read_runs_csv(OLD / "runs.csv")
    with open(OLD / "runs.csv", newline="", encoding="utf-8") as file:
        old = list(csv.DictReader(file))
    assert len(rows) == len(old) == 3
    assert set(rows[0]) <= set(RUNS_CSV_COLUMNS)  # nothing of the old spelling is left
    assert [row["images_per_sec"] for row in rows] == [row["images_per_sec_mean"] for row in old]  # the steady state
    assert rows[0]["images_per_sec"] != ""
    assert [row["sequence_id"] for row in rows] == [row["sweep_id"] for row in old] == ["", "1", "1"]
    assert [row["sequence_name"] for row in rows] == [row["sweep_name"] for row in old]
    assert (rows[0]["device_type"], rows[0]["device"]) == ("cpu", "cpu")  # the device it ran on; the setting
    assert "peak_nvml_device_used_bytes" in rows[0] and "images_per_sec_median" not in rows[0]


def test_an_old_step_csv_reads_its_nvml_metric_in_todays_name(tmp_path):
    old = tmp_path / "steps.csv"
    old.write_text("run_id,step,metric,value\n1,2,nvml_used,1073741824\n1,2,loss,0.5\n1,4,epoch_nvml_used,2048\n")
    rows = read_steps_csv(old)
    assert [row["metric"] for row in rows] == ["nvml_device_used", "loss", "epoch_nvml_device_used"]
    assert "nvml_device_used" in STEP_COLUMNS and rows[0]["value"] == "1073741824"


def test_an_old_run_json_reads_as_todays_run_json():
    old = json.loads((OLD / "run.json").read_text())
    current = current_json(old)
    assert current["images_per_sec"] == old["images_per_sec"]["mean"]  # a number now: the steady-state figure
    assert current["device_type"] == "cpu" and "device" not in current
    assert current["config"] == old["config"]  # settings keep their names ("device" is a setting there)
    today = summary_json(summary(), run_id=1, config=RunConfig())
    assert set(current) <= set(today)
    assert set(current["peak_memory_bytes"]) <= set(today["peak_memory_bytes"])


def test_an_old_sweep_json_reads_as_todays():
    old = json.loads((OLD / "sweep.json").read_text())
    current = current_json(old)
    assert current["sequence_id"] == old["sweep_id"] == 1 and "sweep_id" not in current
    assert [member["peak_memory_bytes"]["nvml_device_used"] for member in current["members"]] == [None, None]
    assert all("nvml_used" not in member["peak_memory_bytes"] for member in current["members"])


def test_old_gpu_figures_and_verify_device_read_in_todays_names():
    old = {"run_id": 3, "sweep_id": 7, "device": {"type": "cuda", "name": "NVIDIA H100"},
           "peak_memory_bytes": {"nvml_used": 123, "torch_allocated": 100},
           "rank_peak_memory_bytes": [{"rank": 0, "nvml_used": 5}],
           "members": [{"device": "cpu", "values": {"device": "cpu"}, "run_id": 1}]}  # a sweep over the device setting
    assert current_json(old) == {
        "run_id": 3, "sequence_id": 7, "device_type": "cuda", "device_name": "NVIDIA H100",
        "peak_memory_bytes": {"nvml_device_used": 123, "torch_allocated": 100},
        "rank_peak_memory_bytes": [{"rank": 0, "nvml_device_used": 5}],
        "members": [{"device": "cpu", "values": {"device": "cpu"}, "run_id": 1}],
    }


def test_todays_json_reads_unchanged():
    today = json.loads(json.dumps(summary_json(summary(), run_id=1, config=RunConfig())))
    assert current_json(today) == today


def test_a_fifo_given_as_an_old_csv_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "runs.csv"
    os.mkfifo(fifo)
    outcome = []
    reader = threading.Thread(target=lambda: outcome.append(_error_of(read_runs_csv, fifo)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert outcome and "FIFO" in outcome[0]


def _error_of(call, *args):
    try:
        call(*args)
    except ValueError as error:
        return str(error)
    return "no error"


# The old spellings may appear only where they are read as aliases (this module's subject), in the frozen history
# migrations that created and renamed them, and in docs/cli.md's table of aliases.
OLD_SPELLINGS = sorted({*RENAMED, *DROPPED})
ALLOWED = {"workbench/output_aliases.py", "workbench/history/schema.py", "docs/cli.md"}


def test_each_output_name_has_one_spelling_in_the_code_and_docs():
    found = []
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, OLD_SPELLINGS)) + r")\b")
    for path in sorted([*ROOT.glob("workbench/**/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]):
        shown = path.relative_to(ROOT).as_posix()
        if shown in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = pattern.search(line)
            if match:
                found.append(f"{shown}:{number}: {match.group(0)}")
    assert found == []


@pytest.mark.parametrize("old", OLD_SPELLINGS)
def test_each_alias_is_documented_in_the_cli_docs(old):
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"`{old}`" in text
