"""Make assets/breakdown.png: the breakdown view on real GPU timeline data.

    python scripts/make_breakdown_screenshot.py

The samples are cut from a real torch.profiler dump of small-cnn, batch 32, fp32 on an NVIDIA H100
(torch 2.11; ``tests/engine/data/kineto_launchbound_smallcnn_b32_fp32_h100.json.gz``), two steps
each, analysed by the same code a run uses; the findings are the rules' answer to those figures for
that run's settings on an H100. (That probe recorded every host op, which slows the host: the view
says so under the bars.) The real app wires this view in a later step.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DUMP = ROOT / "tests" / "engine" / "data" / "kineto_launchbound_smallcnn_b32_fp32_h100.json.gz"
STEPS_PER_SAMPLE = 2


def samples_from_dump(path: Path):
    from workbench.engine import kineto, timeline

    with gzip.open(path, "rt", encoding="utf-8") as file:
        dump = json.load(file)
    activities = kineto.activities(dump["events"], device_index=0)
    # The probe marked each step's fetch ("workbench.data_wait") and step ("workbench.step") on the host.
    starts = sorted(a.start_ns for a in activities if a.name == "workbench.data_wait")
    ends = sorted(a.end_ns for a in activities if a.name == "workbench.step")
    samples = []
    for index in range(0, len(starts) - STEPS_PER_SAMPLE + 1, STEPS_PER_SAMPLE):
        window = (starts[index], ends[index + STEPS_PER_SAMPLE - 1])
        breakdown = timeline.analyse(activities, window=window, steps=STEPS_PER_SAMPLE)
        first = 21 + index * 50  # as a run with profile_every=100 would have placed them
        samples.append(timeline.to_sample(
            breakdown, first, first + STEPS_PER_SAMPLE - 1, "cuda", dump["batch"], ops_steps=STEPS_PER_SAMPLE,
            trace_path=f"~/.local/share/gpu-training-workbench/traces/20261122-220101-4242/step-{first:07d}.trace.json.gz",
            timeline_host_ops_recorded=True,
        ))
    return dump, samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "breakdown.png")
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtWidgets import QApplication

    from workbench.config import RunConfig
    from workbench.device_info import DeviceInfo
    from workbench.engine.findings import find
    from workbench.engine.run_facts import RunFacts
    from workbench.engine.run_summary import RunSummary
    from workbench.engine.summary import profile_figures
    from workbench.gui.breakdown_view import BreakdownView

    dump, samples = samples_from_dump(DUMP)
    config = RunConfig(model="small-cnn", batch_size=32, precision="fp32", pipeline="gpu-resident", profile=True,
                       profile_every=100)
    device = DeviceInfo(type="cuda", name="NVIDIA H100 80GB HBM3", cuda_available=True, compute_capability="9.0",
                        total_memory_bytes=85_520_809_984, bf16_supported=True, cpu_count=16)
    figures = profile_figures(samples)
    images_per_sec = dump["steps"] * dump["batch"] / dump["wall_s"]
    summary = RunSummary(status="finished", device="cuda", images_per_sec=images_per_sec, **figures)
    facts = RunFacts.of(summary, config, device)

    app = QApplication.instance() or QApplication([])
    view = BreakdownView()
    view.resize(1100, 860)
    for sample in samples:
        view.add_sample(sample)
    view.set_findings(find(facts))
    view.show()
    for _ in range(5):
        app.processEvents()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not view.grab().save(str(args.out)):
        raise SystemExit(f"could not write {args.out}")
    print(f"wrote {args.out}: {len(samples)} samples, bars (%): "
          + "; ".join(f"{key} {', '.join(f'{h:.0f}' for h in heights)}" for key, heights in view.bar_heights().items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
