"""A folder of rank files: read one file after the other, or side by side in processes (trace_analysis/rank_pool.py);
and one rank of it alone (``--rank N``: only the file whose head names it is read).

The folder is N copies of the largest real trace in ../shared/traces (the V100 one, 3 MB gzipped, 216,000
events), each with its distributedInfo's rank set to its own, as a job of N ranks writes N files. Each read runs
in a fresh process, the ways interleaved (files, processes, one rank, files, …) ``--repeats`` times, so a slow
spell of a shared machine falls on all; wall time, since the processes' CPU is not the reader's own. "files ÷
processes" is the ratio of the medians with the project's interval for a ratio (``experiments.ab.ratio_interval``).

    python benchmarks/rank_folder.py [--ranks 2 4 8] [--repeats 5]

Prints a table and writes benchmarks/results/rank_folder.json. A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "traces" / "v100-training.json.gz"

_READ = """
import sys, time
from workbench.trace_analysis import rank_pool, read_report
if sys.argv[2] == "files":
    rank_pool.PARALLEL_MIN_BYTES = 1 << 62  # never worth a process: one file after the other
began = time.perf_counter()
report = read_report(sys.argv[1], rank=0 if sys.argv[2] == "one rank" else None)
print(time.perf_counter() - began, len(report.ranks))
"""


def read_once(folder: Path, way: str) -> float:
    done = subprocess.run([sys.executable, "-c", _READ, str(folder), way], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    seconds, ranks = done.stdout.split()
    return float(seconds)


def _write_as_rank(path: Path, rank: int) -> None:
    """The V100 trace, its head's distributedInfo naming ``rank`` (it names rank 1 of 2)."""
    text = gzip.decompress(SOURCE.read_bytes())
    head, events = text.split(b'"traceEvents"', 1)
    assert head.count(b'"rank": 1,') == 1, "the V100 trace's head is not as this benchmark knows it"
    path.write_bytes(gzip.compress(head.replace(b'"rank": 1,', f'"rank": {rank},'.encode()) + b'"traceEvents"' + events,
                                   compresslevel=6))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "rank_folder.json")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from workbench.experiments.ab import ratio_interval
    from workbench.trace_analysis import rank_pool

    rows: list[dict[str, Any]] = []
    for count in args.ranks:
        with tempfile.TemporaryDirectory() as folder:
            for rank in range(count):
                _write_as_rank(Path(folder) / f"rank-{rank}.json.gz", rank)
            sizes = [SOURCE.stat().st_size] * count
            workers = rank_pool.workers_for(sizes, [True] * count)
            times: dict[str, list[float]] = {"files": [], "processes": [], "one rank": []}
            for _ in range(args.repeats):
                for way in times:
                    times[way].append(read_once(Path(folder), way))
        interval = ratio_interval(times["processes"], times["files"])
        rows.append({"ranks": count, "workers": workers, "files_seconds": times["files"],
                     "processes_seconds": times["processes"], "one_rank_seconds": times["one rank"],
                     "ratio": statistics.median(times["files"]) / statistics.median(times["processes"]),
                     "ratio_low": interval[0] if interval else None, "ratio_high": interval[1] if interval else None,
                     "coverage": interval[2] if interval else None})
    lines = ["| rank files (3 MB each) | processes at a time | one after the other, s | side by side, s | "
             "one after the other ÷ side by side | rank 0 alone (--rank 0), s |",
             "| ---: | ---: | ---: | ---: | --- | ---: |"]
    for row in rows:
        ratio = f"{row['ratio']:.2f}×"
        if row["ratio_low"] is not None:
            ratio += f" ({row['ratio_low']:.2f}–{row['ratio_high']:.2f}×, {row['coverage']:.0%})"
        lines.append(f"| {row['ranks']} | {row['workers']} | {statistics.median(row['files_seconds']):.2f} | "
                     f"{statistics.median(row['processes_seconds']):.2f} | {ratio} | "
                     f"{statistics.median(row['one_rank_seconds']):.2f} |")
    print("\n".join(lines))
    out = write_results(args.out, {"machine": {"cpu_count": os.cpu_count(), "python": platform.python_version(),
                                               "platform": platform.platform(), "load_average": os.getloadavg(),
                                               "repeats": args.repeats}, "rows": rows})
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
