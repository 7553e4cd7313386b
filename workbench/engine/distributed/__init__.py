"""Data-parallel runs over several processes with PyTorch's own engine (torch.distributed, DDP).

- world.py      where a process stands (rank, world size, backend), torchrun's environment; no torch
- launcher.py   run_distributed: devices > 1 spawns the ranks here and merges their events into one
                run's (the parent); under torchrun, launched.py
- launched.py   under torchrun: every process is a rank; rank 0 gathers the figures and reports
- rank.py       one rank: join the process group, DDP, the agreed stop, the spawned rank's entry
- aggregate.py  the ranks' events → one run's events (pure Python)
"""
