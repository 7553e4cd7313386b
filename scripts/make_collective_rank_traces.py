"""Take real two-rank traces of jobs that spread training without DDP, on the CPU (gloo), for `workbench trace FOLDER`.

    python scripts/make_collective_rank_traces.py OUT_FOLDER [--only CASE ...] [--extra-sort N]

As scripts/make_gloo_rank_traces.py (whose set-up this reuses: two processes by ``torch.multiprocessing.spawn``, a
gloo process group on 127.0.0.1, ``ProfilerActivity.CPU``, ``schedule(wait=1, warmup=1, active=3)``,
``tensorboard_trace_handler(worker_name=f"rank{rank}", use_gzip=True)``, ``profiler.step()`` each step), but each
job spreads its model another way than DistributedDataParallel. One folder per case:

| case | what the job does | what `workbench trace` should say |
| --- | --- | --- |
| fsdp-balanced | FSDP2 (``fully_shard`` on each Linear and the whole model, a CPU device mesh): all_gather of the parameters before forward and backward, reduce_scatter of the gradients | ranks 0 and 1, no straggler |
| fsdp-straggler | as fsdp-balanced, rank 1 sorts N random floats before each backward | rank 1 named, by rank 0's wait in FSDP's collectives |
| by-hand-balanced | no wrapper: the user's loop broadcasts a flag from rank 0, all-reduces each gradient itself (``dist.all_reduce``) and ends each step in ``dist.barrier()`` | ranks 0 and 1, no straggler |
| by-hand-straggler | as by-hand-balanced, rank 1 sorts N random floats after its all-reduces, before the barrier | rank 1 named, by rank 0's wait in the barrier |

The trace files are written as the profiler writes them. A run takes a few seconds per case; re-running writes new
files with other timestamps and other step times, so the tests on the kept folders check what must hold.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_gloo_rank_traces import ACTIVE, STEPS, WAIT, WARMUP, WORLD, free_port  # noqa: E402

EXTRA_SORT = 1_000_000  # floats rank 1 sorts each step in the straggler cases (about 0.1 s on one core)
CASES = ("fsdp-balanced", "fsdp-straggler", "by-hand-balanced", "by-hand-straggler")


def small_mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


def fully_sharded(model: nn.Sequential) -> nn.Module:
    """FSDP2 as its docs show it: each Linear its own unit, then the root; on a CPU mesh, which gloo serves."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (WORLD,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def all_reduce_gradients(model: nn.Module) -> None:
    """What a user's loop does in place of DDP: every gradient summed over the ranks, then averaged."""
    for parameter in model.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad)
            parameter.grad /= WORLD


def rank_main(rank: int, port: int, out: str, case: str, extra_sort: int) -> None:
    """One rank of the job under the profiler."""
    torch.set_num_threads(1)  # two processes on a small machine: one intra-op thread each
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    try:
        fsdp = case.startswith("fsdp")
        model = fully_sharded(small_mlp()) if fsdp else small_mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        inputs, labels = torch.randn(64, 256), torch.randint(0, 10, (64,))
        straggles = rank == 1 and case.endswith("straggler") and extra_sort > 0
        keep_going = torch.ones(1)
        with profile(activities=[ProfilerActivity.CPU],
                     schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                     on_trace_ready=tensorboard_trace_handler(out, worker_name=f"rank{rank}", use_gzip=True),
                     record_shapes=False) as profiler:
            for _ in range(STEPS):
                if not fsdp:
                    dist.broadcast(keep_going, src=0)  # rank 0 says whether to go on, as a user's loop may
                loss = nn.functional.cross_entropy(model(inputs), labels)
                optimizer.zero_grad(set_to_none=True)
                if straggles and fsdp:
                    torch.rand(extra_sort).sort()  # the straggler's own host work, before FSDP's collectives
                loss.backward()  # FSDP all-gathers the parameters again and reduce-scatters the gradients here
                if not fsdp:
                    all_reduce_gradients(model)
                    if straggles:
                        torch.rand(extra_sort).sort()  # after its all-reduces: the other rank waits in the barrier
                    dist.barrier()
                optimizer.step()
                profiler.step()
    finally:
        dist.destroy_process_group()


def make(case: str, out: Path, extra_sort: int) -> None:
    folder = out / case
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    mp.spawn(rank_main, args=(free_port(), str(folder), case, extra_sort), nprocs=WORLD, join=True)
    for file in sorted(folder.iterdir()):
        print(f"{file}: {file.stat().st_size:,} bytes")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to write one folder per case in")
    parser.add_argument("--only", nargs="+", choices=CASES, help="these cases only")
    parser.add_argument("--extra-sort", type=int, default=EXTRA_SORT,
                        help=f"floats rank 1 sorts each step in the straggler cases (default {EXTRA_SORT:,})")
    args = parser.parse_args(argv)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # localhost only: no other interface is needed or reached
    for case in args.only or CASES:
        make(case, args.out, args.extra_sort)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
