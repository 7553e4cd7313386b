"""benchmarks/ddp_ops.py's "DDP as the workbench wraps it" row wraps the model in DDP (issue 31 item 11)."""

import torch
from ddp_ops import one_process_world

from workbench.engine.distributed import rank


def test_the_one_process_world_wraps_the_model_as_the_workbench_does(tmp_path, monkeypatch):
    world = one_process_world(str(tmp_path))
    assert world.world_size == 1 and world.wraps_model
    wrapped = []  # DDP faked: a group of one is not started here
    monkeypatch.setattr(rank, "DistributedDataParallel", lambda model, **options: wrapped.append(options) or model)
    rank.RankWorld(world).wrap_model(torch.nn.Linear(2, 2), torch.device("cpu"))
    assert len(wrapped) == 1 and wrapped[0]["gradient_as_bucket_view"] is True
