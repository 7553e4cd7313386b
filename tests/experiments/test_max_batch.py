"""The max-batch search against a fake memory limit and a fake allocator: exactly the largest batch that
fits, memory released after every failure, refused on a CPU."""

import pytest
from builders import CPU, GPU, FakeAllocator, probe_of, tiny

from workbench.experiments.events import BatchTrial, SequenceEnded
from workbench.experiments.max_batch import MaxBatchPlan, next_batch, run_max_batch

GIB = 2**30


def search(allocator, plan, release=None, stop=lambda: False):
    return list(run_max_batch(plan, stop, run_function=allocator, probe=probe_of(GPU),
                              release=release or allocator.release))


@pytest.mark.parametrize("limit_images", [1, 2, 3, 127, 128, 129, 1000, 4095, 4096, 10_007])
def test_finds_the_largest_multiple_of_64_that_fits_or_the_exact_size_below_64(limit_images):
    allocator = FakeAllocator(limit_bytes=GIB + limit_images * 1000, fixed_bytes=GIB, bytes_per_image=1000)
    events = search(allocator, MaxBatchPlan(tiny(device="auto", batch_size=128)))
    ended = events[-1]
    expected = limit_images if limit_images < 64 else limit_images // 64 * 64
    assert ended.status == "finished" and ended.result.max_batch_size == expected
    assert ended.result.limited_by == "memory"
    trials = {trial.batch_size: trial.fits for trial in ended.result.trials}
    step = 1 if limit_images < 64 else 64
    assert trials[expected] is True and trials[expected + step] is False  # proven on both sides
    best = ended.result.best
    assert best.peak_allocated_bytes == allocator.needed(expected) and best.images_per_sec == 1000.0


def test_memory_is_released_before_every_trial_after_a_failure():
    allocator = FakeAllocator(limit_bytes=GIB + 300 * 1000, fixed_bytes=GIB, bytes_per_image=1000)
    events = search(allocator, MaxBatchPlan(tiny(device="auto", batch_size=64)))
    assert events[-1].result.max_batch_size == 256
    assert sum(not trial.fits for trial in events[-1].result.trials) >= 2
    assert allocator.reserved_at_trial_start == [0] * len(allocator.sizes)
    assert allocator.releases == len(allocator.sizes) + 1  # before each trial, and once at the end
    assert allocator.reserved == 0


def test_without_the_release_the_leaked_cache_would_spoil_the_answer():
    """What the release is for: the fake allocator keeps a failed trial's memory until released."""
    allocator = FakeAllocator(limit_bytes=GIB + 300 * 1000, fixed_bytes=GIB, bytes_per_image=1000)
    events = search(allocator, MaxBatchPlan(tiny(device="auto", batch_size=64)), release=lambda: None)
    assert events[-1].result.max_batch_size != 256


def test_the_search_doubles_then_bisects_on_multiples_of_64():
    allocator = FakeAllocator(limit_bytes=GIB + 300 * 1000, fixed_bytes=GIB, bytes_per_image=1000)
    search(allocator, MaxBatchPlan(tiny(device="auto", batch_size=64)))
    assert allocator.sizes == [64, 128, 256, 512, 384, 320]  # 256 fits and 320 does not: no multiple of 64 between
    assert next_batch(256, None, 1000) == 512 and next_batch(256, 512, 1000) == 384
    assert next_batch(256, 320, 1000) is None and next_batch(1000, None, 1000) is None
    assert next_batch(400, 800, 1000) == 576  # a start off the grid: the midpoint, down to a multiple of 64
    assert next_batch(400, 448, 1000) is None  # no multiple of 64 strictly between
    assert next_batch(0, 32, 1000) == 16 and next_batch(16, 17, 1000) is None  # below 64, size by size


def test_trials_skip_the_evaluation():
    allocator = FakeAllocator(limit_bytes=GIB + 300 * 1000, fixed_bytes=GIB, bytes_per_image=1000)
    search(allocator, MaxBatchPlan(tiny(device="auto", batch_size=64)))
    assert allocator.configs and all(config.evaluate is False for config in allocator.configs)


def test_a_memory_budget_counts_as_the_limit():
    allocator = FakeAllocator(limit_bytes=80 * GIB, fixed_bytes=GIB, bytes_per_image=1000)
    plan = MaxBatchPlan(tiny(device="auto", batch_size=128), memory_budget_bytes=GIB + 5000 * 1000)
    ended = search(allocator, plan)[-1]
    assert ended.result.max_batch_size == 4992 and ended.result.limited_by == "memory budget"
    over = [trial for trial in ended.result.trials if not trial.fits]
    assert over and all(trial.reason.startswith("peak reserved ") and "> budget" in trial.reason for trial in over)


def test_the_training_set_caps_the_batch_of_real_data(tmp_path):
    import numpy as np

    path = tmp_path / "small.npz"
    np.savez(path, train_images=np.zeros((100, 32, 32, 3), np.uint8), train_labels=np.zeros(100, np.uint8),
             test_images=np.zeros((10, 32, 32, 3), np.uint8), test_labels=np.zeros(10, np.uint8))
    allocator = FakeAllocator(limit_bytes=80 * GIB, fixed_bytes=GIB, bytes_per_image=1000)
    ended = search(allocator, MaxBatchPlan(tiny(device="auto", dataset="npz", data_path=str(path), batch_size=32)))[-1]
    assert allocator.sizes == [32, 64, 100]
    assert ended.result.max_batch_size == 100 and ended.result.limited_by == "training set"


def test_synthetic_data_grows_with_the_trial():
    allocator = FakeAllocator(limit_bytes=GIB + 3000 * 1000, fixed_bytes=GIB, bytes_per_image=1000)
    search(allocator, MaxBatchPlan(tiny(device="auto", batch_size=1024, synthetic_size=1024)))
    assert allocator.sizes[:3] == [1024, 2048, 4096]
    assert all(config.synthetic_size == max(1024, config.batch_size) for config in allocator.configs)


def test_refused_on_a_cpu_with_the_reason():
    allocator = FakeAllocator(limit_bytes=GIB, fixed_bytes=0, bytes_per_image=1)
    events = list(run_max_batch(MaxBatchPlan(tiny()), lambda: False, run_function=allocator, probe=probe_of(CPU),
                                release=allocator.release))
    assert [type(e) for e in events] == [SequenceEnded] and allocator.sizes == []
    assert events[0].status == "failed"
    assert events[0].reason.startswith("the largest batch that fits is found on a CUDA GPU, and this run would "
                                       "train on the CPU (no CUDA GPU found)")


def test_nothing_fits_says_so():
    allocator = FakeAllocator(limit_bytes=GIB, fixed_bytes=2 * GIB, bytes_per_image=1)
    ended = search(allocator, MaxBatchPlan(tiny(device="auto", batch_size=8)))[-1]
    assert ended.status == "finished" and ended.result.max_batch_size is None and ended.result.best is None
    assert allocator.sizes == [8, 4, 2, 1]


def test_stop_ends_the_search_with_what_it_found():
    allocator = FakeAllocator(limit_bytes=GIB + 10_000 * 1000, fixed_bytes=GIB, bytes_per_image=1000)
    trials = []

    def stop():
        return len(trials) >= 3

    events = []
    for event in run_max_batch(MaxBatchPlan(tiny(device="auto", batch_size=64)), stop, run_function=allocator,
                               probe=probe_of(GPU), release=allocator.release):
        events.append(event)
        if isinstance(event, BatchTrial):
            trials.append(event)
    ended = events[-1]
    assert ended.status == "stopped" and ended.result.max_batch_size == 256 and len(allocator.sizes) == 3


def trial(batch_size, images_per_sec, fits=True):
    return BatchTrial(batch_size=batch_size, fits=fits, reason=None if fits else "CUDA out of memory", run_id=None,
                      images_per_sec=images_per_sec, peak_allocated_bytes=None, peak_reserved_bytes=None,
                      peak_nvml_device_used_bytes=None)


def test_a_largest_batch_much_slower_than_a_smaller_one_is_said_and_the_fastest_is_reported():
    # What an H100 showed for resnet18 bf16: the last fitting size crawled (the allocator short of room).
    from workbench.cli.max_batch_command import max_batch_json, summary_text
    from workbench.experiments.events import MaxBatchResult, edge_note

    trials = (trial(16384, 27_539.0), trial(32768, 30_586.0), trial(36864, None, fits=False),
              trial(33792, 30_873.0), trial(34304, 3_497.0), trial(34816, None, fits=False))
    result = MaxBatchResult(max_batch_size=34304, limited_by="memory", best=trials[4], trials=trials)
    assert result.fastest is trials[3]
    note = edge_note(result)
    assert note.startswith("at the edge of memory it trains at 3,497 images/s, 11% of what batch 33,792 did")
    ended = SequenceEnded(kind="max-batch", sequence_id=1, status="finished", result=result)
    assert note in summary_text(ended, result)
    json_result = max_batch_json(ended, result)
    assert (json_result["max_batch_size"], json_result["fastest_batch_size"]) == (34304, 33792)
    assert json_result["fastest_images_per_sec"] == 30_873.0
    from workbench.controller.messages import sequence_ended_text  # what the window's status line says
    assert "At the edge of memory it trains at 3,497 images/s" in sequence_ended_text(ended)
    # Within a fifth of the fastest: nothing to say.
    even = MaxBatchResult(max_batch_size=33792, limited_by="memory", best=trials[3], trials=trials[:4])
    assert edge_note(even) is None and "edge" not in summary_text(ended, even)


def test_the_training_set_caps_the_batch_of_an_image_folder(tmp_path):
    from own_images import make_folder

    root = make_folder(tmp_path / "pets", per_class=40)  # 3 × (40 − 8 held out) = 96 training images
    allocator = FakeAllocator(limit_bytes=80 * GIB, fixed_bytes=GIB, bytes_per_image=1000)
    base = tiny(device="auto", dataset="folder", data_path=str(root), image_size=64, batch_size=32)
    ended = search(allocator, MaxBatchPlan(base))[-1]
    assert allocator.sizes == [32, 64, 96]
    assert ended.result.max_batch_size == 96 and ended.result.limited_by == "training set"


def test_a_user_model_on_a_folder_keeps_its_spec_kwargs_and_image_size_in_every_trial(tmp_path, user_module):
    from own_images import make_folder

    root = make_folder(tmp_path / "pets", per_class=40)
    allocator = FakeAllocator(limit_bytes=GIB + 50 * 1000, fixed_bytes=GIB, bytes_per_image=1000)
    base = tiny(device="auto", dataset="folder", data_path=str(root), image_size=96, batch_size=16,
                model="mymodels:tiny_net", model_kwargs='{"width": 4}')
    ended = search(allocator, MaxBatchPlan(base))[-1]
    assert ended.result.max_batch_size == 50 and ended.result.limited_by == "memory"
    assert {(c.model, c.model_kwargs, c.image_size, c.dataset, c.data_path) for c in allocator.configs} == {
        ("mymodels:tiny_net", '{"width": 4}', 96, "folder", str(root))}


@pytest.mark.parametrize("compile_mode, named", [("off", ""), ("default", " compiled (default)"),
                                                 ("reduce-overhead", " compiled (reduce-overhead)")])
def test_the_search_is_named_compiled_only_when_the_model_is_compiled(compile_mode, named):
    plan = MaxBatchPlan(tiny(device="auto", compile=compile_mode))
    assert plan.display_name == f"max-batch {plan.base.model} {plan.base.precision}{named}"


def test_steps_per_trial_no_run_may_take_are_refused_before_a_trial():
    """10^12 steps per trial passed the plan's check; each trial then failed on max_steps, recorded, exit 1."""
    from workbench.experiments.max_batch import plan_problems

    assert plan_problems(MaxBatchPlan(tiny(device="auto"), steps_per_trial=10**12), GPU) == [
        "steps per trial 1,000,000,000,000: max_steps must be between 1 and 100000000 (got 1000000000000)"]
    assert plan_problems(MaxBatchPlan(tiny(device="auto")), GPU) == []
