"""The pieces of a data-parallel run that need no second process: settings, torchrun's environment,
each rank's share of the data, no_sync in accumulation, and merging the ranks' events."""

from __future__ import annotations

import contextlib
import dataclasses
import traceback
import warnings

import pytest
import torch
from engine_helpers import as_torchrun_rank, tiny_config
from torch import nn

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo
from workbench.engine.data import LoaderBatches, ResidentBatches, load_arrays
from workbench.engine.distributed.aggregate import RankEventMerger, combine_epochs, highest_memory
from workbench.engine.distributed.world import launched_world, world_size_for
from workbench.engine.events import EpochStats, MemorySnapshot, RunStarted, StatusChanged, StepStats
from workbench.engine.models import build_model
from workbench.engine.summary import SummaryBuilder
from workbench.engine.train_step import TrainStep

CPU = DeviceInfo(type="cpu", name="cpu", cuda_available=False, cpu_count=2, distributed_backends=("gloo",))
TWO_GPUS = DeviceInfo(type="cuda", name="H100", cuda_available=True, gpu_count=2,
                      distributed_backends=("nccl", "gloo"), compute_capability="9.0", bf16_supported=True)
NO_DISTRIBUTED = dataclasses.replace(CPU, distributed_backends=())


# -- settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "devices, device, expected",
    [
        (3, TWO_GPUS, "devices=3 but only 2 CUDA GPUs are visible (CUDA_VISIBLE_DEVICES decides which): choose "
                      "devices between 1 and 2, or 0 for every visible GPU"),
        (0, CPU, "devices=0 means every visible GPU, and this run is on the CPU"),
        (2, NO_DISTRIBUTED, "devices=2 needs torch.distributed, which this torch build lacks: use devices=1"),
        (2, dataclasses.replace(CPU, distributed_backends=("nccl",)),
         "devices=2 on the CPU needs the gloo backend, which this torch build lacks: use devices=1"),
        (-1, CPU, "devices must be between 0 and 1024 (got -1)"),
    ],
)
def test_devices_the_machine_cannot_run_are_refused_in_words(devices, device, expected):
    problems = RunConfig(devices=devices).validate(device)
    assert any(problem.startswith(expected) for problem in problems), problems


@pytest.mark.parametrize("devices, device", [(2, CPU), (2, TWO_GPUS), (0, TWO_GPUS), (1, NO_DISTRIBUTED)])
def test_devices_the_machine_can_run_are_valid(devices, device):
    assert RunConfig(devices=devices).validate(device) == []


def test_gpu_checks_follow_the_device_setting():
    assert RunConfig(devices=2, device="cpu").validate(TWO_GPUS) == []  # two CPU processes, gloo
    assert RunConfig(devices=0, device="cpu").validate(TWO_GPUS)  # "every GPU" but the run is on the CPU


def test_effective_batch_counts_devices_and_accumulation():
    assert RunConfig(batch_size=64, devices=2, accumulation_steps=4).effective_batch_size == 512
    assert RunConfig(devices=0).effective_batch_size is None  # known only when the run sees the GPUs
    assert world_size_for(RunConfig(devices=0), TWO_GPUS) == 2
    assert world_size_for(RunConfig(devices=0), CPU) == 1


def test_a_batch_bigger_than_each_processes_share_is_a_data_problem():
    from workbench.data_check import data_problems

    assert data_problems(RunConfig(synthetic_size=100, batch_size=64, devices=2)) == [
        "batch_size 64 × devices 2 is larger than the training set (100 images): each process takes "
        "batch_size images per step"]
    assert data_problems(RunConfig(synthetic_size=128, batch_size=64, devices=2)) == []


def test_torchruns_environment_names_the_rank():
    assert launched_world({}) is None
    assert launched_world({"RANK": "1", "WORLD_SIZE": "2"}) is None  # LOCAL_RANK missing: not a launcher
    world = launched_world({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert (world.rank, world.world_size, world.local_rank, world.local_world_size) == (3, 4, 1, 2)
    assert world.init_method == "env://"


# -- each rank's share ---------------------------------------------------------------------------


def epoch_labels(batches) -> list[list[int]]:
    return [labels.tolist() for _, labels in batches.epoch()]


def labelled_arrays(config):
    """The synthetic set with each image's index as its label, so batches show which images they hold."""
    arrays = load_arrays(config)
    return dataclasses.replace(arrays, train_labels=torch.arange(len(arrays.train_labels)))


@pytest.mark.parametrize("pipeline", ["dataloader", "gpu-resident"])
def test_the_ranks_shares_are_disjoint_and_reshuffled_each_epoch(pipeline):
    config = tiny_config(synthetic_size=100, batch_size=8, pipeline=pipeline)
    arrays = labelled_arrays(config)

    def batches(shard):
        if pipeline == "dataloader":
            return LoaderBatches(arrays, config, pin_memory=False, shard=shard)
        return ResidentBatches(arrays, config, torch.device("cpu"), shard)

    ranks = [batches((rank, 2)) for rank in (0, 1)]
    assert [rank.steps_per_epoch for rank in ranks] == [6, 6]  # 100 // 2 // 8
    first = [epoch_labels(rank) for rank in ranks]
    seen = [index for epoch in first for batch in epoch for index in batch]
    assert len(seen) == len(set(seen)) == 96
    second = [epoch_labels(rank) for rank in ranks]
    assert second != first  # set_epoch / a fresh permutation: a new order every epoch


def test_gpu_resident_shards_together_are_one_processes_batches():
    config = tiny_config(synthetic_size=100, batch_size=8, pipeline="gpu-resident")
    arrays = labelled_arrays(config)
    whole = epoch_labels(ResidentBatches(arrays, config.replace(batch_size=16), torch.device("cpu")))
    halves = [epoch_labels(ResidentBatches(arrays, config, torch.device("cpu"), (rank, 2))) for rank in (0, 1)]
    for step, batch in enumerate(whole):
        assert sorted(batch) == sorted(halves[0][step] + halves[1][step])


# -- no_sync ---------------------------------------------------------------------------------------


def test_micro_batches_that_do_not_step_skip_the_gradient_all_reduce():
    entered = []

    @contextlib.contextmanager
    def no_sync():
        entered.append(True)
        yield

    model = nn.Linear(4, 2)
    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), "cpu",
                     accumulation_steps=4, no_sync=no_sync)
    for _ in range(8):
        step(torch.randn(3, 4), torch.tensor([0, 1, 0]))
    assert len(entered) == 6 and step.optimizer_steps == 2  # 3 of every 4; the 4th all-reduces and steps


def test_the_group_norm_small_cnn_has_no_batch_norm():
    model = build_model("small-cnn-gn", 10)
    assert not any(isinstance(module, nn.modules.batchnorm._BatchNorm) for module in model.modules())
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    one, batch = model(torch.ones(1, 3, 32, 32)), model(torch.cat([torch.ones(1, 3, 32, 32), torch.randn(5, 3, 32, 32)]))
    torch.testing.assert_close(batch[:1], one)  # an image's output does not depend on the rest of its batch


# -- merging the ranks' events ---------------------------------------------------------------------


def memory(allocated=None, peak=None) -> MemorySnapshot:
    return MemorySnapshot(torch_allocated=allocated, torch_peak_allocated=peak, nvml_unavailable_reason="test")


def window(step, samples_seen, seconds, wait=0.0, loss=1.0, mem=MemorySnapshot()) -> StepStats:
    return StepStats(step=step, total_steps=10, epoch=1, epochs=1, samples_seen=samples_seen, loss=loss, lr=0.1,
                     images_per_sec=32 / seconds, data_wait_seconds=wait, device_span_seconds=seconds - wait,
                     window_seconds=seconds, elapsed_seconds=seconds * step, memory=mem)


def epoch_stats(train_loss, rate, seconds, test_accuracy, mem=MemorySnapshot()) -> EpochStats:
    return EpochStats(epoch=1, epochs=1, step=2, train_loss=train_loss, train_accuracy=0.5, test_loss=1.0,
                      test_accuracy=test_accuracy, images_per_sec=rate, data_wait_fraction=0.1,
                      train_seconds=seconds, eval_seconds=0.5, memory=mem)


def started() -> RunStarted:
    return RunStarted(config=RunConfig(devices=2), device=CPU, dataset_name="synthetic", train_size=100, test_size=20,
                      num_classes=10, steps_per_epoch=2, total_steps=2, parameter_count=1, started_at=0.0,
                      world_size=2)


def test_windows_leave_in_rank_0s_order_once_every_rank_has_sent_its_own():
    merger = RankEventMerger(2)
    assert merger.add(0, StatusChanged(message="Loading…")) == [StatusChanged(message="Loading…")]
    assert merger.add(1, StatusChanged(message="Loading…")) == []  # other ranks' status lines are not the run's
    assert merger.add(0, started()) == [started()]
    assert merger.add(1, started()) == []
    assert merger.add(0, window(1, 32, 1.0, wait=0.2, mem=memory(100, 150))) == []  # rank 1's is still to come
    assert merger.add(0, StatusChanged(message="Evaluating…")) == []  # waits behind the window before it
    released = merger.add(1, window(1, 32, 2.0, wait=0.5, loss=3.0, mem=memory(300, 120)))
    merged, status = released
    assert status == StatusChanged(message="Evaluating…")
    assert merged.samples_seen == 64 and merged.window_seconds == 2.0 and merged.images_per_sec == 32.0
    assert merged.loss == 2.0 and merged.data_wait_seconds == 0.5
    assert (merged.memory.torch_allocated, merged.memory.torch_peak_allocated) == (300, 150)  # each the highest
    assert [(rank.rank, rank.samples, rank.memory.torch_allocated) for rank in merged.ranks] == [(0, 32, 100), (1, 32, 300)]
    # The next window counts only its own samples per rank.
    merger.add(1, window(2, 64, 1.0))
    (second,) = merger.add(0, window(2, 64, 1.0))
    assert [rank.samples for rank in second.ranks] == [32, 32] and second.samples_seen == 128


def test_a_merged_epoch_has_rank_0s_test_figures_and_every_ranks_training():
    merged = combine_epochs([epoch_stats(1.0, 100.0, 2.0, 0.7, memory(5, 9)),
                             epoch_stats(3.0, 50.0, 4.0, float("nan"), memory(7, 8))])
    assert merged.test_accuracy == 0.7 and merged.train_loss == 2.0
    assert merged.images_per_sec == pytest.approx((200 + 200) / 4.0) and merged.train_seconds == 4.0
    assert [snapshot.torch_allocated for snapshot in merged.rank_memory] == [5, 7]


def test_highest_memory_takes_every_figure_from_the_rank_highest_in_it():
    merged = highest_memory([MemorySnapshot(process_rss=5, nvml_device_used=9), MemorySnapshot(process_rss=7, nvml_device_used=8)])
    assert (merged.process_rss, merged.nvml_device_used) == (7, 9)


def test_highest_memory_keeps_unreadable_figures_none():
    merged = highest_memory([MemorySnapshot(nvml_unavailable_reason="CPU"), MemorySnapshot()])
    assert merged.torch_allocated is None and merged.nvml_unavailable_reason == "CPU"


def test_the_summary_keeps_each_ranks_peaks_and_the_world_size():
    builder = SummaryBuilder()
    builder.add(started())
    merger = RankEventMerger(2)
    merger.add(0, window(1, 32, 1.0, mem=memory(100, 150)))
    for event in merger.add(1, window(1, 32, 1.0, mem=memory(300, 320))):
        builder.add(event)
    summary = builder.build("finished")
    assert summary.world_size == 2
    assert summary.rank_peak_allocated_bytes == (150, 320) and summary.peak_allocated_bytes == 320
    assert summary.rank_peak_reserved_bytes == (None, None)


# -- the command line ------------------------------------------------------------------------------


def test_under_torchrun_devices_may_only_repeat_torchruns_process_count(monkeypatch, capsys):
    from workbench.cli import main

    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    assert main(["run", "--device", "cpu", "--devices", "4", "--no-history"]) == 2
    assert capsys.readouterr().err.strip() == (
        "workbench run: --devices 4 under torchrun, which started 2 processes: drop --devices "
        "(torchrun's --nproc-per-node and --nnodes decide)")


def test_the_json_summary_of_one_process_says_world_size_1(capsys):
    import json

    from workbench.cli import main

    assert main(["run", "--synthetic-size", "64", "--batch-size", "32", "--max-steps", "2", "--device", "cpu",
                 "--num-workers", "0", "--no-history", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["world_size"] == 1 and summary["rank_peak_memory_bytes"] == []
    assert summary["config"]["devices"] == 1


# -- one process --------------------------------------------------------------------------------------


def test_a_one_process_world_trains_the_bare_model():
    from workbench.engine.distributed.rank import RankWorld
    from workbench.engine.distributed.world import World, distributed_notes

    model = nn.Linear(2, 2)
    assert RankWorld(World(0, 1, 0, "gloo", "env://")).wrap_model(model, torch.device("cpu")) is model
    assert World(0, 1, 0, "gloo", "env://", wrap_one_process=True).wraps_model  # the benchmark's switch
    assert World(0, 2, 0, "gloo", "env://").wraps_model
    assert distributed_notes(RunConfig(), CPU, 1, "gloo", wraps_model=False) == [
        "1 process (gloo): trained without DistributedDataParallel, since one process has no gradients to average"]


@pytest.mark.slow
def test_torchrun_with_one_process_trains_without_the_ddp_wrapper(monkeypatch):
    from workbench.engine.distributed import rank
    from workbench.engine.distributed.launched import run_launched

    def no_ddp(*args, **kwargs):
        raise AssertionError("one process was wrapped in DistributedDataParallel")

    monkeypatch.setattr(rank, "DistributedDataParallel", no_ddp)
    as_torchrun_rank(monkeypatch, 0, 1)
    world = launched_world()
    events = list(run_launched(tiny_config(max_steps=4, log_every=2), lambda: False, world))
    ended = events[-1]
    assert ended.status == "finished", ended.reason
    started = next(event for event in events if isinstance(event, RunStarted))
    assert any("trained without DistributedDataParallel" in note for note in started.notes)


@pytest.mark.parametrize("spec", ["googlenet", "inception_v3"])
def test_models_with_auxiliary_heads_are_built_without_them(spec):
    """issue 31 item 9: the heads' outputs are left out of the loss, so they would get no gradient."""
    with warnings.catch_warnings():  # (without the fix, torchvision's warning about init_weights came first)
        warnings.simplefilter("ignore", FutureWarning)
        model = build_model(spec, 10, 75)
    assert model.aux_logits is False
    from workbench.engine.models import has_unused_parameters

    assert not has_unused_parameters(model)
    kept = build_model(spec, 10, 75, model_kwargs='{"aux_logits": true}')  # asked for: kept, and DDP told
    assert kept.aux_logits is True and has_unused_parameters(kept)


def test_ddp_trains_a_model_whose_aux_heads_were_asked_for_past_step_2(tmp_path):
    """One gloo process with DDP as the workbench wraps it (RankWorld.wrap_model): without find_unused_parameters
    the second step raises "Expected to have finished reduction in the prior iteration"."""
    import torch.distributed as dist

    from workbench.engine.distributed.rank import RankWorld
    from workbench.engine.distributed.world import World
    from workbench.engine.models import main_output

    world = World(rank=0, world_size=1, local_rank=0, backend="gloo",
                  init_method=f"file://{tmp_path / 'rendezvous'}", wrap_one_process=True)
    dist.init_process_group(backend="gloo", init_method=world.init_method, rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = build_model("googlenet", 10, 32, model_kwargs='{"aux_logits": true, "init_weights": true}')
        wrapped = RankWorld(world).wrap_model(model, torch.device("cpu"))
        optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.01)
        for _ in range(3):
            loss = nn.functional.cross_entropy(main_output(wrapped(torch.randn(2, 3, 32, 32))), torch.tensor([1, 2]))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    finally:
        dist.destroy_process_group()


def test_a_torchrun_rank_that_lost_its_peer_says_so_in_words(monkeypatch):
    """gloo's own line ("[/__w/pytorch/…/pair.cc:545] Read error …: Connection reset by peer") was the run's
    reason; torchrun's ranks are processes apart, so the one that went away says why in its own output."""
    from workbench.engine.distributed import launched
    from workbench.engine.distributed.world import World
    from workbench.engine.events import RunEnded
    from workbench.engine.run_summary import RunSummary

    raw = ("RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error "
           "[127.0.0.1]:58078: Connection reset by peer")

    class LostPeer:
        def __init__(self, *args):
            pass

        def events(self):
            yield RunEnded(status="failed", summary=RunSummary(status="failed", reason=raw), reason=raw, kind="error")

    monkeypatch.setattr(launched, "RankRun", LostPeer)
    world = World(rank=0, world_size=2, local_rank=0, backend="gloo", init_method="env://")
    (ended,) = launched.run_launched(tiny_config(), lambda: False, world)
    assert ended.status == "failed" and ended.reason.startswith("another process of the run went away mid-step")
    assert ended.reason.endswith("Connection reset by peer)") and ended.summary.reason == ended.reason


# -- joining the other processes -----------------------------------------------------------------


def test_a_stop_ends_the_wait_for_the_others_to_join_and_the_wait_is_named(monkeypatch):
    """init_process_group (here a fake that returns once released) waits for every rank; it runs on a helper
    thread, so a stop ends the wait. A long wait says whom it waits for, once."""
    import threading

    from workbench.engine.distributed import rank
    from workbench.engine.distributed.world import World
    from workbench.engine.requests import StopRequest

    released = threading.Event()
    monkeypatch.setattr(rank, "join_world", lambda world: released.wait(60.0))
    monkeypatch.setattr(rank, "SAY_WAITING_AFTER_S", 0.1)
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.7")
    monkeypatch.setenv("MASTER_PORT", "29500")
    stop = StopRequest()
    joining = rank.join_world_interruptibly(World(0, 4, 0, "gloo", "env://"), stop)
    try:
        said = next(joining)
        assert isinstance(said, StatusChanged) and said.lasting
        assert said.message == "waiting for ranks 1–3 to join the run (4 processes, meeting at 10.0.0.7:29500)…"
        stop.set("SIGTERM")
        with pytest.raises(rank.JoinStopped, match=r"^stopped by SIGTERM while waiting for ranks 1–3 to join the run "
                                                   r"\(4 processes, meeting at 10\.0\.0\.7:29500\), after \d+ s$"):
            next(joining)
    finally:
        released.set()  # the abandoned join ends


def test_a_join_that_completes_just_after_the_stop_is_used(monkeypatch):
    """Every rank gets a terminal's Ctrl-C at once; a rank whose join completed goes on to the agreed stop, which
    needs the others: a join that completes within JOIN_SETTLE_S of the stop is kept, not abandoned."""
    import time

    from workbench.engine.distributed import rank
    from workbench.engine.distributed.world import World
    from workbench.engine.requests import StopRequest

    stop = StopRequest()
    joined = object()

    def join_as_the_stop_comes(world):
        stop.set()
        time.sleep(0.2)
        return joined

    monkeypatch.setattr(rank, "join_world", join_as_the_stop_comes)
    with pytest.raises(StopIteration) as done:  # joined without a word: it took under SAY_WAITING_AFTER_S
        next(rank.join_world_interruptibly(World(1, 2, 1, "gloo", "file:///store"), stop))
    assert done.value.value is joined


def test_the_ranks_a_joining_rank_waits_for_in_words():
    from workbench.engine.distributed.rank import waited_for
    from workbench.engine.distributed.world import World

    assert waited_for(World(1, 2, 1, "gloo", "file:///store")) == "rank 0 to join the run (2 processes)"
    assert waited_for(World(3, 4, 1, "gloo", "file:///store")) == "ranks 0–2 to join the run (4 processes)"
    assert waited_for(World(1, 4, 1, "gloo", "file:///store")) == "the other 3 ranks to join the run (4 processes)"


def test_the_helper_thread_joins_on_the_ranks_gpu(monkeypatch):
    """CUDA's current device is each thread's own (a new thread's is GPU 0): the thread that joins takes the rank's
    GPU before NCCL binds its communicator to the current one. A fake CUDA keeps the device per thread here."""
    import threading

    from workbench.engine.distributed import rank
    from workbench.engine.distributed.world import World
    from workbench.engine.requests import never

    current = threading.local()
    monkeypatch.setattr(torch.cuda, "current_device", lambda: getattr(current, "gpu", 0))
    monkeypatch.setattr(torch.cuda, "set_device", lambda gpu: setattr(current, "gpu", gpu))
    monkeypatch.setattr(rank, "join_world", lambda world: torch.cuda.current_device())
    torch.cuda.set_device(3)  # claim_local_gpu, on the rank's own thread
    with pytest.raises(StopIteration) as done:
        next(rank.join_world_interruptibly(World(3, 4, 3, "nccl", "env://"), never))
    assert done.value.value == 3


# -- what a rank leaves behind when it is SIGKILLed ------------------------------------------------


class _RankOneOfTwo:
    """Rank 1 of a two-process run as its session sees it, without a process group (the model left bare)."""

    rank, world_size, local_rank = 1, 2, 1

    def wrap_model(self, model, device):
        return model


def test_the_named_semaphores_a_rank_makes_are_its_dataloaders_own(monkeypatch):
    """After a rank is SIGKILLed, Python's resource tracker (which the launcher's spawned ranks share with it) says
    "There appear to be 11 leaked semaphore objects to clean up at shutdown" as the run's process exits, and unlinks
    them. They are the rank's DataLoader's (its result queue 3, its "workers done" event 5, one index queue per
    worker 3), made inside torch's iterator in the rank, whose finalizers a SIGKILL never runs: nothing of ours
    makes one in a rank (docs/failure-modes.md)."""
    from multiprocessing import resource_tracker

    from workbench.engine.one_process import run_one

    made: list[bool] = []  # per semaphore: whether torch's DataLoader made it
    register = resource_tracker.register

    def noting(name, rtype):
        if rtype == "semaphore":
            made.append(any("torch/utils/data/" in frame.filename for frame in traceback.extract_stack()))
        register(name, rtype)

    monkeypatch.setattr(resource_tracker, "register", noting)
    config = tiny_config(num_workers=0, max_steps=2, evaluate=False)
    ended = list(run_one(config, world=_RankOneOfTwo(), local_stop=lambda: False))[-1]
    assert ended.status == "finished", ended.reason
    # none without workers: with them, every one is torch's (11 with torch 2.14 and one worker: its own affair, so
    # not pinned here)
    assert made == [], made
