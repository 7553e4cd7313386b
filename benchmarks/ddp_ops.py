"""What DistributedDataParallel adds to one training step, counted in ops: plain vs DDP's defaults vs the product's.

On a launch-bound GPU step every extra op is an extra kernel launch on the host's critical path (the
devices=1 run through DDP on an H100 reached 0.764 of the plain run: benchmarks/results/
distributed_overhead-h100.json). The count is the same on any machine, so this runs on a CPU: one
process, world size 1 over gloo, resnet18 (or --model), batch 2, torch.profiler around --steps steps.
Counted: leaf ops (no op beneath them) that touch data, i.e. what launches a kernel on a GPU; views,
strides and allocations are left out. Writes benchmarks/results/ddp_ops-<model>.json (or --out).

    python benchmarks/ddp_ops.py
    python benchmarks/ddp_ops.py --model small-cnn
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile

from _common import RESULTS, machine, write_results

from workbench.engine.distributed.rank import join_world, leave_world
from workbench.engine.device import probe_device
from workbench.engine.distributed.world import World
from workbench.engine.models import build_model

# Ops that only describe tensors (no data touched): no kernel on a GPU.
METADATA_OPS = {"aten::view", "aten::as_strided", "aten::empty", "aten::empty_strided", "aten::_reshape_alias",
                "aten::detach", "aten::alias", "aten::resize_", "aten::t", "aten::transpose", "aten::expand"}


def ops_per_step(model: torch.nn.Module, steps: int) -> tuple[float, Counter]:
    images, labels = torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_function = torch.nn.CrossEntropyLoss()

    def step() -> None:
        loss_function(model(images), labels).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):  # DDP rebuilds its buckets after the first step
        step()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(steps):
            step()
    leaves = [event.name for event in profiler.events()
              if (event.name.startswith("aten::") or event.name.startswith("c10d::"))
              and event.name not in METADATA_OPS
              and not any(child.name.startswith("aten::") for child in event.cpu_children)]
    counts = Counter(leaves)
    return sum(counts.values()) / steps, counts


def one_process_world(folder: str) -> World:
    """A world of one gloo process that still wraps the model in DDP: without wrap_one_process, wrap_model leaves a
    lone process's model bare, and "DDP as the workbench wraps it" would measure the plain model."""
    return World(rank=0, world_size=1, local_rank=0, backend="gloo", init_method=f"file://{folder}/rendezvous",
                 wrap_one_process=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    torch.set_num_threads(1)
    folder = tempfile.TemporaryDirectory(prefix="ddp-ops-")
    rank_world = join_world(one_process_world(folder.name))
    device = torch.device("cpu")
    try:
        settings = {
            "plain": lambda: build_model(args.model, 10),
            "DDP defaults": lambda: DistributedDataParallel(build_model(args.model, 10)),
            # What the workbench passed before: buffers broadcast before every forward.
            "DDP, gradient_as_bucket_view": lambda: DistributedDataParallel(build_model(args.model, 10),
                                                                             gradient_as_bucket_view=True),
            "DDP as the workbench wraps it": lambda: rank_world.wrap_model(build_model(args.model, 10), device),
        }
        rows, plain = {}, None
        for name, make in settings.items():
            torch.manual_seed(0)
            per_step, counts = ops_per_step(make(), args.steps)
            plain = plain if plain is not None else counts
            extra = {op: round(count / args.steps, 1) for op, count in (counts - plain).most_common(8)}
            rows[name] = {"ops_per_step": per_step, "extra_over_plain": extra}
    finally:
        leave_world()
        folder.cleanup()

    print(f"\n{args.model}, batch 2, ops per training step that would launch a kernel on a GPU "
          f"(torch {torch.__version__}, world size 1 over gloo)")
    print(f"{'setting':<32}{'ops/step':>10}{'extra':>8}  extra ops")
    base = rows["plain"]["ops_per_step"]
    for name, row in rows.items():
        extra = ", ".join(f"{op} {count:g}" for op, count in row["extra_over_plain"].items())
        print(f"{name:<32}{row['ops_per_step']:>10.0f}{row['ops_per_step'] - base:>8.0f}  {extra}")
    out = args.out or RESULTS / f"ddp_ops-{args.model}.json"
    write_results(out, {"machine": machine(probe_device("cpu")), "model": args.model, "steps": args.steps,
                        "rows": rows})
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
