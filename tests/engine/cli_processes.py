"""A `workbench run` CLI process in a session of its own, as a terminal starts one, and its stderr read up to a
line: shared by the Ctrl-C and the signal tests."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli(home: Path, *args: str, preamble: str = "", stderr=subprocess.PIPE) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "WORKBENCH_HOME": str(home)}
    code = preamble + "import sys\nfrom workbench.cli import main\nsys.exit(main(sys.argv[1:]))\n"
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
