"""How fast, and in how much memory, ``workbench.trace_analysis.read_report`` reads a profiler trace.

Each trace is read in a fresh process (so its peak RSS is its own): wall time, CPU time (the fairer figure on
a shared, loaded machine), peak RSS, and the uncompressed size read per CPU second. The traces are the real
ones in ../shared/traces and one large synthetic trace made from the largest of them (its events repeated,
shifted in time, with fresh correlation ids) to the size asked (``--size-mb``, 1024 by default: the issue's
goal is 1 GB in under 30 s with peak RSS under 1.5 GB).

    python benchmarks/trace_reading.py [--size-mb 1024] [--keep-large PATH]

Prints a table and writes benchmarks/results/trace_reading.json. A benchmark, not a test: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
SOURCE = "v100-training.json.gz"  # the largest real trace (216,000 events)

_READ = """
import json, sys, time
from workbench.trace_analysis import read_report
wall, cpu = time.perf_counter(), time.process_time()
report = read_report(sys.argv[1])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across fork and exec.
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "ranks": len(report.ranks),
                  "kernels": sum(r.kernels for r in report.ranks), "steps": sum(r.steps for r in report.ranks),
                  "peak_rss_mb": peak_kb / 1024}))
"""


def uncompressed_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(uncompressed_bytes(p) for p in sorted(path.iterdir()) if p.name.endswith((".json", ".json.gz")))
    if path.name.endswith(".gz"):
        with gzip.open(path, "rb") as file:
            return sum(len(chunk) for chunk in iter(lambda: file.read(1 << 24), b""))
    return path.stat().st_size


def read_in_a_fresh_process(path: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", _READ, str(path)], capture_output=True, text=True, env=env,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def make_large_trace(source: Path, target: Path, size_mb: int) -> int:
    """The source's events repeated (each copy shifted past the last, correlation ids and step numbers made
    unique) until the file reaches ``size_mb``; returns the number of events written."""
    with gzip.open(source, "rt", encoding="utf-8") as file:
        trace = json.load(file)
    events = trace.pop("traceEvents")
    stamps = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(stamps) - min(stamps) + 1000
    written = 0
    limit = size_mb * 1024**2
    with open(target, "w", encoding="utf-8") as out:
        out.write(json.dumps(trace)[:-1] + ', "traceEvents": [')
        copy = 0
        while out.tell() < limit:
            for event in events:
                shifted = dict(event)
                if isinstance(shifted.get("ts"), (int, float)):
                    shifted["ts"] = shifted["ts"] + copy * span
                args = shifted.get("args")
                if isinstance(args, dict) and "correlation" in args:
                    shifted["args"] = dict(args, correlation=args["correlation"] + copy * 10_000_000)
                name = shifted.get("name")
                if copy and isinstance(name, str) and name.startswith("ProfilerStep#"):
                    shifted["name"] = f"ProfilerStep#{int(name[13:]) + copy * 1000}"
                out.write(("," if written else "") + json.dumps(shifted))
                written += 1
            copy += 1
        out.write("]}")
    return written


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="the synthetic trace's size (0: none)")
    parser.add_argument("--keep-large", type=Path, help="write the synthetic trace here and keep it")
    args = parser.parse_args(argv)

    inputs = [TRACES / name for name in ("a100-alexnet-benchmark.json.gz", "two-ranks", "a100-nccl.json.gz",
                                         "a100-training.json.gz", "v100-training.json.gz") if (TRACES / name).exists()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="trace-reading-") as scratch:
        if args.size_mb > 0 and (TRACES / SOURCE).is_file():
            large = args.keep_large or Path(scratch) / f"synthetic-{args.size_mb}mb.json"
            began = time.perf_counter()
            events = make_large_trace(TRACES / SOURCE, large, args.size_mb)
            print(f"made {large} ({events:,} events) in {time.perf_counter() - began:.0f} s", flush=True)
            inputs.append(large)
        for path in inputs:
            size = uncompressed_bytes(path)
            measured = read_in_a_fresh_process(path)
            row = {"trace": path.name, "file_mb": _file_bytes(path) / 1024**2, "uncompressed_mb": size / 1024**2,
                   **measured, "mb_per_cpu_s": size / 1024**2 / measured["cpu_s"] if measured["cpu_s"] else None}
            rows.append(row)
            print(f"{row['trace']}: {row['wall_s']:.1f} s wall, {row['cpu_s']:.1f} s CPU, "
                  f"{row['peak_rss_mb']:.0f} MB peak", flush=True)
    print()
    print("| trace | file MB | uncompressed MB | steps | kernels | wall s | CPU s | MB per CPU s | peak RSS MB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        print(f"| {row['trace']} | {row['file_mb']:.1f} | {row['uncompressed_mb']:.0f} | {row['steps']} | "
              f"{row['kernels']:,} | {row['wall_s']:.1f} | {row['cpu_s']:.1f} | {row['mb_per_cpu_s']:.0f} | "
              f"{row['peak_rss_mb']:.0f} |")
    machine = {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
               "load_average_at_end": os.getloadavg(),
               "json_parser": f"msgspec {msgspec.__version__} into Structs (the stdlib's json where it refuses a batch)"}
    print(f"\nmachine: {machine['cpu']}, {machine['cpu_count']} cores, load average {machine['load_average_at_end']}")
    path = write_results(RESULTS / "trace_reading.json", {"machine": machine, "rows": rows})
    print(f"wrote {path}")
    return 0


def _file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir()) if path.is_dir() else path.stat().st_size


if __name__ == "__main__":
    raise SystemExit(main())
