"""NVML's share of time any kernel ran, the GPU's own timeline (ours and HTA's shares), GPM and the ceiling,
each row from one profiled run per repeat.

For each setting and repeat: ONE run with `profile` (samples at steps 20, 120, 220 of 300). Everything in a
repeat's row comes from that run: images/s, the step time, NVML's share of time any kernel ran and GPM's SM
and tensor activity over its steady log windows (those no sample touched); our shares of that step from its
samples' timelines (the host's remainder signed, a base shorter than the GPU's work flagged); HTA's own
shares over the sampled window (unrebased); and what sampling cost the run. Repeats are interleaved
(s1 s2 … s1 s2 …); the table gives each column's median (min–max). The compute ceiling is measured once per
setting beforehand (a separate measurement, its own column). The arithmetic is benchmarks/_truth.py.
Prints a Markdown table for the README and writes benchmarks/results/gpu_time_truth-<device>.json (or --out);
--traces DIR keeps each setting's first sampled window as a trimmed Chrome trace (device work, launches and
annotations: small files to commit; recompute with workbench.engine.chrome_trace.breakdown).

    python benchmarks/gpu_time_truth.py --repeats 3 --traces benchmarks/results/traces   # CUDA: ~6 minutes on an H100
    python benchmarks/gpu_time_truth.py --steps 300 --with-compile
    python benchmarks/gpu_time_truth.py --allow-cpu --steps 20 --repeats 3 --only 1 --ceiling-budget 0  # a CPU smoke run
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path
from typing import Optional

from _common import Deadline, machine, write_results
from _truth import interleaved, measure_run, summarise, table

from workbench.config import RunConfig
from workbench.engine import chrome_trace, probe_device, run
from workbench.engine.ceiling import measure_ceiling
from workbench.engine.ceiling_cache import store_ceiling

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
                     RunConfig(model="resnet18", batch_size=512, precision=amp, channels_last=True, compile="default",
                               pipeline="gpu-resident")))
    return [(name, config.replace(device=device)) for name, config in rows]


def ceiling_of(config: RunConfig, budget: float) -> dict:
    """The compute ceiling, measured once per setting before its runs (0 s: not measured)."""
    if budget <= 0:
        return {"images_per_sec": None, "reason": "not measured (--ceiling-budget 0)"}
    try:
        ceiling = measure_ceiling(config, probe_device(config.device), budget_seconds=budget)
        store_ceiling(ceiling)  # the runs report their efficiency against it
        return {"images_per_sec": ceiling.images_per_sec, "steady": ceiling.steady}
    except Exception as error:  # an out-of-memory ceiling must not sink the table
        return {"images_per_sec": None, "error": f"{type(error).__name__}: {error}"}


def keep_trace(name: str, runs: list[dict], folder: Path) -> Optional[str]:
    """The setting's first sampled timeline window, trimmed, with what recomputing it needs beside the events."""
    for result in runs:
        for window in result.get("sample_windows", ()):
            if not window.get("trace_path"):
                continue
            trace = chrome_trace.trim(chrome_trace.load(window["trace_path"]))
            trace["workbench_sample"] = {key: window[key] for key in (
                "first_step", "steps", "window_seconds", "host_data_wait_seconds", "timeline_host_ops_recorded")}
            slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
            return str(chrome_trace.save(trace, folder / f"{slug}.trace.json.gz"))
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per run (default 300)")
    parser.add_argument("--every", type=int, default=100, help="profile_every (default 100: samples at 20, 120, 220)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per setting, interleaved (default 3)")
    parser.add_argument("--ceiling-budget", type=float, default=20.0,
                        help="seconds per ceiling probe (default 20; 0 skips the ceiling)")
    parser.add_argument("--with-compile", action="store_true", help="add a torch.compile setting (a minute to compile)")
    parser.add_argument("--allow-cpu", action="store_true", help="run on a CPU (the GPU columns stay n/a)")
    parser.add_argument("--only", type=int, nargs="*", help="only these settings (1-based)")
    parser.add_argument("--traces", type=Path, default=None, help="keep each setting's first sampled window here, trimmed")
    parser.add_argument("--budget-seconds", type=float, default=None,
                        help="start no new run after this many seconds (what ran is still written)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.repeats < 1 or args.steps < 10:
        parser.error("--repeats must be at least 1 and --steps at least 10")

    device = probe_device("auto")
    if device.type != "cuda" and not args.allow_cpu:
        raise SystemExit(f"no CUDA GPU ({device.cpu_fallback_reason}); --allow-cpu runs the table on the CPU")
    chosen = [(number, name, config) for number, (name, config) in
              enumerate(settings(device.type == "cuda", args.with_compile), start=1)
              if not args.only or number in args.only]
    # Log windows small enough that a few lie between samples (a sample touches the windows of its steps).
    log_every = min(10, max(2, args.steps // 10))
    configs = {number: config.replace(dataset="synthetic", synthetic_size=max(10_000, config.batch_size * (args.steps + 10)),
                                      max_steps=args.steps, log_every=log_every, profile=True,
                                      profile_every=args.every, evaluate=False)
               for number, _, config in chosen}
    names = {number: name for number, name, _ in chosen}
    began = time.perf_counter()
    deadline = Deadline(args.budget_seconds)
    ceilings = {number: ceiling_of(configs[number], args.ceiling_budget) for number, _, _ in chosen}
    runs: dict[int, list[dict]] = {number: [] for number, _, _ in chosen}
    for repeat, number in interleaved([number for number, _, _ in chosen], args.repeats):
        if deadline.passed():
            print(f"budget of {args.budget_seconds:.0f} s spent: no more runs (repeat {repeat + 1} of "
                  f"{names[number]} and after not run)", flush=True)
            break
        print(f"[repeat {repeat + 1}/{args.repeats}] {number}. {names[number]}…", flush=True)
        result = measure_run(run(configs[number]))
        result["repeat"] = repeat + 1
        runs[number].append(result)
    rows = []
    for number, name, _ in chosen:
        row = {"name": name, "config": configs[number].to_dict(), "ceiling": ceilings[number], "runs": runs[number],
               "summary": summarise(runs[number])}
        if args.traces is not None:
            row["trimmed_trace"] = keep_trace(name, runs[number], args.traces)
        rows.append(row)
    counts = sorted({len(row["runs"]) for row in rows}) or [0]
    done = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"  # fewer where the budget ran out
    print(f"\n{device.name} [{device.type}], torch {device.torch_version}, {args.steps} steps per run, "
          f"profile_every={args.every}, {done} interleaved repeats (of {args.repeats} asked for)\n")
    text = table(rows, done)
    print(text)
    out = args.out or RESULTS / f"gpu_time_truth-{device.type}.json"
    write_results(out, {"machine": machine(device), "steps": args.steps, "profile_every": args.every,
                        "repeats": args.repeats, "log_every": log_every, "rows": rows, "table": text,
                        "seconds": time.perf_counter() - began})
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
