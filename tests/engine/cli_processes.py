"""A `workbench run` CLI process in a session of its own, as a terminal starts one, and its stderr read up to a
line: shared by the Ctrl-C, the signal and the abandoned-work tests."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

# What a worker stuck by stuck_batches.py prints (here: a test must not import that module, which patches).
STUCK_LINE = "stuck_batches: a worker is stuck in the dataset"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def cli(home: Path, *args: str, preamble: str = "", stderr=subprocess.PIPE) -> subprocess.Popen:
    # This folder too: Python 3.11's forkserver ignores the sys.path it is sent, and a test's module that patches
    # the workers (slow_batches, stuck_batches) must import there to take effect.
    path = os.pathsep.join((str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")))
    env = {**os.environ, "PYTHONPATH": path, "WORKBENCH_HOME": str(home)}
    code = preamble + "import sys\nfrom workbench.cli import program\nsys.exit(program(sys.argv[1:]))\n"
    return subprocess.Popen(
        [sys.executable, "-c", code, "run", "--dataset", "synthetic", "--synthetic-size", "2048", "--batch-size", "32",
         "--max-steps", "100000", "--device", "cpu", "--num-workers", "2", "--persistent-workers", "--log-every", "5",
         "--json", *args],
        stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, start_new_session=True,
    )


def wait_for(process: subprocess.Popen, lines: list, marker: str) -> threading.Thread:
    """Read stderr until a line holds ``marker``; returns the thread that collects the rest."""
    for line in process.stderr:
        lines.append(line)
        if marker in line:
            break
    else:
        raise AssertionError("the run never started:\n" + "".join(lines))
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    return reader
