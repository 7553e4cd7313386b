"""Make the two CPU-only torch.profiler traces the input-bound finding is tested on (tests/engine/data/).

One step loop, profiled the way docs/own-script.md tells a user to (a schedule with wait/warmup/active,
tensorboard_trace_handler, record_shapes=False), run twice:

- ``input-heavy``: DataLoader(num_workers=0) over a dataset whose __getitem__ does real CPU work (a
  sort and a cumulative sum per sample), so most of each step is spent inside the loader's __next__;
- ``loader-keeps-up``: the same model and loop over a dataset whose __getitem__ only indexes a tensor.

There is no GPU here, so the traces hold no kernels: the finding must come from the DataLoader's share of the
step. The traces are trimmed to the step annotations, the DataLoader's spans and the top-level host ops, so they
stay small enough to commit.

    python scripts/make_input_bound_traces.py OUT_FOLDER
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

SAMPLES = 256
BATCH = 16
FEATURES = 256


class HeavySamples(Dataset):
    """Each sample costs real CPU time, as decoding and augmenting an image does."""

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(index)
        raw = torch.randn(64, 4096, generator=generator)
        work = raw.sort(dim=1).values.cumsum(dim=1)  # a few ms of sorting per sample
        return work[:, :FEATURES].mean(dim=0), index % 10


class LightSamples(Dataset):
    """Samples already in memory: the loader only indexes them."""

    def __init__(self) -> None:
        self.features = torch.randn(SAMPLES, FEATURES, generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int):
        return self.features[index], index % 10


def profile_run(dataset: Dataset, out_dir: Path) -> Path:
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(dataset, batch_size=BATCH, num_workers=0, shuffle=False)
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=4, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out_dir)),
        record_shapes=False,
    ) as profiler:
        for step, (features, labels) in enumerate(loader):
            if step >= 1 + 1 + 4:
                break
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            profiler.step()
    (trace,) = out_dir.glob("*.pt.trace.json*")
    return trace


def trimmed(trace: dict) -> dict:
    """Metadata rows, the steps, the DataLoader's spans and the host ops directly inside a step (no Python frames,
    no nested aten ops): what the report reads of a CPU-only trace."""
    events = trace["traceEvents"]
    steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]

    def top_level(event: dict) -> bool:
        start, end = float(event["ts"]), float(event["ts"]) + float(event.get("dur", 0))
        inside = [s for s in steps if float(s["ts"]) <= start and end <= float(s["ts"]) + float(s["dur"])]
        if not inside:
            return False
        enclosing = [e for e in events if e is not event and e.get("ph") == "X" and e.get("cat") == "cpu_op"
                     and e.get("tid") == event.get("tid") and float(e["ts"]) <= start
                     and end <= float(e["ts"]) + float(e.get("dur", 0)) and e.get("dur", 0) > event.get("dur", 0)]
        return not enclosing

    kept = []
    for event in events:
        name = str(event.get("name", ""))
        if event.get("ph") == "M" or event in steps or name.startswith("enumerate(DataLoader)"):
            kept.append(event)
        elif event.get("ph") == "X" and event.get("cat") in ("cpu_op", "user_annotation") and top_level(event):
            kept.append(event)
    result = {key: value for key, value in trace.items() if key != "traceEvents"}
    result["traceEvents"] = kept
    return result


def main(out_folder: str) -> None:
    out = Path(out_folder)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for name, dataset in (("input-heavy", HeavySamples()), ("loader-keeps-up", LightSamples())):
        with tempfile.TemporaryDirectory() as folder:
            raw = profile_run(dataset, Path(folder))
            opener = gzip.open if raw.name.endswith(".gz") else open
            with opener(raw, "rt", encoding="utf-8") as file:
                trace = json.load(file)
        target = out / f"cpu-{name}-num_workers0.pt.trace.json.gz"
        with gzip.open(target, "wt", encoding="utf-8") as file:
            json.dump(trimmed(trace), file, separators=(",", ":"))
        print(f"wrote {target} ({target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/engine/data")
