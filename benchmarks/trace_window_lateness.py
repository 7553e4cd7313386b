"""Does opening a large trace in the window hold its GUI thread? The file read in the window's process (before)
against read in a process of its own (after: controller/trace_opening.py's default for a file of 16 MB of text or
more, rank_pool.IN_WORKER_MIN_BYTES; a smaller one is read in the window's process either way). ``--ranks N``: a
folder of N such files, gzipped as torch.profiler writes them, each under 16 MB of text but more together (the pool
leaves a folder of under 8 MB on disk to one process: before, the window's; after, one of its own for the lot).

A synthetic torch.profiler trace of about ``--megabytes`` of JSON (steps of host ops, launches and kernels) is
opened with ``TraceOpening.run`` on a thread, as the window's background call runs it, while the main thread, the
GUI thread's stand-in, sleeps 5 ms in a loop: its lateness (time past the 5 ms) is how long it waited for the GIL
or a CPU. Beside it, the same loop in a process of its own that reads nothing gives the machine's own scheduling
noise. Each measurement is a fresh process; before and after alternate.

    python benchmarks/trace_window_lateness.py [--megabytes 300] [--ranks N] [--repeats 1] [--trace FILE|FOLDER]

Prints a line per measurement and writes benchmarks/results/trace_window_lateness-cpu.json. A benchmark, not a
test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, write_results  # noqa: E402
from gui_latency import machine  # noqa: E402

MODES = ("in-process", "worker")
SLEEP_S = 0.005
CONTROL = f"""
import select, sys, time
lates = []
while not select.select([sys.stdin], [], [], 0)[0]:
    began = time.perf_counter()
    time.sleep({SLEEP_S})
    lates.append(time.perf_counter() - began - {SLEEP_S})
print(max(lates) * 1000)
"""


def write_trace(path: Path, megabytes: int) -> dict[str, int]:
    """Steps of 200 host ops, launches and kernels each, to about ``megabytes`` of JSON."""
    target, written, steps, kernels = megabytes * 1024**2, 0, 0, 0
    with open(path, "w") as file:
        file.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}], '
                   '"traceEvents": [')
        while written < target:
            steps += 1
            begin = steps * 10000.0
            events: list[dict[str, Any]] = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{steps}",
                                             "pid": 100, "tid": 1, "ts": begin, "dur": 9990.0, "args": {}}]
            for index in range(200):
                kernels += 1
                at = begin + index * 45.0
                events += [
                    {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 100, "tid": 1, "ts": at, "dur": 20.0,
                     "args": {}},
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1,
                     "ts": at + 5, "dur": 5.0, "args": {"correlation": kernels}},
                    {"ph": "X", "cat": "kernel", "name": f"void gemm_kernel_{index % 17}<float>()", "pid": 0,
                     "tid": 7, "ts": at + 12, "dur": 30.0, "args": {"device": 0, "stream": 7, "correlation": kernels}},
                ]
            text = ("," if steps > 1 else "") + ",".join(json.dumps(event) for event in events)
            file.write(text)
            written += len(text)
        file.write("]}")
    return {"steps": steps, "kernels": kernels, "bytes": path.stat().st_size}


def write_folder(folder: Path, megabytes: int, ranks: int) -> dict[str, int]:
    """``ranks`` copies of one synthetic trace of ``megabytes`` of JSON, gzipped, named rank-0… (their ranks)."""
    plain = folder / "plain.json"
    made = write_trace(plain, megabytes)
    folder = folder / "ranks"
    folder.mkdir()
    with open(plain, "rb") as text, gzip.open(folder / "rank-0.pt.trace.json.gz", "wb", compresslevel=6) as packed:
        shutil.copyfileobj(text, packed)
    plain.unlink()
    for rank in range(1, ranks):
        shutil.copy(folder / "rank-0.pt.trace.json.gz", folder / f"rank-{rank}.pt.trace.json.gz")
    return {**made, "ranks": ranks, "text_bytes_each": made.pop("bytes"),
            "gzipped_bytes_in_all": sum(file.stat().st_size for file in folder.iterdir())}


def child(mode: str, trace: Path) -> dict[str, Any]:
    """One opening, in this process: the stand-in's lateness, and the control process's worst."""
    from workbench.controller.trace_opening import TraceOpening, read_with_findings

    home = tempfile.TemporaryDirectory(prefix="trace-lateness-home-")
    opening = TraceOpening(trace, Path(home.name), **({"read": read_with_findings} if mode == "in-process" else {}))
    control = subprocess.Popen([sys.executable, "-c", CONTROL], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    outcome: dict[str, Any] = {}

    def run() -> None:
        began = time.perf_counter()
        outcome["steps"] = opening.run().report.ranks[0].steps
        outcome["read_s"] = time.perf_counter() - began

    thread = threading.Thread(target=run)
    lates: list[float] = []
    late_phases: dict[str, int] = {}
    thread.start()
    while thread.is_alive():
        began = time.perf_counter()
        time.sleep(SLEEP_S)
        lates.append((time.perf_counter() - began - SLEEP_S) * 1000)
        if lates[-1] > 100:
            phase = opening.progress().phase
            late_phases[phase] = late_phases.get(phase, 0) + 1
    thread.join()
    control_worst = float(control.communicate("stop\n")[0])
    home.cleanup()
    lates.sort()
    return {"mode": mode, **outcome, "worst_ms": lates[-1], "p99_ms": lates[int(len(lates) * 0.99)],
            "p50_ms": lates[len(lates) // 2], "wake_ups": len(lates),
            "over_50_ms": sum(late > 50 for late in lates), "over_100_ms": sum(late > 100 for late in lates),
            "over_100_ms_by_phase": late_phases, "control_worst_ms": control_worst}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ranks", type=int, default=0,
                        help="a folder of this many gzipped rank files of --megabytes of JSON each")
    parser.add_argument("--trace", type=Path,
                        help="a trace or a folder of them to open (else a synthetic one is written)")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/trace_window_lateness-cpu.json, or "
                        "trace_window_lateness-folder-cpu.json for a folder")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "TRACE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], Path(args.child[1]))))
        return 0
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="trace-lateness-") as folder:
        trace, made = args.trace, None  # made: what the trace holds
        if trace is None and args.ranks:
            made = write_folder(Path(folder), args.megabytes, args.ranks)
            trace = Path(folder) / "ranks"
            print(f"wrote {trace}: {made}", flush=True)
        elif trace is None:
            trace = Path(folder) / "synthetic.pt.trace.json"
            made = write_trace(trace, args.megabytes)
            print(f"wrote {trace}: {made}", flush=True)
        measured = []
        for _ in range(args.repeats):
            for mode in MODES:
                out = subprocess.run([sys.executable, __file__, "--child", mode, str(trace)], check=True,
                                     capture_output=True, text=True).stdout
                measured.append(json.loads(out.strip().splitlines()[-1]))
                print(json.dumps(measured[-1]), flush=True)
        if made is None:  # the user's: what it holds
            files = sorted(trace.iterdir()) if trace.is_dir() else [trace]
            made = {"path": str(trace), "files": len(files), "bytes_on_disk": sum(f.stat().st_size for f in files)}
    result = {"machine": machine(), "load_average_before": load_before, "load_average": os.getloadavg(), "trace": made,
              "sleep_ms": SLEEP_S * 1000,
              "measurements": measured,
              "notes": "in-process = the file (or folder) read in the window's process (read_with_findings); worker "
                       "= TraceOpening's default (a large file, or a folder's small files large together, in a "
                       "process of its own). control_worst_ms: the same sleep loop in a process that reads "
                       "nothing, over the same time."}
    a_folder = bool(args.ranks) or (args.trace is not None and args.trace.is_dir())
    written = args.out or RESULTS / f"trace_window_lateness{'-folder' if a_folder else ''}-cpu.json"
    print(f"wrote {write_results(written, result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
