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
    assert summary.final_loss == pytest.approx(1 / 30) and summary.steps == 30


def test_a_single_window_is_warm_up_alone_no_steady_figure_and_no_verdict():
    """One log window holds the warm-up (workers starting, autotuning): read as the run's rate, a 5-step run read
    11× too slow and input-bound on its workers' start-up."""
    builder = SummaryBuilder()
    builder.add(window(5, wait=0.25, busy=0.5))
    summary = builder.build("stopped", "stopped by the user at step 5")
    assert summary.images_per_sec is None and summary.images_per_sec_low is None
    assert summary.data_wait_fraction is None and summary.device_span_fraction is None
    assert summary.findings == () and summary.verdict is None
    assert summary.steps == 5 and summary.reason == "stopped by the user at step 5"
    builder.add(window(10, wait=0.0, busy=1.0))  # a second window: steady
    assert builder.build("finished").data_wait_fraction == pytest.approx(0.0)


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


# -- profile samples, the ceiling and findings ------------------------------------------------------------

import time  # noqa: E402

from workbench.config import RunConfig  # noqa: E402
from workbench.device_info import DeviceInfo  # noqa: E402
from workbench.engine.events import ProfileSample, RunStarted
from workbench.engine.run_summary import NamedTime  # noqa: E402

GPU = DeviceInfo(type="cuda", name="Test GPU", cuda_available=True, total_memory_bytes=80 * 2**30, bf16_supported=True)


def gpu_sample(first, window=0.1, busy=0.03, host=0.05, data=0.01, other=0.01, kernels=900, steps=10, median=3e-6,
               ops=(("aten::conv2d", 0.01),), trace=None):
    return ProfileSample(
        first_step=first, last_step=first + 10, device_type="cuda", steps=steps, window_seconds=window,
        images_per_sec=1000.0, host_data_wait_seconds=data, top_ops=tuple(NamedTime(name=n, seconds=s, count=2) for n, s in ops),
        ops_steps=2, kernel_busy_seconds=busy, memcpy_seconds=0.0, memset_seconds=0.0,
        idle_waiting_for_data_seconds=data, idle_waiting_for_host_seconds=host, idle_other_seconds=other,
        kernels=kernels, launches=kernels, median_kernel_seconds=median,
        top_kernels=(NamedTime(name="sm90_gemm", seconds=busy, count=kernels),), trace_path=trace,
    )


def gpu_run(*samples, ceiling=None, config=RunConfig(profile=True)):
    builder = SummaryBuilder()
    builder.add(RunStarted(config=config, device=GPU, dataset_name="synthetic", train_size=10_000, test_size=2_000,
                           num_classes=10, steps_per_epoch=100, total_steps=100, parameter_count=1_000_000,
                           started_at=time.time(), ceiling_images_per_sec=ceiling))
    for step in range(10, 101, 10):
        builder.add(window(step, wait=0.0, busy=0.9, seconds=3.0 if step in (30, 40) else 1.0))
    for sample in samples:
        builder.add(sample)
    return builder.build("finished")


def test_sampled_windows_leave_the_steady_state():
    # A sample over steps 21-31 slows the windows ending at 30 and 40 (three times slower here).
    summary = gpu_run(gpu_sample(21))
    assert summary.images_per_sec == pytest.approx(320.0)  # windows 20 and 50..100 (20 ends before the sample)
    unsampled = gpu_run()
    assert unsampled.images_per_sec < 320.0


def test_profile_figures_are_time_weighted_over_the_samples():
    summary = gpu_run(gpu_sample(21, window=0.1, busy=0.03, host=0.05, kernels=900, median=2e-6,
                                 ops=(("aten::conv2d", 0.01), ("aten::add_", 0.002)), trace="a.trace.json.gz"),
                      gpu_sample(61, window=0.3, busy=0.21, host=0.05, data=0.02, other=0.02, kernels=900, median=4e-6,
                                 ops=(("aten::add_", 0.02),), trace="b.trace.json.gz"))
    assert summary.profile_samples == 2
    # Shares of the run's own unprofiled step (0.1 s: 1 s per 10-step window, no data wait), not of the
    # sampled windows: sample 1 has 3 ms of kernels per step, sample 2 has 21 ms; equal steps weigh equally.
    assert summary.kernel_busy_fraction == pytest.approx((0.03 + 0.21) / 2)
    assert summary.idle_other_fraction == pytest.approx((0.01 + 0.02) / 2)
    assert summary.idle_waiting_for_host_fraction == pytest.approx((0.96 + 0.77) / 2)
    assert summary.idle_waiting_for_data_fraction == pytest.approx(0.0)  # the loop timer saw no wait
    assert summary.kernels_per_step == pytest.approx(90.0)
    assert summary.median_kernel_seconds == pytest.approx(3e-6)
    assert [(op.name, op.seconds) for op in summary.top_ops] == [("aten::add_", pytest.approx(0.022)),
                                                                 ("aten::conv2d", pytest.approx(0.01))]
    assert summary.trace_paths == ("a.trace.json.gz", "b.trace.json.gz")
    assert summary.findings[0].kind == "launch-bound" and summary.verdict.startswith("Launch-bound")


def test_efficiency_is_images_per_sec_over_the_ceiling_of_these_settings():
    summary = gpu_run(ceiling=640.0)
    assert summary.ceiling_images_per_sec == 640.0
    assert summary.pipeline_efficiency == pytest.approx(summary.images_per_sec / 640.0)
    assert gpu_run().pipeline_efficiency is None


def test_a_profiled_run_without_a_sample_says_why():
    summary = gpu_run()
    assert summary.profile_samples == 0 and summary.kernel_busy_fraction is None
    assert "no profile sample was taken" in summary.gpu_timeline_unavailable_reason
    assert gpu_run(config=RunConfig()).gpu_timeline_unavailable_reason is None  # not asked for


def test_a_sample_whose_gpu_work_outlasts_the_runs_step_flags_the_run_and_reads_no_launch_bound():
    # The run's own step is 0.1 s; the first sample holds 0.15 s of kernels a step: not the run's step. Its
    # host wait is a negative remainder (-0.55) that, averaged with the second sample's 0.96, would still
    # read as launch-bound (0.205 over the 20 % threshold).
    summary = gpu_run(gpu_sample(21, window=2.0, busy=1.5, host=0.4, data=0.05, other=0.05),
                      gpu_sample(61, window=0.1, busy=0.03, host=0.05))
    assert summary.timeline_flag.startswith("1 of 2 samples: the run's step (100.00 ms) is shorter than the GPU's "
                                            "work per step in the sample (150.00 ms)")
    assert summary.idle_waiting_for_host_fraction == pytest.approx((-0.55 + 0.96) / 2)
    assert "launch-bound" not in [finding.kind for finding in summary.findings]
    assert gpu_run(gpu_sample(61)).timeline_flag is None
