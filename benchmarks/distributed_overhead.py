"""What does the distributed path cost on one device? devices=1 through DDP (world size 1) vs the plain run.

The same settings train twice, alternating: once as the one-process run (engine.run, devices=1),
once through the launcher as one spawned rank with DistributedDataParallel (NCCL on CUDA, gloo on
a CPU). Images/sec is the steady state (samples ÷ seconds after the first log window), so the
seconds a spawned process takes to start are not in it; they are shown apart. Target on a GPU:
distributed ÷ plain ≥ 0.97. "DDP adds" turns the two rates into the ms the distributed path adds to
each step: DDP's host work per step (a hook and a gradient copy per parameter, an all-reduce per
bucket) is about the same whatever the batch, so the ratio depends on the step's length, and on a
GPU the benchmark measures a short (launch-bound) and a long (compute-bound) step of the same model.
Writes benchmarks/results/distributed_overhead-<device>.json.

    python benchmarks/distributed_overhead.py                  # GPU settings if CUDA, a small CPU check otherwise
    python benchmarks/distributed_overhead.py --repeats 5 --steps 400
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
from workbench.engine.distributed.launcher import spawn_run
from workbench.engine.events import RunEnded, RunStarted

RESULTS = Path(__file__).parent / "results"
TARGET_RATIO = 0.97


def settings(on_cuda: bool, steps: int, batch: int) -> list[RunConfig]:
    def common(batch_size: int) -> dict:
        return dict(dataset="synthetic", batch_size=batch_size, synthetic_size=max(batch_size * 40, 10_000),
                    max_steps=steps, epochs=1000, log_every=max(5, steps // 15))

    if not on_cuda:
        return [RunConfig(device="cpu", model="small-cnn", pipeline="gpu-resident", augment="gpu", **common(batch))]
    fastest = dict(device="cuda", model="resnet18", pipeline="gpu-resident", augment="gpu", precision="bf16",
                   channels_last=True)
    return [
        # The shortest steps: on an H100 the host's launches bound this one (66 % kernel-busy), so
        # DDP's per-step host work costs its full length here ...
        RunConfig(**fastest, **common(batch)),
        # ... the same with 4× the batch, where the GPU bounds the step (95 %+ kernel-busy at 1024):
        # the same host work, hidden behind the kernels ...
        RunConfig(**fastest, **common(batch * 4)),
        # ... and the common setup: a DataLoader with workers, fp32.
        RunConfig(device="cuda", model="resnet18", pipeline="dataloader", augment="gpu", num_workers=8,
                  **common(batch)),
    ]


def added_ms_per_step(config: RunConfig, plain_rate: float, distributed_rate: float) -> float:
    """What the distributed path adds to each optimiser step, in ms: a fixed cost, whatever the step's length."""
    return 1000.0 * config.effective_batch_size * (1.0 / distributed_rate - 1.0 / plain_rate)


def measure(events) -> dict:
    began = time.perf_counter()
    first_step = None
    ended = None
    for event in events:
        if first_step is None and isinstance(event, RunStarted):
            first_step = time.perf_counter() - began
        if isinstance(event, RunEnded):
            ended = event
    return {
        "status": ended.status,
        "reason": ended.reason,
        "images_per_sec": ended.summary.images_per_sec,
        "data_wait_fraction": ended.summary.data_wait_fraction,
        "seconds_to_start": first_step,
        "wall_seconds": time.perf_counter() - began,
    }


def _seconds(result: dict) -> str:
    started = result["seconds_to_start"]  # None: the run ended before training started
    return f"{started:.1f} s" if started is not None else "n/a"


def _rate(result: dict) -> str:
    rate = result["images_per_sec"]
    return f"{rate:,.0f} img/s" if rate is not None else f"no rate ({result['status']}: {result['reason']})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: 300 on a GPU, 40 on a CPU)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 512 on a GPU (the long-step setting takes 4×), 64 on a CPU")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each path per setting, alternating")
    parser.add_argument("--only", type=int, nargs="*", help="only these settings (1-based)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    device = probe_device("auto")
    on_cuda = device.type == "cuda"
    steps = args.steps or (300 if on_cuda else 40)
    batch = args.batch_size or (512 if on_cuda else 64)
    rows = []
    chosen = [config for number, config in enumerate(settings(on_cuda, steps, batch), 1)
              if not args.only or number in args.only]
    for config in chosen:
        plain, distributed = [], []
        for repeat in range(args.repeats):
            plain.append(measure(run(config)))
            # One process trains without DDP's wrapper now; this measures the wrapper's cost, so it asks for it.
            distributed.append(measure(spawn_run(config, lambda: False, 1, wrap_one_process=True)))
            # Progress as it goes: a run cut short by a time limit still shows what it measured.
            print(f"{config.model} {config.pipeline} {config.precision} run {repeat + 1}: "
                  f"plain {_rate(plain[-1])}, DDP {_rate(distributed[-1])} "
                  f"(started in {_seconds(plain[-1])} and {_seconds(distributed[-1])})",
                  flush=True)
        failed = [result for result in plain + distributed if result["status"] != "finished"]
        row = {"config": config.to_dict(), "plain": plain, "distributed": distributed,
               "failed": [result["reason"] for result in failed]}
        if not failed:
            row["plain_median"] = statistics.median(result["images_per_sec"] for result in plain)
            row["distributed_median"] = statistics.median(result["images_per_sec"] for result in distributed)
            row["ratio"] = row["distributed_median"] / row["plain_median"]
            row["added_ms_per_step"] = added_ms_per_step(config, row["plain_median"], row["distributed_median"])
        rows.append(row)

    backend = "nccl" if on_cuda and "nccl" in device.distributed_backends else "gloo"
    print(f"\n{steps} steps, {args.repeats} runs of each path, on {device.name} [{device.type}], "
          f"torch {device.torch_version}; distributed = 1 spawned rank, DDP over {backend}")
    print(f"{'model':<12}{'pipeline':<14}{'precision':<10}{'batch':>6}{'plain img/s':>12}{'DDP img/s':>11}"
          f"{'ratio':>8}{'DDP adds':>10}{'start plain':>13}{'start DDP':>11}")
    for row in rows:
        c = row["config"]
        if row["failed"]:
            print(f"{c['model']:<12}{c['pipeline']:<14}{c['precision']:<10}{c['batch_size']:>6}  "
                  f"failed: {row['failed'][0]}")
            continue
        start_plain = statistics.median(result["seconds_to_start"] for result in row["plain"])
        start_ddp = statistics.median(result["seconds_to_start"] for result in row["distributed"])
        verdict = "" if not on_cuda else ("  ok" if row["ratio"] >= TARGET_RATIO else f"  below {TARGET_RATIO}")
        print(f"{c['model']:<12}{c['pipeline']:<14}{c['precision']:<10}{c['batch_size']:>6}"
              f"{row['plain_median']:>12,.0f}{row['distributed_median']:>11,.0f}{row['ratio']:>8.3f}{row['added_ms_per_step']:>7.2f} ms"
              f"{start_plain:>12.1f}s{start_ddp:>10.1f}s{verdict}")
    out = args.out or RESULTS / f"distributed_overhead-{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": {"device": device.name, "type": device.type, "cpu_count": device.cpu_count,
                    "gpu_count": device.gpu_count, "torch": device.torch_version, "cuda": device.cuda_version,
                    "driver": device.driver_version, "python": platform.python_version()},
        "backend": backend, "steps": steps, "batch_size": batch, "repeats": args.repeats,
        "target_ratio": TARGET_RATIO, "rows": rows,
    }, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
