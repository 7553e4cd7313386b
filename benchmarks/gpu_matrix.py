"""Which input pipeline and precision pay on this GPU, and by how much over the classic pipeline?

The real engine over a matrix: model (resnet18, small-cnn) × precision (fp32, fp16, bf16) × input
pipeline (dataloader + CPU augmentation, dataloader + GPU augmentation, gpu-resident) × pin_memory
(dataloader only: gpu-resident has no host copy). Each cell is one run of fixed length on
CIFAR-shaped synthetic data (or --data FILE.npz): steady-state images/sec (samples ÷ seconds after
the first log window), data wait, event span, peak torch allocated / reserved and NVML used (the
whole device's). Then, per model, the best cell and the workbench's preset (gpu-resident, GPU
augmentation, bf16 or fp16, channels_last) against the classic seed-style pipeline (per-image
torchvision augmentation in 2 DataLoader workers, no pinning, fp32; the engine normalises on the
device, which makes this classic a little faster than the tutorial's, so the ratio is conservative).
Target: ≥ 3× on small-cnn.

    python benchmarks/gpu_matrix.py                  # on a CUDA GPU, about 5-8 minutes
    python benchmarks/gpu_matrix.py --quick          # a smoke run (on a CPU: small-cnn, fp32 only)
"""

from __future__ import annotations

import argparse

from _common import RESULTS, Deadline, machine, write_results

from workbench.config import RunConfig
from workbench.engine import probe_device, run
from workbench.engine.events import RunEnded
from workbench.formatting import format_bytes

TARGET = 3.0
PIPELINES = (  # name → pipeline, augment
    ("dataloader + CPU aug", "dataloader", "cpu"),
    ("dataloader + GPU aug", "dataloader", "gpu"),
    ("gpu-resident", "gpu-resident", "gpu"),
)


def classic(base: RunConfig) -> RunConfig:
    return base.replace(pipeline="dataloader", augment="cpu", num_workers=2, pin_memory=False, non_blocking=False,
                        persistent_workers=False, precision="fp32", channels_last=False)


def preset(base: RunConfig, device) -> RunConfig:
    return base.replace(pipeline="gpu-resident", augment="gpu", channels_last=True,
                        precision="bf16" if device.bf16_supported else "fp16")


def measure(config: RunConfig) -> dict:
    ended = None
    for event in run(config):
        if isinstance(event, RunEnded):
            ended = event
    s = ended.summary
    return {
        "status": ended.status, "reason": ended.reason, "images_per_sec": s.images_per_sec,
        "data_wait_fraction": s.data_wait_fraction,
        "device_span_fraction": s.device_span_fraction, "peak_allocated_bytes": s.peak_allocated_bytes,
        "peak_reserved_bytes": s.peak_reserved_bytes, "peak_nvml_device_used_bytes": s.peak_nvml_device_used_bytes,
        "wall_seconds": s.wall_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few steps; on a CPU small-cnn and fp32 only")
    parser.add_argument("--models", default=None, help="comma-separated (default small-cnn,resnet18)")
    parser.add_argument("--precisions", default=None, help="comma-separated (default fp32,fp16,bf16 on a GPU)")
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=None, help="steps per cell (default 200; --quick 12)")
    parser.add_argument("--workers", type=int, default=None, help="DataLoader workers (default min(8, cores))")
    parser.add_argument("--data", default=None, help="an .npz dataset instead of synthetic CIFAR-shaped data")
    parser.add_argument("--budget-seconds", type=float, default=540, help="start no new cell after this")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    device = probe_device("auto")
    on_cuda = device.type == "cuda"
    # small-cnn first: its comparison carries the target, and a spent budget cuts the last model's cells.
    models = (args.models or ("small-cnn,resnet18" if on_cuda or not args.quick else "small-cnn")).split(",")
    precisions = (args.precisions or ("fp32,fp16,bf16" if on_cuda else "fp32")).split(",")
    steps = args.steps or (12 if args.quick else 200)
    batch = args.batch_size if not args.quick or on_cuda else 64
    workers = args.workers if args.workers is not None else min(8, device.cpu_count)
    # CIFAR-10's 50,000 training images; a smoke run only needs its steps' worth.
    size = batch * (steps + 2) if args.quick else max(50_000, batch * 4)
    data = dict(dataset="npz", data_path=args.data) if args.data else dict(dataset="synthetic", synthetic_size=size)
    deadline = Deadline(args.budget_seconds)
    rows: list[dict] = []
    out = RESULTS / (args.out or f"gpu_matrix-{device.type}{'-quick' if args.quick else ''}.json")

    def cell(label: str, config: RunConfig, **facts) -> None:
        if deadline.passed():
            return
        problems = config.validate(device)
        result = {"status": "skipped", "reason": "; ".join(problems)} if problems else measure(config)
        row = {"label": label, "model": config.model, "precision": config.precision, "pipeline": config.pipeline,
               "augment": config.augment, "pin_memory": config.pin_memory, "channels_last": config.channels_last,
               "num_workers": config.num_workers, **facts, **result, "config": config.to_dict()}
        rows.append(row)
        print(_line(row), flush=True)
        write_results(out, payload())  # after every cell: a budget or a crash keeps what ran

    def payload() -> dict:
        return {"machine": machine(device), "batch_size": batch, "steps": steps, "rows": rows,
                "comparisons": comparisons(), "target": TARGET}

    def comparisons() -> list[dict]:
        found = []
        for model in models:
            base_row = next((r for r in rows if r["model"] == model and r.get("role") == "classic"
                             and r["status"] == "finished"), None)
            finished = [r for r in rows if r["model"] == model and r["status"] == "finished"]
            if base_row is None or not finished:
                continue
            best = max(finished, key=lambda r: r["images_per_sec"])
            preset_row = next((r for r in finished if r.get("role") == "preset"), None)
            found.append({
                "model": model, "classic_images_per_sec": base_row["images_per_sec"],
                "best_label": best["label"], "best_images_per_sec": best["images_per_sec"],
                "best_speedup": best["images_per_sec"] / base_row["images_per_sec"],
                "preset_speedup": preset_row["images_per_sec"] / base_row["images_per_sec"] if preset_row else None,
            })
        return found

    print(f"{'model':<10} {'cell':<44} {'img/s':>9} {'wait':>6} {'span':>6} {'alloc':>10} {'reserved':>10} "
          f"{'NVML used':>10}")
    for model in models:
        base = RunConfig(model=model, batch_size=batch, max_steps=steps, log_every=max(2, steps // 10),
                         num_workers=workers, persistent_workers=True, device="auto", **data)
        cell("classic seed-style", classic(base), role="classic")
        for precision in precisions:
            for name, pipeline, augment in PIPELINES:
                for pin in ((True, False) if pipeline == "dataloader" else (False,)):
                    config = base.replace(precision=precision, pipeline=pipeline, augment=augment, pin_memory=pin,
                                          num_workers=workers if pipeline == "dataloader" else 0)
                    pin_text = f" pin={'on' if pin else 'off'}" if pipeline == "dataloader" else ""
                    label = f"{precision} {name}{pin_text}"
                    cell(label, config, role="matrix")
        cell("preset: gpu-resident + channels_last", preset(base, device), role="preset")

    found = comparisons()
    print(f"\nbatch {batch}, {steps} steps per cell, {workers} workers on {device.name} [{device.type}], "
          f"torch {device.torch_version}")
    for item in found:
        verdict = "meets" if item["best_speedup"] >= TARGET else "misses"
        preset_text = f"; preset {item['preset_speedup']:.2f}×" if item["preset_speedup"] else ""
        print(f"{item['model']}: classic {item['classic_images_per_sec']:,.0f} img/s; best {item['best_label']} "
              f"{item['best_images_per_sec']:,.0f} img/s = {item['best_speedup']:.2f}×{preset_text} "
              f"({verdict} the target ≥ {TARGET:g}×{' on small-cnn' if item['model'] == 'small-cnn' else ''})")
    if deadline.passed():
        print(f"budget of {args.budget_seconds:g} s spent: {len(rows)} cells ran")
    write_results(out, payload())
    print(f"wrote {out}")


def _line(row: dict) -> str:
    if row["status"] != "finished":
        return f"{row['model']:<10} {row['label']:<44} {row['status']}: {row['reason']}"
    return (f"{row['model']:<10} {row['label']:<44} {row['images_per_sec']:>9,.0f} {row['data_wait_fraction']:>6.0%} "
            f"{row['device_span_fraction']:>6.0%} {format_bytes(row['peak_allocated_bytes']):>10} "
            f"{format_bytes(row['peak_reserved_bytes']):>10} {format_bytes(row['peak_nvml_device_used_bytes']):>10}")


if __name__ == "__main__":
    main()
