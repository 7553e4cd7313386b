"""Issue 31 item 7: NCCL / RCCL time in the workbench's own runs is communication, apart from compute, through the
breakdown, the step shares and the GPU time view (the communication-bound finding: test_findings.py)."""

from __future__ import annotations

import pytest

from workbench.engine import kineto
from workbench.engine.events import ProfileSample
from workbench.engine.step_shares import step_shares
from workbench.engine.timeline import COMMUNICATION, KERNEL, analyse, to_sample
from workbench.gui.breakdown_model import segments

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def record(name, start, end, device=True, correlation=0, stream=7):
    return {"name": name, "device_type": "DeviceType.CUDA" if device else "DeviceType.CPU", "start_ns": start,
            "end_ns": end, "device_index": 0 if device else -1, "device_resource_id": stream,
            "correlation_id": correlation}


def a_step_with_an_all_reduce():
    """One 1000 ns step: a gemm 0–400, an all-reduce 300–700 on its own stream (100 ns under the gemm)."""
    return kineto.activities([
        record("ProfilerStep#1", 0, 1000, device=False),
        record("cudaLaunchKernel", 0, 5, device=False, correlation=1),
        record("void gemm_kernel()", 0, 400, correlation=1),
        record("ncclKernel_AllReduce_RING_LL_Sum_float", 300, 700, correlation=2, stream=20),
    ], device_index=0)


@pytest.mark.parametrize("name", [ALL_REDUCE, "ncclKernel_Broadcast_RING_LL_Sum_int8_t", "rcclGenericKernel"])
def test_collective_kernels_are_communication(name):
    assert kineto.device_kind(name) == COMMUNICATION
    assert kineto.device_kind("void cutlass::Kernel<gemm>()") == KERNEL


def test_the_breakdown_keeps_communication_apart_from_compute():
    breakdown = analyse(a_step_with_an_all_reduce())
    assert breakdown.kernel_busy_seconds == pytest.approx(400e-9)  # the gemm alone: NCCL is not compute
    assert breakdown.communication_seconds == pytest.approx(300e-9)  # 400–700, not hidden behind the gemm
    assert breakdown.kernels == 2


def sample_of(breakdown, **extra):
    return to_sample(breakdown, first_step=1, last_step=1, device_type="cuda", batch_size=8, **extra)


def test_the_step_shares_count_communication_as_gpu_work_not_as_waiting_for_the_host():
    sample = sample_of(analyse(a_step_with_an_all_reduce()))
    assert sample.communication_seconds == pytest.approx(300e-9)
    shares = step_shares(sample, step_seconds=1000e-9)
    assert shares.communication == pytest.approx(0.3) and shares.compute == pytest.approx(0.4)
    assert shares.waiting_for_host == pytest.approx(0.0, abs=1e-9)  # the 300 ns idle after 700 is "other"
    assert shares.compute + shares.communication + shares.memcpy + shares.memset + shares.idle == pytest.approx(1)


def test_the_gpu_time_view_draws_communication():
    sample = sample_of(analyse(a_step_with_an_all_reduce()), unprofiled_step_seconds=1000e-9)
    parts = {segment.key: segment.fraction for segment in segments(sample)}
    assert parts["communication"] == pytest.approx(0.3) and parts["compute"] == pytest.approx(0.4)
    assert sum(parts.values()) == pytest.approx(1)


def test_a_sample_without_communication_reads_as_before():
    sample = ProfileSample(first_step=1, last_step=2, device_type="cuda", steps=2, window_seconds=2e-3, images_per_sec=1.0,
                           host_data_wait_seconds=0.0, top_ops=(), kernel_busy_seconds=1e-3, memcpy_seconds=0.0,
                           memset_seconds=0.0, idle_waiting_for_data_seconds=0.0, idle_waiting_for_host_seconds=1e-3,
                           idle_other_seconds=0.0)
    assert step_shares(sample).communication == 0.0
