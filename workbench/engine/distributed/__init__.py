"""Data-parallel runs over several processes with PyTorch's own engine (torch.distributed, DDP).

- world.py      where a process stands (rank, world size, backend), torchrun's environment; no torch
- launcher.py   devices > 1: spawn the ranks here, merge their events into one run's (the parent)
- launched.py   under torchrun: every process is a rank; rank 0 gathers the figures and reports
- rank.py       one rank: join the process group, DDP, the agreed stop, the spawned rank's entry
- aggregate.py  the ranks' events → one run's events (pure Python)
"""

from __future__ import annotations

from typing import Any


def run_distributed(*args: Any, **kwargs: Any) -> Any:
    from workbench.engine.distributed.launcher import run_distributed as run

    return run(*args, **kwargs)
