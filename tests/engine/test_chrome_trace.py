"""Chrome traces read back into the timeline: the committed H100 record dumps, written as Chrome traces and
read again, give the same breakdown; trimming keeps every GPU figure; a real torch trace reads."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from workbench.engine import chrome_trace, kineto, timeline

DATA = Path(__file__).parent / "data"
FIXTURES = ("kineto_launchbound_smallcnn_b32_fp32_h100.json.gz", "kineto_heavy_resnet18_b512_bf16_cl_h100_trimmed.json.gz")


def dump(name):
    with gzip.open(DATA / name, "rt", encoding="utf-8") as file:
        data = json.load(file)
    window = (min(r["start_ns"] for r in data["events"]), max(r["end_ns"] for r in data["events"]))
    return data, window


@pytest.mark.parametrize("name", FIXTURES)
def test_a_fixture_written_as_a_chrome_trace_reads_back_to_the_same_breakdown(tmp_path, name):
    data, window = dump(name)
    expected = timeline.analyse(kineto.activities(data["events"], 0), window=window, steps=data["steps"])
    path = chrome_trace.save(chrome_trace.from_records(data["events"]), tmp_path / "window.trace.json.gz")
    again = chrome_trace.breakdown(path, steps=data["steps"], window=window)
    assert again == expected


def test_trimming_drops_host_ops_and_keeps_every_gpu_figure():
    data, window = dump(FIXTURES[0])  # every host op was recorded in this one
    full = chrome_trace.from_records(data["events"])
    trimmed = chrome_trace.trim(full)
    assert len(trimmed["traceEvents"]) < 0.5 * len(full["traceEvents"])
    assert "cpu_op" in {e["cat"] for e in full["traceEvents"]}
    assert {e["cat"] for e in trimmed["traceEvents"]} <= {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime",
                                                          "cuda_driver", "user_annotation"}
    before = chrome_trace.breakdown(full, steps=data["steps"], window=window)
    after = chrome_trace.breakdown(trimmed, steps=data["steps"], window=window)
    gpu = ("kernel_busy_seconds", "memcpy_seconds", "memset_seconds", "idle_waiting_for_data_seconds",
           "idle_waiting_for_host_seconds", "idle_other_seconds", "kernels", "launches", "median_kernel_seconds",
           "top_kernels", "host_data_wait_seconds")
    assert {n: getattr(after, n) for n in gpu} == {n: getattr(before, n) for n in gpu}
    assert after.top_ops != before.top_ops  # the host ops are what went


def test_a_window_without_data_wait_marks_takes_the_loops_timing():
    data, window = dump(FIXTURES[1])
    unmarked = [r for r in data["events"] if r["name"] != kineto.DATA_WAIT_ANNOTATION]
    trace = chrome_trace.from_records(unmarked)
    plain = chrome_trace.breakdown(trace, steps=data["steps"], window=window)
    timed = chrome_trace.breakdown(trace, steps=data["steps"], window=window, timed_data_wait_seconds=0.002)
    assert timed == timeline.with_timed_data_wait(plain, 0.002)


@pytest.mark.slow  # the profiler's first start in a process takes seconds
def test_a_real_torch_trace_reads_its_steps_and_waits(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as recording:
        for step in range(3):
            with record_function(f"{kineto.STEP_PREFIX}{step + 1}"):
                with record_function(kineto.DATA_WAIT_ANNOTATION):
                    images = torch.randn(64, 64)
                (images @ images).sum()
    path = tmp_path / "cpu.trace.json"
    recording.export_chrome_trace(str(path))
    result = chrome_trace.breakdown(path)
    assert result.steps == 3 and result.kernel_busy_seconds == 0  # a CPU trace: no device work
    waits = [e for e in chrome_trace.load(path)["traceEvents"] if e.get("name") == kineto.DATA_WAIT_ANNOTATION]
    assert result.host_data_wait_seconds == pytest.approx(sum(e["dur"] for e in waits) / 1e6, rel=1e-6)
    assert any(op.name == "aten::mm" for op in result.top_ops)


def rocm_2021_trace(device):
    """A 2021-format trace (capitalised categories) of a rank whose GPU is ``device``, launched by ROCm."""
    return {"traceEvents": [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 1, "tid": "1", "ts": 0, "dur": 1000},
        {"ph": "X", "cat": "Runtime", "name": "hipLaunchKernel", "pid": 1, "tid": "1", "ts": 500, "dur": 5,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "Kernel", "name": "Cijk_gemm", "pid": device, "tid": "stream 7", "ts": 600, "dur": 300,
         "args": {"device": device, "stream": 7, "correlation": 7}},
    ]}


def test_a_2021_rocm_trace_on_device_1_reads_its_kernels_and_launches():
    """Issue 27's measured failures of this reader: the 2021 categories matched nothing, a GPU other than device
    0 dropped all device work, and hipLaunchKernel was no launch (all idle time "other")."""
    result = chrome_trace.breakdown(rocm_2021_trace(device=1))
    assert result.kernels == 1 and result.launches == 1
    assert result.kernel_busy_seconds == pytest.approx(300e-9 * 1000)
    assert result.idle_waiting_for_host_seconds == pytest.approx(600e-6)  # 0–600 µs: the launch came at 500
    assert kineto.host_kind("hipMemcpyAsync") == timeline.RUNTIME
