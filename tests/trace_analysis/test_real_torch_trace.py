"""A trace torch.profiler writes on this CPU, read back: the DataLoader's share of the step as the TensorBoard
plugin read it. An input-heavy loader with num_workers=0 takes most of the step; one that keeps up, little."""

from __future__ import annotations

import time

import pytest

from workbench.trace_analysis import read_report

pytestmark = pytest.mark.slow  # imports torch and runs a profiled loop


def profiled_loop(tmp_path, load_seconds: float, name: str):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    from torch.utils.data import DataLoader, Dataset

    class SlowImages(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, index):
            time.sleep(load_seconds)  # decoding and augmenting an image on the host
            return torch.randn(3, 32, 32), index % 10

    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(SlowImages(), batch_size=4, num_workers=0)
    folder = tmp_path / name
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=4, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(folder)), record_shapes=False) as profiler:
        for step, (images, labels) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            profiler.step()
            if step >= 6:
                break
    (trace,) = folder.glob("*.pt.trace.json*")
    return trace


def test_an_input_heavy_loader_takes_most_of_the_step_and_the_trace_says_cpu_only(tmp_path):
    (rank,) = read_report(profiled_loop(tmp_path, load_seconds=0.01, name="slow")).ranks
    assert rank.steps == 4
    assert rank.dataloader_share is not None and rank.dataloader_share > 0.5  # 4 × 10 ms of sleep per step
    assert rank.cpu_only and rank.idle_share is None
    assert any("CPU-only" in note for note in rank.notes)


def test_a_loader_that_keeps_up_takes_little_of_the_step(tmp_path):
    (rank,) = read_report(profiled_loop(tmp_path, load_seconds=0.0, name="fast")).ranks
    assert rank.steps == 4
    assert rank.dataloader_share is not None and rank.dataloader_share < 0.5
