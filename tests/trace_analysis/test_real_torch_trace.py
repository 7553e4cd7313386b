"""A trace torch.profiler writes on this CPU, read back: the DataLoader's share of the step as the TensorBoard
plugin read it, for an input-heavy loader with num_workers=0 and for one that keeps up."""

from __future__ import annotations

import time

import pytest

from workbench.trace_analysis import read_report

pytestmark = pytest.mark.slow  # imports torch and runs a profiled loop


def profiled_loop(tmp_path, load_seconds: float, name: str, active: int = 4, repeat: int = 1):
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
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=active, repeat=repeat),
                 on_trace_ready=tensorboard_trace_handler(str(folder)), record_shapes=False) as profiler:
        for step, (images, labels) in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            profiler.step()
            if step >= (2 + active) * repeat:
                break
    traces = sorted(folder.glob("*.pt.trace.json*"))
    assert len(traces) == repeat  # one file per cycle of the schedule
    return traces[0] if repeat == 1 else folder


def test_the_dataloaders_time_is_read_as_the_tensorboard_plugin_read_it(tmp_path):
    """No wall-clock bound: the slow loader sleeps 10 ms an image, 4 images a batch, so its 4 profiled steps hold at
    least 160 ms inside enumerate(DataLoader)#…__next__ however loaded the machine; a loader that does not sleep
    holds far less (9 ms with the slow tier's other process beside it). Their shares of the step are not compared:
    on a loaded machine the tiny model's step stretches while a sleep does not, and the two shares crossed (0.75
    against 0.72)."""
    (slow,) = read_report(profiled_loop(tmp_path, load_seconds=0.01, name="slow")).ranks
    (fast,) = read_report(profiled_loop(tmp_path, load_seconds=0.0, name="fast")).ranks
    assert slow.steps == fast.steps == 4
    assert slow.data_wait_seconds >= 4 * 4 * 0.01
    assert slow.dataloader_share == pytest.approx(slow.data_wait_seconds / slow.window_seconds)
    assert fast.data_wait_seconds < slow.data_wait_seconds
    assert fast.dataloader_share == pytest.approx(fast.data_wait_seconds / fast.window_seconds)
    assert slow.cpu_only and slow.idle_share is None and any("CPU-only" in note for note in slow.notes)


# torch warns, once a schedule repeats, that its in-memory events (prof.events()) keep only the last cycle: the
# files, one per cycle, are what is read here.
@pytest.mark.filterwarnings("ignore:Warning. Profiler clears events at the end of each cycle:UserWarning")
def test_one_processs_cycles_written_by_torch_read_as_one_rank(tmp_path):
    """repeat=2: torch's tensorboard_trace_handler writes two files, <host>_<pid>.<time_ns>.pt.trace.json, in the
    folder: one process's two cycles, not ranks 0 and 1 of a job."""
    report = read_report(profiled_loop(tmp_path, load_seconds=0.0, name="cycles", active=3, repeat=2))
    assert [(rank.rank, rank.steps) for rank in report.ranks] == [(0, 3), (0, 3)]
    assert any("2 files, one process's profiling cycles" in note for note in report.notes), report.notes
