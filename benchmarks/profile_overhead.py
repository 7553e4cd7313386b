"""What does profiler sampling cost a run? Images/sec with and without `profile`, same settings.

For each setting the same run goes with profile off and on (alternating, ``--repeats`` times) and
this prints:

- images/sec without sampling (steady state: every log window after the first);
- images/sec with sampling over the *same* windows, sampled ones included: what the user pays at
  that profile_every;
- the extra wall seconds one sample costs (its slower steps, the syncs, starting and stopping the
  profiler, the analysis, writing the traces), and what that comes to at profile_every=1000;
- how much slower the steps inside a timeline window ran than unsampled steps (the profiler's own
  effect on what it measures: host waits read high by about this much).

    python benchmarks/profile_overhead.py               # GPU settings with CUDA, a small CPU setting otherwise
    python benchmarks/profile_overhead.py --steps 300 --every 100 --repeats 3

Writes benchmarks/results/profile_overhead-<device>.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
from pathlib import Path

from _truth import run_events

from workbench.config import RunConfig
from workbench.engine import probe_device, run

RESULTS = Path(__file__).parent / "results"
AMORTISE_EVERY = 1000  # the default profile_every


def settings(on_cuda: bool) -> list[RunConfig]:
    if not on_cuda:
        return [RunConfig(model="small-cnn", device="cpu", batch_size=64, pipeline="gpu-resident", augment="gpu")]
    return [
        RunConfig(model="small-cnn", device="cuda", batch_size=32, pipeline="gpu-resident", augment="gpu"),
        RunConfig(model="resnet18", device="cuda", batch_size=512, precision="bf16", channels_last=True,
                  pipeline="gpu-resident", augment="gpu"),
        RunConfig(model="resnet18", device="cuda", batch_size=256, pipeline="dataloader", augment="gpu",
                  num_workers=8),
    ]


def one_run(config: RunConfig) -> dict:
    windows, samples, ended = run_events(run(config))
    if ended is None or ended.status != "finished":
        raise SystemExit(f"run failed: {ended.reason if ended else 'no end'}")
    after_warmup = windows[1:]
    samples_seen = windows[-1].samples_seen - windows[0].samples_seen
    seconds = sum(w.window_seconds for w in after_warmup)
    return {
        "images_per_sec_steady": ended.summary.images_per_sec,  # sampled windows left out (profile on)
        "images_per_sec_all_windows": samples_seen / seconds,
        "seconds_after_warmup": seconds,
        "steps_after_warmup": windows[-1].step - windows[0].step,
        "samples": [{"first_step": s.first_step, "last_step": s.last_step, "steps": s.steps,
                     "window_images_per_sec": s.images_per_sec, "sampler_seconds": s.overhead_seconds,
                     "host_ops_recorded_in_timeline": s.timeline_host_ops_recorded} for s in samples],
    }


def measure(config: RunConfig, repeats: int) -> dict:
    off, on = [], []
    for _ in range(repeats):  # alternate, so drift on a shared machine hits both alike
        off.append(one_run(config.replace(profile=False)))
        on.append(one_run(config.replace(profile=True)))
    plain = statistics.median(r["images_per_sec_all_windows"] for r in off)
    sampled = statistics.median(r["images_per_sec_all_windows"] for r in on)
    step_seconds = config.batch_size / plain
    extra = statistics.median(
        (r["seconds_after_warmup"] - r["steps_after_warmup"] * step_seconds) / max(1, len(r["samples"])) for r in on
    )
    windows = [s for r in on for s in r["samples"]]
    window_rate = statistics.median(s["window_images_per_sec"] for s in windows) if windows else None
    return {
        "config": config.to_dict(),
        "images_per_sec_without": plain,
        "images_per_sec_with_all_windows": sampled,
        "images_per_sec_with_steady": statistics.median(r["images_per_sec_steady"] for r in on),
        "overhead_fraction": 1 - sampled / plain,
        "samples_per_run": statistics.median(len(r["samples"]) for r in on),
        "extra_seconds_per_sample": extra,
        "sampler_seconds_per_sample": statistics.median(s["sampler_seconds"] for s in windows) if windows else None,
        "overhead_fraction_at_every_1000": extra / (AMORTISE_EVERY * step_seconds + extra),
        "timeline_window_slowdown": plain / window_rate if window_rate else None,
        "host_ops_recorded_in_timeline": any(s["host_ops_recorded_in_timeline"] for s in windows),
        "runs": {"without": off, "with": on},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: 300 on a GPU, 80 on a CPU)")
    parser.add_argument("--every", type=int, default=None, help="profile_every (default: a third of the steps)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    device = probe_device("auto")
    on_cuda = device.type == "cuda"
    steps = args.steps or (300 if on_cuda else 80)
    every = args.every or max(20, steps // 3)
    rows = []
    for config in settings(on_cuda):
        config = config.replace(dataset="synthetic", synthetic_size=max(10_000, config.batch_size * (steps + 10)),
                                max_steps=steps, log_every=5 if not on_cuda else 10, profile_every=every)
        rows.append(measure(config, args.repeats))

    print(f"\nProfiler sampling cost on {device.name} [{device.type}], torch {device.torch_version}: "
          f"{steps} steps, profile_every={every}, median of {args.repeats} alternating runs")
    print(f"{'setting':<44}{'img/s off':>11}{'img/s on':>10}{'cost':>7}{'s/sample':>10}{'@1000':>8}{'window slower':>15}")
    for row in rows:
        c = row["config"]
        name = f"{c['model']} b{c['batch_size']} {c['precision']}{' cl' if c['channels_last'] else ''} {c['pipeline']}"
        slow = f"{row['timeline_window_slowdown']:.2f}x" if row["timeline_window_slowdown"] else "n/a"
        print(f"{name:<44}{row['images_per_sec_without']:>11,.0f}{row['images_per_sec_with_all_windows']:>10,.0f}"
              f"{row['overhead_fraction']:>7.1%}{row['extra_seconds_per_sample']:>10.2f}"
              f"{row['overhead_fraction_at_every_1000']:>8.1%}{slow:>15}")
    out = args.out or RESULTS / f"profile_overhead-{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": {"device": device.name, "type": device.type, "cpu_count": device.cpu_count,
                    "torch": device.torch_version, "cuda": device.cuda_version, "python": platform.python_version()},
        "steps": steps, "profile_every": every, "repeats": args.repeats, "rows": rows,
    }, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
