"""Shares per step of the run as it runs unprofiled (engine.step_shares): the profiler's own cost is not read as
the GPU waiting for the host, and a base shorter than the GPU's work is flagged, its remainder kept signed."""

from __future__ import annotations

import pytest

from workbench.engine.events import ProfileSample
from workbench.engine.step_shares import step_shares


def sampled(**changes) -> ProfileSample:
    """Four sampled steps of 16 ms: kernels 8 ms, a visible copy 1 ms, idle 7 ms (host 5.5, data 0.5, other 1)."""
    figures = dict(
        first_step=20, last_step=27, device_type="cuda", steps=4, window_seconds=0.064, images_per_sec=0.0,
        host_data_wait_seconds=0.0, kernel_busy_seconds=0.032, memcpy_seconds=0.004, memset_seconds=0.0,
        idle_waiting_for_data_seconds=0.002, idle_waiting_for_host_seconds=0.022, idle_other_seconds=0.004,
    )
    figures.update(changes)
    return ProfileSample(**figures)


def test_shares_are_per_step_of_the_run_as_it_runs_unprofiled():
    # The profiler lengthened each step from 10 ms to 16 ms; the extra 6 ms is not the GPU waiting for the host.
    shares = step_shares(sampled(unprofiled_step_seconds=0.010, unprofiled_data_wait_seconds=0.0005))
    assert shares.rebased and shares.step_seconds == pytest.approx(0.010)
    assert shares.compute == pytest.approx(0.8)
    assert shares.memcpy == pytest.approx(0.1)
    # Idle is what is left of the 10 ms step: 1 ms; the loop's own timer says 0.5 ms of it waited for data and
    # the timeline's "other" is 1 ms a step: the host's remainder is -0.5 ms, kept signed (the base is 0.5 ms
    # short of the rest, or "other" reads long), not capped to nothing.
    assert shares.waiting_for_data == pytest.approx(0.05)
    assert shares.other == pytest.approx(0.1)
    assert shares.waiting_for_host == pytest.approx(-0.05)
    assert shares.host_remainder_seconds == pytest.approx(-0.0005)
    assert not shares.base_shorter_than_gpu_work and shares.flag_text() is None
    assert shares.profiler_slowdown == pytest.approx(0.6)
    total = shares.compute + shares.memcpy + shares.memset + shares.idle
    assert total == pytest.approx(1.0)


def test_a_run_slower_than_its_gpu_work_waits_for_the_host():
    shares = step_shares(sampled(), step_seconds=0.020, data_wait_seconds=0.002)
    assert shares.compute == pytest.approx(0.4)
    assert shares.memcpy == pytest.approx(0.05)
    assert shares.waiting_for_data == pytest.approx(0.1)
    assert shares.other == pytest.approx(0.05)
    assert shares.waiting_for_host == pytest.approx(0.4)  # 20 - 9 busy - 2 data - 1 other = 8 ms a step


def test_without_the_runs_own_step_time_the_shares_are_over_the_sampled_window():
    shares = step_shares(sampled())
    assert not shares.rebased and shares.profiler_slowdown is None
    assert shares.compute == pytest.approx(0.5)
    assert shares.waiting_for_host == pytest.approx(22 / 64)


def test_a_base_shorter_than_the_gpu_work_is_flagged_and_its_remainder_stays_negative():
    # 9 ms of GPU work a step (8 kernels, 1 copy) against a 5 ms base: no step of the run can be that short.
    shares = step_shares(sampled(unprofiled_step_seconds=0.005, unprofiled_data_wait_seconds=0.0))
    assert shares.base_shorter_than_gpu_work
    assert shares.step_seconds == pytest.approx(0.005)  # the base as given, not raised to the GPU's work
    assert shares.gpu_work_seconds == pytest.approx(0.009)
    assert shares.host_remainder_seconds == pytest.approx(0.005 - 0.009 - 0.001)  # less "other": -5 ms
    assert shares.waiting_for_host == pytest.approx(-1.0)
    assert shares.compute + shares.memcpy + shares.memset + shares.idle == pytest.approx(1.0)
    assert "shorter than the GPU's work per step" in shares.flag_text()


def test_a_cpu_sample_has_no_shares():
    assert step_shares(sampled(kernel_busy_seconds=None)) is None
