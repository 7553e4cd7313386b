"""Old device span vs the GPU's own timeline, NVML utilisation, the ceiling and efficiency, side by side.

For each setting: the compute ceiling (measured afresh), one run without sampling (images/sec, the
CUDA-event span the verdict used to read, NVML's utilisation), and the same run with `profile`
(kernel-busy and what the idle time waited for, the findings' headline, and the sampling cost as
images/sec over the same windows, sampled ones included). Prints a Markdown table for the README and
writes benchmarks/results/gpu_time_truth-<device>.json (or --out).

    python benchmarks/gpu_time_truth.py                    # needs CUDA: eight settings, a few minutes on an H100
    python benchmarks/gpu_time_truth.py --steps 300 --with-compile
    python benchmarks/gpu_time_truth.py --allow-cpu --steps 40   # the same table on a CPU (no GPU columns)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Optional

from workbench.config import RunConfig
from workbench.engine import probe_device, run
from workbench.engine.ceiling import measure_ceiling
from workbench.engine.ceiling_cache import store_ceiling
from workbench.engine.events import ProfileSample, RunEnded, StepStats

RESULTS = Path(__file__).parent / "results"


def settings(on_cuda: bool, with_compile: bool) -> list[tuple[str, RunConfig]]:
    device = "cuda" if on_cuda else "cpu"
    amp = "bf16" if on_cuda else "fp32"
    rows = [
        ("launch-bound: small-cnn b32", RunConfig(model="small-cnn", batch_size=32, pipeline="gpu-resident")),
        ("small-cnn b512", RunConfig(model="small-cnn", batch_size=512, pipeline="gpu-resident")),
        ("input-bound: small-cnn b256, CPU augment, 2 workers",
         RunConfig(model="small-cnn", batch_size=256, pipeline="dataloader", augment="cpu", num_workers=2)),
        ("resnet18 b128 fp32, loader, 8 workers",
         RunConfig(model="resnet18", batch_size=128, pipeline="dataloader", augment="gpu", num_workers=8)),
        (f"heavy: resnet18 b512 {amp} channels_last",
         RunConfig(model="resnet18", batch_size=512, precision=amp, channels_last=True, pipeline="gpu-resident")),
        (f"resnet18 b1024 {amp} channels_last",
         RunConfig(model="resnet18", batch_size=1024, precision=amp, channels_last=True, pipeline="gpu-resident")),
        ("mobilenet_v3_small b256 fp32", RunConfig(model="mobilenet_v3_small", batch_size=256, pipeline="gpu-resident")),
        (f"mobilenet_v3_small b256 {amp} channels_last",
         RunConfig(model="mobilenet_v3_small", batch_size=256, precision=amp, channels_last=True,
                   pipeline="gpu-resident")),
    ]
    if with_compile:
        rows.append((f"resnet18 b512 {amp} channels_last compile",
                     RunConfig(model="resnet18", batch_size=512, precision=amp, channels_last=True, compile=True,
                               pipeline="gpu-resident")))
    return [(name, config.replace(device=device)) for name, config in rows]


def one_run(config: RunConfig) -> dict:
    windows, samples, ended = [], [], None
    for event in run(config):
        if isinstance(event, StepStats):
            windows.append(event)
        elif isinstance(event, ProfileSample):
            samples.append(event)
        elif isinstance(event, RunEnded):
            ended = event
    if ended.status != "finished":
        return {"status": ended.status, "reason": ended.reason}
    after = windows[1:] or windows
    seconds = sum(w.window_seconds for w in after)
    utilisation = [w.memory.gpu_utilization_percent for w in after if w.memory.gpu_utilization_percent is not None]
    s = ended.summary
    return {
        "status": "finished",
        "images_per_sec": s.images_per_sec,
        "images_per_sec_all_windows": (windows[-1].samples_seen - windows[0].samples_seen) / seconds if len(windows) > 1
        else s.images_per_sec,
        "device_span_fraction": s.device_span_fraction,
        "data_wait_fraction": s.data_wait_fraction,
        "nvml_utilization_percent_mean": statistics.mean(utilisation) if utilisation else None,
        "kernel_busy_fraction": s.kernel_busy_fraction,
        "memcpy_fraction": s.memcpy_fraction,
        "idle_waiting_for_data_fraction": s.idle_waiting_for_data_fraction,
        "idle_waiting_for_host_fraction": s.idle_waiting_for_host_fraction,
        "idle_other_fraction": s.idle_other_fraction,
        "kernels_per_step": s.kernels_per_step,
        "median_kernel_seconds": s.median_kernel_seconds,
        "profile_samples": s.profile_samples,
        "timeline_host_ops_recorded": any(sample.timeline_host_ops_recorded for sample in samples),
        "sampled_window_images_per_sec": statistics.median(x.images_per_sec for x in samples) if samples else None,
        "ceiling_images_per_sec": s.ceiling_images_per_sec,
        "pipeline_efficiency": s.pipeline_efficiency,
        "verdict": s.verdict,
        "findings": [finding.to_dict() for finding in s.findings],
        "trace_paths": list(s.trace_paths),
    }


def measure(name: str, config: RunConfig, budget: float) -> dict:
    device = probe_device(config.device)
    began = time.perf_counter()
    try:
        ceiling = measure_ceiling(config, device, budget_seconds=budget)
        store_ceiling(ceiling)  # the runs below report their efficiency against it
        ceiling_row = {"images_per_sec": ceiling.images_per_sec, "steady": ceiling.steady}
    except Exception as error:  # an out-of-memory ceiling must not sink the table
        ceiling_row = {"images_per_sec": None, "error": f"{type(error).__name__}: {error}"}
    plain = one_run(config.replace(profile=False))
    profiled = one_run(config.replace(profile=True))
    overhead: Optional[float] = None
    if plain.get("status") == profiled.get("status") == "finished":
        overhead = 1 - profiled["images_per_sec_all_windows"] / plain["images_per_sec_all_windows"]
    return {"name": name, "config": config.to_dict(), "ceiling": ceiling_row, "without_profile": plain,
            "with_profile": profiled, "sampling_overhead_fraction": overhead, "seconds": time.perf_counter() - began}


def pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def table(rows: list[dict]) -> str:
    lines = [
        "| setting | images/s | event span (old) | NVML util | kernel-busy | idle: host | idle: data | kernels/step "
        "| ceiling images/s | efficiency | sampling cost | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        plain, profiled = row["without_profile"], row["with_profile"]
        if plain.get("status") != "finished" or profiled.get("status") != "finished":
            lines.append(f"| {row['name']} | {plain.get('reason') or profiled.get('reason')} |" + " |" * 10)
            continue
        util = plain["nvml_utilization_percent_mean"]
        kernels = profiled["kernels_per_step"]
        ceiling = row["ceiling"]["images_per_sec"]
        cost = row["sampling_overhead_fraction"]
        cells = [
            row["name"],
            f"{plain['images_per_sec']:,.0f}",
            pct(plain["device_span_fraction"]),
            "n/a" if util is None else f"{util:.0f}%",
            pct(profiled["kernel_busy_fraction"]),
            pct(profiled["idle_waiting_for_host_fraction"]),
            pct(profiled["idle_waiting_for_data_fraction"]),
            "n/a" if kernels is None else f"{kernels:,.0f}",
            # "~": the probe's budget ran out before two chunks agreed within 3 %: a rough ceiling.
            "n/a" if ceiling is None else ("" if row["ceiling"].get("steady") else "~") + f"{ceiling:,.0f}",
            pct(plain["images_per_sec"] / ceiling if ceiling else None),
            "n/a" if cost is None else f"{cost:.1%}",
            (profiled["verdict"] or "").split(":")[0],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if any(row["ceiling"].get("steady") is False for row in rows):
        lines.append("\n~ the ceiling probe did not settle within its budget (--ceiling-budget): a rough figure.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per run (default 300)")
    parser.add_argument("--every", type=int, default=100, help="profile_every (default 100: samples at 20, 120, 220)")
    parser.add_argument("--ceiling-budget", type=float, default=20.0, help="seconds per ceiling probe (default 20)")
    parser.add_argument("--with-compile", action="store_true", help="add a torch.compile setting (a minute to compile)")
    parser.add_argument("--allow-cpu", action="store_true", help="run on a CPU (the GPU columns stay n/a)")
    parser.add_argument("--only", type=int, nargs="*", help="only these settings (1-based)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    device = probe_device("auto")
    if device.type != "cuda" and not args.allow_cpu:
        raise SystemExit(f"no CUDA GPU ({device.cpu_fallback_reason}); --allow-cpu runs the table on the CPU")
    rows = []
    chosen = settings(device.type == "cuda", args.with_compile)
    for number, (name, config) in enumerate(chosen, start=1):
        if args.only and number not in args.only:
            continue
        config = config.replace(dataset="synthetic", synthetic_size=max(10_000, config.batch_size * (args.steps + 10)),
                                max_steps=args.steps, log_every=10, profile_every=args.every)
        print(f"[{number}/{len(chosen)}] {name}…", flush=True)
        rows.append(measure(name, config, args.ceiling_budget))
    print(f"\n{device.name} [{device.type}], torch {device.torch_version}, {args.steps} steps per run, "
          f"profile_every={args.every}\n")
    print(table(rows))
    out = args.out or RESULTS / f"gpu_time_truth-{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": {"device": device.name, "type": device.type, "cpu_count": device.cpu_count,
                    "torch": device.torch_version, "cuda": device.cuda_version, "driver": device.driver_version,
                    "python": platform.python_version()},
        "steps": args.steps, "profile_every": args.every, "rows": rows, "table": table(rows),
    }, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
