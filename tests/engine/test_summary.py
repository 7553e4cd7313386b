"""The run summary: fractions of time judge the steady state, not the warm-up window."""

import pytest

from workbench.engine.events import StepStats
from workbench.engine.summary import SummaryBuilder


def window(step, wait, busy, seconds=1.0, images_per_sec=100.0):
    return StepStats(step=step, total_steps=30, epoch=1, epochs=1, samples_seen=step * 32, loss=1.0 / step, lr=0.1,
                     images_per_sec=images_per_sec, data_wait_seconds=wait, compute_seconds=busy,
                     window_seconds=seconds, elapsed_seconds=float(step))


def test_fractions_leave_out_the_warm_up_window():
    builder = SummaryBuilder()
    builder.add(window(10, wait=0.0, busy=4.0, seconds=4.0, images_per_sec=20.0))  # autotuning, start-up
    builder.add(window(20, wait=0.2, busy=0.7))
    builder.add(window(30, wait=0.4, busy=0.5))
    summary = builder.build("finished")
    assert summary.data_wait_fraction == pytest.approx(0.3)
    assert summary.device_busy_fraction == pytest.approx(0.6)
    assert summary.images_per_sec_mean == pytest.approx(220 / 3)  # throughput keeps every window
    assert summary.images_per_sec_median == 100.0
    assert summary.final_loss == pytest.approx(1 / 30) and summary.steps == 30


def test_a_single_window_is_used_as_it_is():
    builder = SummaryBuilder()
    builder.add(window(5, wait=0.25, busy=0.5))
    summary = builder.build("stopped", "stopped by the user at step 5")
    assert summary.data_wait_fraction == pytest.approx(0.25) and summary.device_busy_fraction == pytest.approx(0.5)
    assert summary.reason == "stopped by the user at step 5"


def test_no_windows_no_fractions():
    summary = SummaryBuilder().build("failed", "bad data", "data")
    assert summary.data_wait_fraction is None and summary.device_busy_fraction is None and summary.verdict is None
