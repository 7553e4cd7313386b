"""The run summary: fractions of time judge the steady state, not the warm-up window."""

import pytest

from workbench.engine.events import StepStats
from workbench.engine.summary import SummaryBuilder


def window(step, wait, busy, seconds=1.0, batch=32):
    return StepStats(step=step, total_steps=30, epoch=1, epochs=1, samples_seen=step * batch, loss=1.0 / step, lr=0.1,
                     images_per_sec=10 * batch / seconds, data_wait_seconds=wait, device_span_seconds=busy,
                     window_seconds=seconds, elapsed_seconds=float(step))


def test_fractions_leave_out_the_warm_up_window():
    builder = SummaryBuilder()
    builder.add(window(10, wait=0.0, busy=4.0, seconds=4.0))  # autotuning, start-up
    builder.add(window(20, wait=0.2, busy=0.7))
    builder.add(window(30, wait=0.4, busy=0.5))
    summary = builder.build("finished")
    assert summary.data_wait_fraction == pytest.approx(0.3)
    assert summary.device_span_fraction == pytest.approx(0.6)
    assert summary.images_per_sec == pytest.approx(640 / 2.0)  # the warm-up window is left out
    assert summary.images_per_sec_median == pytest.approx(320.0)
    assert summary.final_loss == pytest.approx(1 / 30) and summary.steps == 30


def test_a_single_window_is_used_as_it_is():
    builder = SummaryBuilder()
    builder.add(window(5, wait=0.25, busy=0.5))
    summary = builder.build("stopped", "stopped by the user at step 5")
    assert summary.data_wait_fraction == pytest.approx(0.25) and summary.device_span_fraction == pytest.approx(0.5)
    assert summary.reason == "stopped by the user at step 5"


def test_no_windows_no_fractions():
    summary = SummaryBuilder().build("failed", "bad data", "data")
    assert summary.data_wait_fraction is None and summary.device_span_fraction is None and summary.verdict is None


def test_throughput_is_samples_over_seconds_not_a_mean_of_window_rates():
    builder = SummaryBuilder()
    builder.add(window(10, wait=0.0, busy=1.0, seconds=1.0))  # warm-up
    builder.add(window(20, wait=0.0, busy=1.0, seconds=1.0))  # 320 samples in 1 s
    builder.add(window(30, wait=0.0, busy=3.0, seconds=3.0))  # 320 samples in 3 s
    summary = builder.build("finished")
    # A mean of the two windows' rates would say (320 + 106.7) / 2 = 213; the run did 640 in 4 s.
    assert summary.images_per_sec == pytest.approx(160.0)
    assert summary.images_per_sec_median == pytest.approx((320 + 320 / 3) / 2)
