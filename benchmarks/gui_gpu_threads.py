"""Does the GUI's threading hold on a real CUDA GPU, without Qt (for GPU machines that have no Qt)?

The desktop app iterates engine.run on a worker thread and, from other threads, probes the device
and calls release_cached_memory (the button). This replays that pattern with plain threads: a run on
the GPU on one thread, the release called from the main thread mid-run and after the run, and every
StepStats fed into the plots' SeriesBuffer (the GUI's own, Qt-free). It prints what it saw and writes
benchmarks/results/gui_gpu_threads.json (the H100 run is kept as results/gui_gpu_threads-h100.json).

    python benchmarks/gui_gpu_threads.py [--model resnet18] [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import numpy as np

from workbench.config import RunConfig
from workbench.engine.events import RunEnded, RunStarted, StepStats
from workbench.formatting import format_bytes
from workbench.gui.engine_calls import engine_probe, engine_release, engine_run
from workbench.gui.series import SeriesBuffer, step_row

RESULTS = Path(__file__).parent / "results"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS / "gui_gpu_threads.json")
    args = parser.parse_args()

    probed: dict = {}
    probe = threading.Thread(target=lambda: probed.update(device=engine_probe()))  # as the GUI does, off-thread
    probe.start()
    probe.join()
    device = probed["device"]
    if device.type != "cuda":
        print(f"no CUDA GPU here ({device.cpu_fallback_reason}): nothing to check")
        return 0

    config = RunConfig(dataset="synthetic", synthetic_size=20_000, model=args.model, batch_size=256,
                       num_workers=4, max_steps=args.steps, epochs=100, log_every=10, device="cuda")
    stop = threading.Event()
    events: list = []
    errors: list = []

    def train() -> None:
        try:
            for event in engine_run(config, stop.is_set):
                events.append(event)
        except Exception as error:  # the GUI's worker would turn this into a failed run
            errors.append(error)

    worker = threading.Thread(target=train)
    began = time.perf_counter()
    worker.start()
    while not any(isinstance(event, StepStats) and event.step >= args.steps // 2 for event in events):
        if not worker.is_alive():
            break
        time.sleep(0.05)
    during = engine_release()  # the button, pressed mid-run from another thread
    worker.join()
    after = engine_release()  # and again once the run has ended
    seconds = time.perf_counter() - began

    buffer = SeriesBuffer()
    for event in events:
        if isinstance(event, StepStats):
            buffer.append(step_row(event))
    ended = events[-1] if events else None
    started = next((event for event in events if isinstance(event, RunStarted)), None)
    result = {
        "device": device.name,
        "compute_capability": device.compute_capability,
        "total_memory": device.total_memory_bytes,
        "driver": device.driver_version,
        "torch": device.torch_version,
        "config": config.to_dict(),
        "status": ended.status if isinstance(ended, RunEnded) else None,
        "reason": ended.reason if isinstance(ended, RunEnded) else None,
        "errors": [repr(error) for error in errors],
        "steps_logged": len(buffer),
        "all_memory_figures_present": bool(
            len(buffer) and all(np.isfinite(buffer.column(key)).all()
                                for key in ("torch_allocated", "torch_reserved", "nvml_device_used"))),
        "peak_reserved": float(np.nanmax(buffer.column("torch_reserved"))) if len(buffer) else None,
        "release_during_run": during.message,
        "release_after_run": after.message,
        "notes": list(started.notes) if started else [],
        "wall_seconds": seconds,
    }
    for key, value in result.items():
        if key != "config":
            print(f"{key:>28}  {format_bytes(value) if key in ('total_memory', 'peak_reserved') else value}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    ok = result["status"] == "finished" and not errors and result["all_memory_figures_present"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
