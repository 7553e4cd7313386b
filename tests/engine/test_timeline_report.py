"""The CLI's lines for a GPU sample and a profiled GPU summary (the CPU ones run in test_cli_run)."""

import dataclasses

from workbench.cli import timeline_report
from workbench.config import RunConfig
from workbench.engine.events import ProfileSample
from workbench.engine.run_summary import Finding, NamedTime, RunSummary

SAMPLE = ProfileSample(
    first_step=21, last_step=31, device_type="cuda", steps=8, window_seconds=0.1, images_per_sec=2560.0,
    host_data_wait_seconds=0.01, top_ops=(NamedTime(name="cudaLaunchKernel", seconds=0.02, count=700),), ops_steps=2,
    kernel_busy_seconds=0.025, memcpy_seconds=0.001, memset_seconds=0.0, idle_waiting_for_data_seconds=0.01,
    idle_waiting_for_host_seconds=0.06, idle_other_seconds=0.004, kernels=696, launches=712,
    median_kernel_seconds=2.4e-6, trace_path="/h/traces/step-0000022.trace.json.gz",
)


def test_a_gpu_sample_line():
    assert timeline_report.sample_line(SAMPLE) == (
        "profile sample, steps 21-31: kernels 25% · memcpy 1% · idle: data 10%, host 60%, other 4% · "
        "87 kernels/step (median 2.4 µs) · over the sampled 100.0 ms · trace /h/traces/step-0000022.trace.json.gz")


def test_a_gpu_sample_line_per_step_of_the_run_as_it_runs_unprofiled():
    sample = dataclasses.replace(SAMPLE, unprofiled_step_seconds=0.01, unprofiled_data_wait_seconds=0.001)
    assert timeline_report.sample_line(sample) == (
        "profile sample, steps 21-31: kernels 31% · memcpy 1% · idle: data 10%, host 52%, other 5% · "
        "87 kernels/step (median 2.4 µs) · per 10.00 ms step (12.50 ms sampled) · "
        "trace /h/traces/step-0000022.trace.json.gz")


def test_a_profiled_gpu_summary():
    summary = RunSummary(
        status="finished", images_per_sec=2000.0, profile_samples=2, kernel_busy_fraction=0.25, memcpy_fraction=0.01,
        memset_fraction=0.0, idle_waiting_for_data_fraction=0.1, idle_waiting_for_host_fraction=0.6,
        idle_other_fraction=0.04, kernels_per_step=87.0, launches_per_step=89.0, median_kernel_seconds=2.4e-6,
        top_ops=SAMPLE.top_ops, trace_paths=("a", "b"), ceiling_images_per_sec=4000.0, pipeline_efficiency=0.5,
        findings=(Finding(kind="launch-bound", headline="Launch-bound: x.", text="Launch-bound: x. Try compile=true: y.", figure=0.6,
                          figure_name="idle_waiting_for_host_fraction", threshold=0.2, field="compile", value=True),),
    )
    rows = dict(timeline_report.summary_rows(summary, RunConfig(profile=True)))
    assert rows["GPU timeline"] == ("kernels 25%, memcpy 1%, idle waiting for data 10%, for the host 60%, "
                                    "other 4% (2 samples)")
    assert rows["kernels"] == "87 per step, median 2.4 µs, 89 launches per step"
    assert rows["efficiency"] == "50% of the ceiling" and rows["trace"] == "b"
    assert rows["top host ops by self time"].startswith("cudaLaunchKernel")  # children's time is not the op's
    assert timeline_report.finding_lines(summary) == ["1. Launch-bound: x. Try compile=true: y."]
    profile = timeline_report.profile_json(summary, RunConfig(profile=True))
    assert profile["trace_path"] == "b" and profile["kernel_busy_fraction"] == 0.25
    assert profile["top_ops"] == [{"name": "cudaLaunchKernel", "host_seconds": 0.02, "calls": 700}]


def test_a_flagged_sample_line_says_the_base_is_shorter_than_the_gpu_work():
    # 3.25 ms of GPU work a step (kernels and copies) against a 2 ms step of the run.
    sample = dataclasses.replace(SAMPLE, unprofiled_step_seconds=0.002, unprofiled_data_wait_seconds=0.0)
    line = timeline_report.sample_line(sample)
    assert "host -88%" in line  # the signed remainder: 2 - 3.25 - 0.5 other = -1.75 ms of a 2 ms step
    assert ("flagged: the run's step (2.00 ms) is shorter than the GPU's work per step in the sample (3.25 ms): "
            "the sample's host wait is a remainder of -1.75 ms, not a measurement") in line
    summary = RunSummary(status="finished", profile_samples=1, kernel_busy_fraction=1.5, memcpy_fraction=0.0,
                         memset_fraction=0.0, idle_waiting_for_data_fraction=0.0, idle_waiting_for_host_fraction=-1.9,
                         idle_other_fraction=0.25, kernels_per_step=87.0, launches_per_step=89.0,
                         timeline_flag="1 of 1 samples: the run's step (2.00 ms) is shorter")
    assert dict(timeline_report.summary_rows(summary, None))["timeline flag"] == summary.timeline_flag


def test_counts_a_sample_could_not_read_are_unknown_not_zero():
    """A sample without its kernel count is left out of the per-step figure (it read as 0 kernels there), and a
    summary without the figures says n/a, not "median 0.0 µs"."""
    from workbench.engine.summary import profile_figures

    unread = dataclasses.replace(SAMPLE, kernels=None, launches=None, median_kernel_seconds=None)
    figures = profile_figures([SAMPLE, unread])
    assert figures["kernels_per_step"] == 696 / 8 and figures["launches_per_step"] == 712 / 8
    figures = profile_figures([unread])
    assert figures["kernels_per_step"] is None and figures["median_kernel_seconds"] is None
    summary = RunSummary(status="finished", images_per_sec=2000.0, profile_samples=1, kernel_busy_fraction=0.25,
                         memcpy_fraction=0.01, memset_fraction=0.0, idle_waiting_for_data_fraction=0.1,
                         idle_waiting_for_host_fraction=0.6, idle_other_fraction=0.04)
    rows = dict(timeline_report.summary_rows(summary, RunConfig(profile=True)))
    assert rows["kernels"] == "n/a per step, median n/a, n/a launches per step"
