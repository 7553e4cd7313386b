"""On CUDA: the distributed path with NCCL; on two or more GPUs, a real two-GPU data-parallel run."""

import pytest
import torch
from engine_helpers import run_to_end, tiny_config
from process_tree import descendants, leftovers

from workbench.engine import probe_device
from workbench.engine.distributed.launcher import spawn_run
from workbench.engine.events import RunStarted, StepStats

pytestmark = pytest.mark.gpu


def gpu_config(**changes):
    base = dict(device="cuda", model="resnet18", synthetic_size=2048, batch_size=128, max_steps=12, log_every=4,
                num_workers=2)
    base.update(changes)
    return tiny_config(**base)


def test_one_rank_over_nccl_trains_and_reads_its_gpus_memory():
    before = descendants()
    events = list(spawn_run(gpu_config(), lambda: False, 1))
    ended = events[-1]
    assert ended.status == "finished", ended.reason
    started = next(event for event in events if isinstance(event, RunStarted))
    assert any("1 process (nccl): trained without DistributedDataParallel" in note for note in started.notes)
    for stats in (event for event in events if isinstance(event, StepStats)):
        (rank,) = stats.ranks
        assert 0 < rank.memory.torch_allocated <= rank.memory.nvml_device_used <= rank.memory.nvml_total
    assert ended.summary.world_size == 1 and ended.summary.rank_peak_allocated_bytes[0] > 0
    assert not leftovers(before)


def test_more_devices_than_gpus_is_refused_in_words():
    count = torch.cuda.device_count()
    problems = gpu_config(devices=count + 1).validate(probe_device("cuda"))
    assert any(f"devices={count + 1} but only {count} CUDA GPU" in problem for problem in problems)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_two_gpus_train_data_parallel_with_each_gpus_memory():
    events = run_to_end(gpu_config(devices=2))
    ended = events[-1]
    assert ended.status == "finished", ended.reason
    steps = [event for event in events if isinstance(event, StepStats)]
    assert all(len(stats.ranks) == 2 and stats.ranks[1].memory.torch_allocated > 0 for stats in steps)
    assert len(ended.summary.rank_peak_allocated_bytes) == 2
