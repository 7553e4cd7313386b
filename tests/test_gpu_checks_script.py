"""scripts/gpu_checks.sh fits a short stay on a lent GPU: at most 4 parts of at most 540 s each whose steps' limits add
up within the part, what a part leaves out listed, the pytest line run with this project's own configuration, bad
arguments refused with the usage (checked here without a GPU: a dry run, and fake commands)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
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


@pytest.mark.parametrize("args", [(), ("5",), ("0",), ("tests",), ("1", "2"), ("1", "--dry-run", "x"), ("2", "--now")])
def test_a_bad_argument_exits_2_with_the_usage(tmp_path, args):
    done = run(*args, out=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("usage: ") and "1|2|3|4" in done.stderr


def test_at_most_four_parts_of_at_most_540_seconds():
    text = SCRIPT.read_text()
    assert int(re.search(r"^PARTS=(\d+)$", text, re.M).group(1)) <= 4
    assert int(re.search(r"^PART_BUDGET=(\d+)$", text, re.M).group(1)) <= 540
    assert set(re.findall(r"^  (\d)\)$", text, re.M)) == {"1", "2", "3", "4"}
    limits = [int(limit) for limit in re.findall(r'^\s+step "[^"]+" (\d+) ', text, re.M)]
    assert limits and max(limits) <= 540


# Every check the script knows, by part; left out by plan where a part has no room for it (issue 31 item 11).
PLAN = {
    "1": ["GPU tests", "GPM: launch-bound"],
    "2": ["truth table", "GPM: input-bound", "GPM: compute-bound", "DDP's extra ops per step"],
    "3": ["max-batch bf16", "own-script traces"],
    "4": ["DDP step vs plain", "engine overhead", "profile overhead"],
}
LEFT_OUT = {"3": ["tune from the defaults", "max-batch fp32"]}


@pytest.mark.parametrize("part", sorted(PLAN))
def test_a_dry_run_starts_every_planned_step_within_the_budget_and_lists_what_is_left_out(tmp_path, part):
    done = run(part, "--dry-run", out=tmp_path)
    assert done.returncode == 0, done.stderr
    planned = re.findall(r"^== (.*) \(up to (\d+) s;", done.stdout, re.M)
    assert len(planned) == len(PLAN[part]) and all(found.startswith(name) for (found, _), name in zip(planned, PLAN[part]))
    assert sum(int(limit) for _, limit in planned) <= 540  # their limits add up within the part: each one starts
    assert "not run: " not in done.stdout
    not_run = (tmp_path / "not_run.txt").read_text().splitlines()
    assert [line.split(" (")[0] for line in not_run] == [f"left out: {name}" for name in LEFT_OUT.get(part, [])]
    assert all("run it alone with python -m workbench" in line for line in not_run)
    assert [line for line in done.stdout.splitlines() if line.startswith("left out: ")][:len(not_run)] == not_run
    if not not_run:
        assert f"part {part} of 4: every step ran" in done.stdout


def gpu_tests_line() -> str:
    """The pytest command line of the script's "GPU tests" step."""
    return re.search(r'step "GPU tests" \d+ "pytest_gpu.log" \\\n(.*?)\n\s+#', SCRIPT.read_text(), re.S).group(1)


def test_the_gpu_tests_run_in_one_process():
    """pyproject's addopts run pytest in two processes; two on one GPU would change what its tests measure."""
    assert gpu_tests_line().split()[-2:] == ["-n", "0"]


@pytest.mark.slow  # several seconds of processes or training: the fast tier stays under 5 minutes
def test_the_gpu_tests_run_with_this_projects_own_config_with_or_without_pytest_timeout(tmp_path):
    """The script runs pytest from the project's root (pyproject.toml: warnings are errors, timeout = 300) and
    lets PytestConfigWarning pass only where pytest-timeout is missing; that command line collects here."""
    line = gpu_tests_line()
    assert " -c " not in line and "--rootdir" not in line and " -o " not in line and "--override-ini" not in line
    assert '"${PYTEST_TIMEOUT_OPTS[@]}"' in line
    # Without pytest-timeout (disabled here with -p no:timeout), the option the script adds keeps pytest going.
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider",
               "-p", "no:timeout", "tests/engine/test_gpu_telemetry.py"]
    bare = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bare.returncode != 0 and "Unknown config option: timeout" in bare.stdout + bare.stderr
    let_pass = subprocess.run(command + ["-W", "ignore::pytest.PytestConfigWarning"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
    assert let_pass.returncode == 0, let_pass.stdout + let_pass.stderr
    # A machine without pytest-timeout: the script says so and passes that option.
    done = run("1", out=tmp_path / "out", path_first=fake_commands(tmp_path / "bin", 0, without_timeout=True))
    assert "pytest-timeout is not installed" in done.stdout
    assert "-W ignore::pytest.PytestConfigWarning" in (tmp_path / "out" / "pytest_gpu.log").read_text()


def fake_commands(folder: Path, python_exit: int, without_timeout: bool = False) -> Path:
    """nvidia-smi and python that only say how they were called (``without_timeout``: pytest_timeout not found)."""
    folder.mkdir()
    missing = '[ "$*" = "-c import pytest_timeout" ] && exit 1; ' if without_timeout else ""
    for name, body in (("nvidia-smi", 'echo "Fake GPU, 580.0, 81559 MiB"'),
                       ("python", f'{missing}echo "python $*"; exit {python_exit}')):
        path = folder / name
        path.write_text(f"#!/usr/bin/env bash\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return folder


def test_a_part_runs_each_step_with_its_log_and_gives_the_first_failures_status(tmp_path):
    done = run("2", out=tmp_path / "ok", path_first=fake_commands(tmp_path / "bin-ok", 0))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "part 2 of 4: every step ran" in done.stdout
    assert (tmp_path / "ok" / "gpu.txt").read_text().startswith("Fake GPU")
    log = (tmp_path / "ok" / "gpm_compute_bound.json").read_text()
    assert log.startswith("python -m workbench run --dataset synthetic") and "--model resnet18" in log
    assert "--out" in (tmp_path / "ok" / "ddp_ops.log").read_text()
    failed = run("2", out=tmp_path / "failed", path_first=fake_commands(tmp_path / "bin-failed", 3))
    assert failed.returncode == 3 and failed.stdout.count("rc=3") == 4
