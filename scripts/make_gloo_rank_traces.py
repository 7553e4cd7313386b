"""Take real two-rank traces of a data-parallel job on the CPU (gloo), for `workbench trace FOLDER`.

    python scripts/make_gloo_rank_traces.py OUT_FOLDER [--only CASE ...] [--extra-sort N]

Each case is a plain PyTorch loop, nothing of the workbench in it (it stands for a user's own DDP script): two
processes (``torch.multiprocessing.spawn``) join a gloo process group on 127.0.0.1, wrap a small MLP in
``DistributedDataParallel`` and train it with SGD on random CPU batches, profiled as a user would
(``ProfilerActivity.CPU``, ``schedule(wait=1, warmup=1, active=3)``, ``tensorboard_trace_handler`` with
``use_gzip=True``, ``profiler.step()`` each step). The profiler writes Kineto's ``distributedInfo`` (backend, rank,
world size) in each file's head, as torch.distributed is initialised. One folder per case:

| case | what the job does | what `workbench trace` should say |
| --- | --- | --- |
| gloo-balanced | both ranks the same work; files named rank0.…, rank1.… (``worker_name``) | ranks 0 and 1, no straggler |
| gloo-straggler | rank 1 sorts N random floats (``torch.sort``, host work) before each backward: rank 0 waits for it in DDP's gloo all-reduce | rank 1 named, by rank 0's wait in the collective |
| gloo-unnamed | as balanced, files under the handler's default names (<host>_<pid>.<time>…): only distributedInfo says the rank | ranks 0 and 1, from distributedInfo |
| gloo-cut | as balanced, then rank 1's file cut to half its bytes (a truncated gzip, as a crashed job leaves) | rank 0 read; rank 1's file left out, a note says why |

The trace files are written as the profiler writes them (no trimming: each is a few tens of KB gzipped). A run
takes a few seconds per case. Re-running writes new files with other timestamps and other step times (a loaded
machine's steps vary), so the tests on the kept folders check what must hold, not the figures to the digit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

WAIT, WARMUP, ACTIVE = 1, 1, 3
STEPS = WAIT + WARMUP + ACTIVE
WORLD = 2
EXTRA_SORT = 1_000_000  # floats rank 1 sorts before each backward in gloo-straggler (about 0.1 s on one core)
CASES = ("gloo-balanced", "gloo-straggler", "gloo-unnamed", "gloo-cut")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rank_main(rank: int, port: int, out: str, named: bool, extra_sort: int) -> None:
    """One rank of the job: the user's DDP loop under the profiler."""
    torch.set_num_threads(1)  # two processes on a small machine: one intra-op thread each
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    try:
        model = DistributedDataParallel(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                                                      nn.ReLU(), nn.Linear(1024, 10)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        inputs, labels = torch.randn(64, 256), torch.randint(0, 10, (64,))
        handler = (tensorboard_trace_handler(out, worker_name=f"rank{rank}", use_gzip=True) if named
                   else tensorboard_trace_handler(out, use_gzip=True))
        with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE,
                                                                            repeat=1),
                     on_trace_ready=handler, record_shapes=False) as profiler:
            for _ in range(STEPS):
                loss = nn.functional.cross_entropy(model(inputs), labels)
                optimizer.zero_grad(set_to_none=True)
                if rank == 1 and extra_sort:
                    torch.rand(extra_sort).sort()  # the straggler's own host work, before its all-reduce
                loss.backward()  # DDP all-reduces the gradients over gloo here, waiting for the other rank
                optimizer.step()
                profiler.step()
    finally:
        dist.destroy_process_group()


def run_job(out: Path, named: bool, extra_sort: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    mp.spawn(rank_main, args=(free_port(), str(out), named, extra_sort), nprocs=WORLD, join=True)


def cut_in_half(file: Path) -> None:
    """The file's first half of its bytes only: a gzip stream that ends mid-way, as a killed writer leaves it."""
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def make(case: str, out: Path, extra_sort: int) -> None:
    folder = out / case
    if folder.exists():
        shutil.rmtree(folder)
    if case == "gloo-cut":
        with tempfile.TemporaryDirectory() as scratch:
            run_job(Path(scratch), named=True, extra_sort=0)
            shutil.copytree(scratch, folder)
        (rank1,) = folder.glob("rank1.*")
        cut_in_half(rank1)
    else:
        run_job(folder, named=case != "gloo-unnamed", extra_sort=extra_sort if case == "gloo-straggler" else 0)
    for file in sorted(folder.iterdir()):
        print(f"{file}: {file.stat().st_size:,} bytes")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to write one folder per case in")
    parser.add_argument("--only", nargs="+", choices=CASES, help="these cases only")
    parser.add_argument("--extra-sort", type=int, default=EXTRA_SORT,
                        help=f"floats rank 1 sorts each step in gloo-straggler (default {EXTRA_SORT:,})")
    args = parser.parse_args(argv)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # localhost only: no other interface is needed or reached
    for case in args.only or CASES:
        make(case, args.out, args.extra_sort)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
