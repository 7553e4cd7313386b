"""On a CUDA GPU (skipped elsewhere): the max-batch search against real out-of-memory errors.

    pytest -m gpu tests/experiments/test_gpu_sequences.py
"""

import pytest

from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.experiments.events import BatchTrial
from workbench.experiments.max_batch import BATCH_GRANULE, MaxBatchPlan, run_max_batch

GIB = 2**30


@pytest.fixture
def small_gpu():
    """This process may use 4 GiB of the GPU: real CUDA out-of-memory errors come at small batches."""
    import torch

    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(4 * GIB / total)
    yield
    torch.cuda.set_per_process_memory_fraction(1.0)
    torch.cuda.empty_cache()


@pytest.mark.gpu
def test_max_batch_finds_the_limit_from_real_out_of_memory_errors_and_frees_each(small_gpu):
    import torch

    base = RunConfig(model="resnet18", dataset="synthetic", synthetic_size=4096, batch_size=256, device="cuda",
                     num_workers=0, pipeline="gpu-resident", augment="gpu")
    reserved_before_trials = []
    events = []
    for event in run_max_batch(MaxBatchPlan(base, steps_per_trial=3), lambda: False):
        events.append(event)
        if isinstance(event, BatchTrial):
            reserved_before_trials.append(torch.cuda.memory_reserved())
    ended = events[-1]
    result = ended.result
    assert ended.status == "finished" and result.limited_by == "memory", ended.reason
    failures = [trial for trial in result.trials if not trial.fits]
    assert failures and all(trial.reason == "CUDA out of memory" for trial in failures)
    assert any(isinstance(e, RunEnded) and e.kind == "out_of_memory" for e in events)
    best = result.max_batch_size
    # The bisection stops on multiples of BATCH_GRANULE: the next one above the largest that fits ran out of memory
    assert best is not None and best + BATCH_GRANULE in {trial.batch_size for trial in failures}
    assert result.best.peak_allocated_bytes <= 4 * GIB and result.best.images_per_sec > 0
    # After the search the cache is given back: what stays reserved is torch's own bookkeeping, not a trial's.
    assert torch.cuda.memory_allocated() < 64 * 2**20
    assert torch.cuda.memory_reserved() < 256 * 2**20


@pytest.mark.gpu
def test_max_batch_with_a_memory_budget_stays_under_it():
    base = RunConfig(model="small-cnn", dataset="synthetic", synthetic_size=4096, batch_size=512, device="cuda",
                     num_workers=0, pipeline="gpu-resident", augment="gpu")
    ended = list(run_max_batch(MaxBatchPlan(base, memory_budget_bytes=GIB // 2, steps_per_trial=3), lambda: False))[-1]
    result = ended.result
    assert ended.status == "finished" and result.limited_by in ("memory budget", "largest batch setting")
    assert result.best.peak_reserved_bytes <= GIB // 2
