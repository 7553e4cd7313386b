"""The type check: mypy over the packages pyproject.toml's [tool.mypy] names (controller, experiments, engine,
history), with its settings, finds nothing.

Slow tier: it starts a process, and with no cache yet (a fresh checkout, CI) mypy reads torch's types for
10-15 s on 2 cores; with its cache (.mypy_cache/, beside pyproject.toml) a run takes under a second.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed: pip install -e '.[test]'")
def test_mypy_finds_no_type_errors():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"mypy exited {result.returncode}:\n{result.stdout}{result.stderr}"
