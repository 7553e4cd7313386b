"""How fast does the engine train, per pipeline and precision, on this machine?

Runs the real engine (no GUI) over a grid of settings and prints a table; writes JSON to
benchmarks/results/engine_throughput-<device>.json (or --out). Images/sec is the median over
log windows after the first (cuDNN autotuning and warm-up are excluded).

    python benchmarks/engine_throughput.py                       # GPU grid if CUDA, small CPU grid otherwise
    python benchmarks/engine_throughput.py --model small-cnn --steps 60
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

from workbench.config import RunConfig
from workbench.engine import probe_device, run
from workbench.engine.events import RunEnded, StepStats
from workbench.formatting import format_bytes

RESULTS = Path(__file__).parent / "results"


def grid(on_cuda: bool, model: str) -> list[RunConfig]:
    if not on_cuda:
        return [
            RunConfig(model=model, device="cpu", pipeline=pipeline, augment=augment, num_workers=workers)
            for pipeline, augment, workers in [
                ("dataloader", "cpu", 0), ("dataloader", "cpu", 2), ("dataloader", "gpu", 2), ("gpu-resident", "gpu", 0)
            ]
        ]
    configs = []
    for precision in ("fp32", "fp16", "bf16"):
        for pipeline, augment, workers, channels_last in [
            ("dataloader", "cpu", 8, False),
            ("dataloader", "gpu", 8, False),
            ("gpu-resident", "gpu", 0, False),
            ("gpu-resident", "gpu", 0, True),
        ]:
            configs.append(RunConfig(model=model, device="cuda", precision=precision, pipeline=pipeline,
                                     augment=augment, num_workers=workers, channels_last=channels_last))
    return configs


def measure(config: RunConfig) -> dict:
    began = time.perf_counter()
    steps, ended = [], None
    for event in run(config):
        if isinstance(event, StepStats):
            steps.append(event)
        elif isinstance(event, RunEnded):
            ended = event
    settled = steps[1:] or steps
    return {
        "config": config.to_dict(),
        "status": ended.status,
        "reason": ended.reason,
        "images_per_sec_median": statistics.median(s.images_per_sec for s in settled) if settled else None,
        "data_wait_fraction": sum(s.data_wait_seconds for s in settled) / sum(s.window_seconds for s in settled)
        if settled else None,
        "device_span_fraction": sum(s.device_span_seconds for s in settled) / sum(s.window_seconds for s in settled)
        if settled else None,
        "peak_allocated_bytes": ended.summary.peak_allocated_bytes,
        "peak_reserved_bytes": ended.summary.peak_reserved_bytes,
        "peak_nvml_device_used_bytes": ended.summary.peak_nvml_device_used_bytes,
        "wall_seconds": time.perf_counter() - began,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: resnet18 on a GPU, small-cnn on a CPU")
    parser.add_argument("--steps", type=int, default=None, help="training steps per setting")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    device = probe_device("auto")
    on_cuda = device.type == "cuda"
    model = args.model or ("resnet18" if on_cuda else "small-cnn")
    steps = args.steps or (200 if on_cuda else 40)
    batch = args.batch_size or (512 if on_cuda else 128)
    rows = []
    for config in grid(on_cuda, model):
        config = config.replace(dataset="synthetic", synthetic_size=max(batch * 20, 10_000), batch_size=batch,
                                max_steps=steps, epochs=100, log_every=max(5, steps // 10))
        rows.append(measure(config))

    header = f"{'pipeline':<13}{'augment':<8}{'workers':>8}{'precision':>10}{'ch-last':>8}{'img/s':>10}" \
             f"{'wait':>7}{'busy':>7}{'peak alloc':>12}{'peak rsrv':>11}{'NVML used':>11}"
    print(f"\n{model}, batch {batch}, {steps} steps on {device.name} [{device.type}], torch {device.torch_version}")
    print(header)
    for row in rows:
        c = row["config"]
        if row["status"] != "finished":
            print(f"{c['pipeline']:<13}{c['augment']:<8}{c['num_workers']:>8}{c['precision']:>10}  "
                  f"{row['status']}: {row['reason']}")
            continue
        print(f"{c['pipeline']:<13}{c['augment']:<8}{c['num_workers']:>8}{c['precision']:>10}"
              f"{'yes' if c['channels_last'] else 'no':>8}{row['images_per_sec_median']:>10,.0f}"
              f"{row['data_wait_fraction']:>7.0%}{row['device_span_fraction']:>7.0%}"
              f"{format_bytes(row['peak_allocated_bytes']):>12}{format_bytes(row['peak_reserved_bytes']):>11}"
              f"{format_bytes(row['peak_nvml_device_used_bytes']):>11}")
    out = args.out or RESULTS / f"engine_throughput-{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": {"device": device.name, "type": device.type, "cpu_count": device.cpu_count,
                    "torch": device.torch_version, "cuda": device.cuda_version, "driver": device.driver_version,
                    "python": platform.python_version()},
        "model": model, "batch_size": batch, "steps": steps, "rows": rows,
    }, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
