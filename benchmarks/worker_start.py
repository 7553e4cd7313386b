"""How long do DataLoader workers take to start, per start method, in one long-lived process?

Each run trains a few steps with 2 workers (persistent); the figure is the wall time from RunStarted
to the first StepStats (log_every=1): worker start-up plus one step. The first run of a method also
pays that method's one-off cost (the forkserver starting and importing torch); the median of the rest
is what every later run in the GUI pays. Writes benchmarks/results/worker_start-<device>.json.

    python benchmarks/worker_start.py [--runs 6] [--size 50000]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import statistics
import time
from pathlib import Path

from workbench.config import RunConfig
from workbench.engine import probe_device, run
from workbench.engine.events import RunEnded, RunStarted, StepStats

RESULTS = Path(__file__).parent / "results"


def first_step_seconds(config: RunConfig) -> float:
    started = None
    seconds = None
    for event in run(config):
        if isinstance(event, RunStarted):
            started = time.perf_counter()
        elif isinstance(event, StepStats) and seconds is None:
            seconds = time.perf_counter() - started
        elif isinstance(event, RunEnded) and event.status != "finished":
            raise SystemExit(f"run failed: {event.reason}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--size", type=int, default=50_000, help="synthetic training images (CIFAR-10 has 50,000)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    device = probe_device("auto")
    rows = []
    for method in multiprocessing.get_all_start_methods():
        config = RunConfig(dataset="synthetic", synthetic_size=args.size, num_workers=2, persistent_workers=True,
                           worker_start_method=method, max_steps=3, log_every=1, batch_size=128)
        times = [first_step_seconds(config.replace(seed=seed)) for seed in range(args.runs)]
        rows.append({"start_method": method, "first_run_s": times[0], "later_runs_median_s": statistics.median(times[1:]),
                     "later_runs_max_s": max(times[1:]), "runs": args.runs})
        print(f"{method:>10}: first run {times[0]:.2f} s, later runs median {rows[-1]['later_runs_median_s']:.2f} s "
              f"(max {rows[-1]['later_runs_max_s']:.2f} s)", flush=True)
    out = args.out or RESULTS / f"worker_start-{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": device.name, "machine": platform.processor() or platform.machine(),
                               "cpu_count": device.cpu_count, "synthetic_size": args.size, "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
