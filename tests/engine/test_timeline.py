"""The timeline breakdown from hand-made activity lists (exact figures), and from real Kineto dumps.

Times are in nanoseconds; the window is [0, 100) unless a test says otherwise, so 10 ns = 10 %.
"""

import gzip
import json
from pathlib import Path

import pytest

from workbench.engine import kineto, timeline
from workbench.engine.timeline import (
    CPU_OP,
    DATA_WAIT,
    KERNEL,
    MEMCPY,
    MEMSET,
    RUNTIME,
    STEP,
    Activity,
    analyse,
)
from workbench.engine.intervals import subtract, union
from workbench.engine.step_shares import step_shares

DATA = Path(__file__).parent / "data"
HOST_THREAD = 1


def kernel(start, end, correlation, stream=7, name="k"):
    return Activity(start, end, KERNEL, stream, name, correlation)


def launch(start, correlation, end=None):
    """The runtime call that launched device work ``correlation``, starting at ``start``."""
    return Activity(start, end if end is not None else start + 1, RUNTIME, HOST_THREAD, "cudaLaunchKernel", correlation)


def steps(*bounds):
    return [Activity(a, b, STEP, HOST_THREAD, f"ProfilerStep#{i}") for i, (a, b) in enumerate(bounds, start=1)]


def ns(seconds):
    return round(seconds * 1e9)


def test_overlapping_kernels_on_two_streams_count_once_and_late_launches_are_host_wait():
    activities = [
        *steps((0, 50), (50, 100)),
        kernel(10, 30, 1, stream=7), launch(5, 1),
        kernel(20, 40, 2, stream=8), launch(8, 2),  # overlaps the first on another stream
        kernel(60, 70, 3, stream=7), launch(45, 3),  # launched after the GPU went idle at 40
    ]
    result = analyse(activities)
    assert result.window_seconds == pytest.approx(100e-9)
    assert result.steps == 2
    assert ns(result.kernel_busy_seconds) == 40  # [10, 40) ∪ [60, 70), not 20 + 20 + 10
    # [0, 10): the first launch came at 5, after the window (and the idle GPU) began; [40, 60): launched at 45.
    assert ns(result.idle_waiting_for_host_seconds) == 30
    assert ns(result.idle_other_seconds) == 30  # [70, 100): nothing more was launched
    assert ns(result.idle_waiting_for_data_seconds) == 0
    assert result.kernels == 3 and result.launches == 3
    assert result.median_kernel_seconds == pytest.approx(20e-9)


def test_a_gap_before_work_queued_earlier_is_not_host_wait():
    # The second kernel was launched at 5, long before the GPU went idle at 10, yet started at 30:
    # something other than the host held it (a sync, a cross-stream dependency).
    activities = [*steps((0, 100)), kernel(0, 10, 1), launch(0, 1), kernel(30, 100, 2), launch(5, 2)]
    result = analyse(activities)
    assert ns(result.idle_waiting_for_host_seconds) == 0
    assert ns(result.idle_other_seconds) == 20
    assert ns(result.kernel_busy_seconds) == 80


def test_a_copy_hidden_behind_a_kernel_costs_nothing_and_one_that_is_not_counts():
    activities = [
        *steps((0, 100)),
        kernel(10, 40, 1), launch(0, 1),
        Activity(20, 30, MEMCPY, 9, "Memcpy HtoD (Pinned -> Device)", 2), launch(1, 2),  # under the kernel
        Activity(50, 60, MEMCPY, 9, "Memcpy HtoD (Pinned -> Device)", 3), launch(2, 3),  # on its own
        Activity(55, 65, MEMSET, 7, "Memset (Device)", 4), launch(3, 4),  # half under that copy
    ]
    result = analyse(activities)
    assert ns(result.kernel_busy_seconds) == 30
    assert ns(result.memcpy_seconds) == 10
    assert ns(result.memset_seconds) == 5
    # Idle: [0, 10) until the kernel launched at 0 arrives (host); [40, 50) before a copy queued at 2
    # (other); [65, 100) the tail (other).
    assert ns(result.idle_waiting_for_host_seconds) == 10
    assert ns(result.idle_other_seconds) == 10 + 35


def test_idle_while_the_host_fetched_the_next_batch_is_waiting_for_data():
    activities = [
        *steps((0, 40), (40, 100)),
        kernel(0, 40, 1), launch(0, 1),
        Activity(35, 55, DATA_WAIT, HOST_THREAD, "workbench.data_wait"),  # the host fetches until 55
        kernel(60, 100, 2), launch(56, 2),
    ]
    result = analyse(activities)
    assert ns(result.idle_waiting_for_data_seconds) == 15  # the GPU idles from 40; the fetch ends at 55
    assert ns(result.idle_waiting_for_host_seconds) == 5  # then the launch at 56 reaches the GPU at 60
    assert ns(result.host_data_wait_seconds) == 20  # the whole fetch, busy GPU or not
    assert ns(result.kernel_busy_seconds) == 80


def test_the_figures_add_up_to_the_window():
    activities = [
        *steps((0, 60), (60, 120)),
        kernel(3, 9, 1), launch(1, 1), kernel(20, 25, 2), launch(15, 2),
        Activity(30, 34, MEMCPY, 9, "Memcpy DtoD (Device -> Device)", 3), launch(2, 3),
        Activity(40, 50, DATA_WAIT, HOST_THREAD, "workbench.data_wait"),
        kernel(70, 90, 4, stream=8), launch(60, 4), kernel(80, 110, 5), launch(61, 5),
    ]
    r = analyse(activities)
    parts = (r.kernel_busy_seconds, r.memcpy_seconds, r.memset_seconds, r.idle_waiting_for_data_seconds,
             r.idle_waiting_for_host_seconds, r.idle_other_seconds)
    assert sum(ns(part) for part in parts) == 120
    assert r.kernels == 4 and r.launches == 5


def test_activities_outside_the_window_are_clipped():
    activities = [kernel(-50, 20, 1), launch(-60, 1), kernel(90, 150, 2), launch(50, 2)]
    r = analyse(activities, window=(0, 100), steps=1)
    assert ns(r.kernel_busy_seconds) == 30
    assert ns(r.idle_waiting_for_host_seconds) == 70  # launched at 50, after the GPU went idle at 20


def test_top_ops_by_self_time_without_double_counting_nesting():
    activities = [
        *steps((0, 200)),
        Activity(0, 100, CPU_OP, HOST_THREAD, "aten::conv2d"),
        Activity(10, 40, CPU_OP, HOST_THREAD, "aten::convolution"),
        Activity(20, 30, CPU_OP, HOST_THREAD, "aten::cudnn_convolution"),
        Activity(50, 60, RUNTIME, HOST_THREAD, "cudaLaunchKernel", 9),
        Activity(120, 190, DATA_WAIT, HOST_THREAD, "workbench.data_wait"),
        Activity(130, 140, CPU_OP, HOST_THREAD, "aten::index"),
        Activity(0, 15, CPU_OP, 2, "aten::pin_memory"),  # another thread
    ]
    ops = {op.name: (ns(op.seconds), op.count) for op in analyse(activities, gpu=False).top_ops}
    assert ops == {
        "aten::conv2d": (60, 1),  # 100 minus its children's 30 and 10
        "aten::convolution": (20, 1),
        "aten::cudnn_convolution": (10, 1),
        "cudaLaunchKernel": (10, 1),
        "aten::index": (10, 1),
        "aten::pin_memory": (15, 1),
    }  # the step and data-wait annotations are markers, not ops


def test_a_cpu_window_has_no_gpu_figures():
    r = analyse([*steps((0, 10)), Activity(0, 5, DATA_WAIT, HOST_THREAD, "workbench.data_wait")], gpu=False)
    assert r.kernel_busy_seconds is None and r.idle_waiting_for_host_seconds is None and r.kernels is None
    assert ns(r.host_data_wait_seconds) == 5


def test_interval_helpers():
    assert union([(5, 10), (0, 3), (2, 6), (12, 13)]) == [(0, 10), (12, 13)]
    assert subtract([(0, 10), (20, 30)], [(2, 4), (8, 22), (25, 26)]) == [(0, 2), (4, 8), (22, 25), (26, 30)]


# -- Kineto records → activities ----------------------------------------------------------------------


def record(name, device_type, start, end, correlation, resource=7, index=0):
    return {"name": name, "device_type": device_type, "start_ns": start, "end_ns": end, "device_index": index,
            "device_resource_id": resource, "correlation_id": correlation}


def test_kineto_records_are_classified_by_name_and_gpu_copies_of_annotations_dropped():
    records = [
        record("ProfilerStep#21", "DeviceType.CPU", 0, 100, 1, resource=520, index=520),
        record("workbench.data_wait", "DeviceType.CPU", 0, 10, 2, resource=520, index=520),
        record("workbench.data_wait", "DeviceType.CUDA", 12, 14, 2),  # Kineto's GPU-row copy of the annotation
        record("cudaLaunchKernel", "DeviceType.CPU", 11, 12, 14, resource=520, index=520),
        record("void at::native::vectorized_elementwise_kernel<4>", "DeviceType.CUDA", 13, 15, 14),
        record("cudaMemcpyAsync", "DeviceType.CPU", 20, 22, 15, resource=520, index=520),
        record("Memcpy HtoD (Pinned -> Device)", "DeviceType.CUDA", 21, 30, 15, resource=8),
        record("Memset (Device)", "DeviceType.CUDA", 31, 32, 16),
        record("sm90_xmma_gemm", "DeviceType.CUDA", 40, 50, 17, index=1),  # another GPU
        record("aten::add_", "DeviceType.CPU", 10, 13, 3, resource=520, index=520),
        record("Activity Buffer Request", "DeviceType.CPU", 0, 50, 7, resource=0, index=-1),  # the profiler's own
    ]
    kinds = [(a.name, a.kind, a.stream) for a in kineto.activities(records, device_index=0)]
    assert kinds == [
        ("ProfilerStep#21", STEP, 520),
        ("workbench.data_wait", DATA_WAIT, 520),
        ("cudaLaunchKernel", RUNTIME, 520),
        ("void at::native::vectorized_elementwise_kernel<4>", KERNEL, 7),
        ("cudaMemcpyAsync", RUNTIME, 520),
        ("Memcpy HtoD (Pinned -> Device)", MEMCPY, 8),
        ("Memset (Device)", MEMSET, 7),
        ("aten::add_", CPU_OP, 520),
    ]


def real_dump(name):
    with gzip.open(DATA / name, "rt", encoding="utf-8") as file:
        dump = json.load(file)
    activities = kineto.activities(dump["events"], device_index=0)
    window = (min(r["start_ns"] for r in dump["events"]), max(r["end_ns"] for r in dump["events"]))
    return dump, analyse(activities, window=window, steps=dump["steps"])


def fractions(r):
    w = r.window_seconds
    return {name: getattr(r, name) / w for name in (
        "kernel_busy_seconds", "memcpy_seconds", "memset_seconds", "idle_waiting_for_data_seconds",
        "idle_waiting_for_host_seconds", "idle_other_seconds")}


def test_a_real_launch_bound_h100_window():
    # small-cnn, batch 32, fp32 on an H100 (torch 2.11, every host op recorded): 87 tiny kernels per step.
    dump, r = real_dump("kineto_launchbound_smallcnn_b32_fp32_h100.json.gz")
    f = fractions(r)
    assert sum(f.values()) == pytest.approx(1.0)
    assert f["kernel_busy_seconds"] < 0.10  # 2.7 ms of kernels in a 44 ms window
    assert f["idle_waiting_for_host_seconds"] > 0.6
    assert f["idle_waiting_for_data_seconds"] == pytest.approx(0.21, abs=0.02)  # the loop's data annotation
    assert r.kernels / r.steps == 87
    assert r.median_kernel_seconds < 5e-6
    assert 85 <= r.launches / r.steps <= 95
    assert r.top_kernels[0].name.startswith("void at::native::")
    assert {op.name for op in r.top_ops[:3]} >= {"cudaLaunchKernel"}  # launch overhead shows among host ops


def test_a_real_heavy_h100_window_is_mostly_kernels():
    # resnet18, batch 512, bf16, channels_last (trimmed to device work, launches and annotations).
    dump, r = real_dump("kineto_heavy_resnet18_b512_bf16_cl_h100_trimmed.json.gz")
    f = fractions(r)
    assert sum(f.values()) == pytest.approx(1.0)
    # Far busier than the launch-bound run; the probe recorded every host op, which slowed its host enough
    # that the GPU still waited on it a quarter of the time (the sampler records none in its timeline window).
    assert f["kernel_busy_seconds"] > 0.55
    assert r.kernels / r.steps == pytest.approx(375.5)
    assert any("batch_norm" in k.name for k in r.top_kernels[:3])
    assert r.memcpy_seconds > 0  # the probe's HtoD copies and DtoD copies


# -- a real window's sample per step of the run (engine.step_shares) ------------------------------------


def test_an_error_in_the_base_moves_the_remainder_linearly_on_the_resnet18_fixture():
    """A base 8.5 % above the GPU's work, data and other idle (a remainder of 0.9 ms a step): at -10 % it is
    below them, and the remainder follows the base down by exactly the error, negative, instead of stopping
    at zero (the GPU's 0.79 ms a step of waiting for data still fits in the step's idle time)."""
    dump, r = real_dump("kineto_heavy_resnet18_b512_bf16_cl_h100_trimmed.json.gz")
    sample = timeline.to_sample(r, 1, r.steps, "cuda", dump["batch"])
    steps = r.steps
    data = r.idle_waiting_for_data_seconds / steps
    rest = (r.kernel_busy_seconds + r.memcpy_seconds + r.memset_seconds + r.idle_other_seconds) / steps + data
    base = 1.085 * rest
    remainders = []
    for error in (-0.10, 0.0, 0.10):
        shares = step_shares(sample, step_seconds=base * (1 + error), data_wait_seconds=data)
        assert shares.compute + shares.memcpy + shares.memset + shares.idle == pytest.approx(1.0)
        remainders.append(shares.host_remainder_seconds)
    assert remainders[1] == pytest.approx(0.085 * rest)
    assert remainders[0] == pytest.approx(remainders[1] - 0.10 * base)  # negative: no clamp at zero
    assert remainders[2] == pytest.approx(remainders[1] + 0.10 * base)
    assert remainders[0] < 0


def test_a_window_without_host_marks_takes_the_loops_timed_wait_for_data():
    """A GPU window recorded without host annotations: the same idle as the test above reads as waiting
    for the host until the loop's own timing of next(batch) is added, capped by that idle."""
    activities = [*steps((0, 40), (40, 100)), kernel(0, 40, 1), launch(0, 1), kernel(60, 100, 2), launch(56, 2)]
    unmarked = analyse(activities)
    assert ns(unmarked.idle_waiting_for_data_seconds) == 0 and ns(unmarked.idle_waiting_for_host_seconds) == 20
    timed = timeline.with_timed_data_wait(unmarked, 15e-9)
    assert ns(timed.idle_waiting_for_data_seconds) == 15 and ns(timed.idle_waiting_for_host_seconds) == 5
    assert ns(timed.host_data_wait_seconds) == 15
    capped = timeline.with_timed_data_wait(unmarked, 1e-6)  # a wait longer than the GPU's idle
    assert ns(capped.idle_waiting_for_data_seconds) == 20 and ns(capped.idle_waiting_for_host_seconds) == 0
    assert ns(capped.host_data_wait_seconds) == 1000
