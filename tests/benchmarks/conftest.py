"""The benchmark scripts import their helpers as top-level modules (``from _truth import …``), as they do when run
from the benchmarks folder."""

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
