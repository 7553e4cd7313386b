"""scripts/gpu_checks.sh fits a short stay on a lent GPU: at most 3 parts of at most 540 s each, the steps that do
not fit listed, bad arguments refused with the usage (checked here without a GPU: a dry run, and fake commands)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_checks.sh"


def run(*args, out: Path, path_first: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, OUT=str(out))
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


@pytest.mark.parametrize("args", [(), ("4",), ("tests",), ("1", "2"), ("1", "--dry-run", "x"), ("2", "--now")])
def test_a_bad_argument_exits_2_with_the_usage(tmp_path, args):
    done = run(*args, out=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("usage: ") and "1|2|3" in done.stderr


def test_at_most_three_parts_of_at_most_540_seconds():
    text = SCRIPT.read_text()
    assert int(re.search(r"^PARTS=(\d+)$", text, re.M).group(1)) <= 3
    assert int(re.search(r"^PART_BUDGET=(\d+)$", text, re.M).group(1)) <= 540
    assert set(re.findall(r"^  (\d)\)$", text, re.M)) == {"1", "2", "3"}
    limits = [int(limit) for limit in re.findall(r'^\s+step "[^"]+" (\d+) ', text, re.M)]
    assert limits and max(limits) <= 540


@pytest.mark.parametrize("part", ["1", "2", "3"])
def test_a_dry_run_plans_each_part_within_its_budget_and_lists_what_would_not_run(tmp_path, part):
    done = run(part, "--dry-run", out=tmp_path)
    assert done.returncode == 0, done.stderr
    planned = [int(limit) for limit in re.findall(r"^== .* \(up to (\d+) s;", done.stdout, re.M)]
    assert planned and sum(planned) <= 540
    not_run = (tmp_path / "not_run.txt").read_text().splitlines()
    assert [line for line in done.stdout.splitlines() if line.startswith("not run: ")][:len(not_run)] == not_run
    if part == "1":  # the most valuable part runs whole
        assert not_run == [] and "every step ran" in done.stdout
    if part == "3":  # more than fits: the overheads come last and are the ones left out
        assert not_run and all("overhead" in line for line in not_run)


def fake_commands(folder: Path, python_exit: int) -> Path:
    """nvidia-smi and python that only say how they were called."""
    folder.mkdir()
    for name, body in (("nvidia-smi", 'echo "Fake GPU, 580.0, 81559 MiB"'),
                       ("python", f'echo "python $*"; exit {python_exit}')):
        path = folder / name
        path.write_text(f"#!/usr/bin/env bash\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return folder


def test_a_part_runs_each_step_with_its_log_and_gives_the_first_failures_status(tmp_path):
    done = run("2", out=tmp_path / "ok", path_first=fake_commands(tmp_path / "bin-ok", 0))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "part 2 of 3: every step ran" in done.stdout
    assert (tmp_path / "ok" / "gpu.txt").read_text().startswith("Fake GPU")
    log = (tmp_path / "ok" / "gpm_compute_bound.json").read_text()
    assert log.startswith("python -m workbench run --dataset synthetic") and "--model resnet18" in log
    assert "--out" in (tmp_path / "ok" / "distributed_overhead.log").read_text()
    failed = run("2", out=tmp_path / "failed", path_first=fake_commands(tmp_path / "bin-failed", 3))
    assert failed.returncode == 3 and failed.stdout.count("rc=3") == 5
