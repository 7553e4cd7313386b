"""The findings rules, fed synthetic figures: each fires on the case it describes and names its setting."""

import dataclasses

import pytest

from workbench.config import FIELD_NAMES, RunConfig
from workbench.engine import findings as rules
from workbench.engine.findings import find
from workbench.engine.run_facts import RunFacts
from workbench.engine.run_summary import RunSummary

GIB = 2**30


SUMMARY_FIELDS = {item.name for item in dataclasses.fields(RunSummary)}


def facts(config=None, **given):
    """RunFacts of a CUDA run: ``given`` holds RunSummary figures and RunFacts' own facts, by name."""
    figures = dict(images_per_sec=10_000.0, data_wait_fraction=0.01, device_span_fraction=0.99)
    own = dict(device_type="cuda", cpu_count=16, bf16_supported=True, cuda_available=True, total_memory_bytes=80 * GIB)
    for name, value in given.items():
        (figures if name in SUMMARY_FIELDS else own)[name] = value
        if name == "device_type":  # both the run's figure and the facts' own (RunFacts.of reads the device first)
            own[name] = value
    return RunFacts(config=config or RunConfig(), summary=RunSummary(status="finished", **figures), **own)


def timeline(**figures):
    """A profiled CUDA run: kernel-busy and what the idle time waited for."""
    base = dict(profile_samples=2, kernel_busy_fraction=0.5, idle_waiting_for_data_fraction=0.0,
                idle_waiting_for_host_fraction=0.0, idle_other_fraction=0.0, kernels_per_step=90.0,
                median_kernel_seconds=3e-6)
    base.update(figures)
    return base


def kinds(found):
    return [finding.kind for finding in found]


def test_every_finding_names_a_real_setting_or_none():
    cases = [
        facts(data_wait_fraction=0.4, config=RunConfig(augment="cpu", pin_memory=False, num_workers=1)),
        facts(**timeline(kernel_busy_fraction=0.3, idle_waiting_for_host_fraction=0.6)),
        facts(**timeline(kernel_busy_fraction=0.95)),
        facts(device_type="cpu", data_wait_fraction=0.01),
        facts(),
    ]
    for case in cases:
        found = find(case)
        assert found
        for finding in found:
            assert finding.field is None or finding.field in FIELD_NAMES
            assert finding.figure_name and finding.headline and finding.text.startswith(finding.headline)
            if finding.field is not None:  # a change the run's own settings can take (Apply, Verify)
                assert not case.config.replace(**{finding.field: finding.value}).validate(), finding.text


def test_input_bound_from_the_gpu_timeline_names_gpu_augmentation_first():
    config = RunConfig(augment="cpu", pipeline="dataloader", num_workers=2)
    found = find(facts(config, **timeline(kernel_busy_fraction=0.4, idle_waiting_for_data_fraction=0.42)))
    assert kinds(found)[:2] == ["input-bound"] * 2
    first = found[0]
    assert first.headline.startswith("Input-bound: the GPU sat idle waiting for data 42% of the sampled time")
    assert (first.figure, first.figure_name, first.threshold) == (0.42, "idle_waiting_for_data_fraction", 0.15)
    # pipeline=gpu-resident would not run with augment=cpu: it is offered once augmentation is on the device.
    assert [(f.field, f.value) for f in found[:2]] == [("augment", "gpu"), ("num_workers", 4)]
    assert "gpu-resident" not in " ".join(f.text for f in found)
    found = find(facts(config.replace(augment="gpu"),
                       **timeline(kernel_busy_fraction=0.4, idle_waiting_for_data_fraction=0.42)))
    assert [(f.field, f.value) for f in found[:2]] == [("pipeline", "gpu-resident"), ("num_workers", 4)]


def test_without_a_timeline_input_bound_reads_the_host_data_wait():
    found = find(facts(RunConfig(pipeline="gpu-resident", augment="gpu"), data_wait_fraction=0.3))
    assert found[0].kind == "input-bound" and found[0].figure_name == "data_wait_fraction"
    assert found[0].field is None  # nothing left to change in this pipeline


def test_a_busy_host_waiting_for_data_is_not_input_bound_when_the_gpu_was_busy_meanwhile():
    # The host blocked on next(batch) 30 % of the time, but the GPU ran kernels all along: prefetching works.
    found = find(facts(data_wait_fraction=0.3, **timeline(kernel_busy_fraction=0.9, idle_waiting_for_data_fraction=0.02)))
    assert "input-bound" not in kinds(found)
    assert found[0].kind == "compute-bound"


def test_launch_bound_names_batch_cuda_graphs_fused_optimizer_and_channels_last_and_is_not_compute_bound():
    found = find(facts(**timeline(kernel_busy_fraction=0.25, idle_waiting_for_host_fraction=0.62, kernels_per_step=92,
                                  median_kernel_seconds=9e-6), pipeline_efficiency=0.95))
    assert kinds(found)[:4] == ["launch-bound"] * 4
    assert "compute-bound" not in kinds(found)  # a launch-bound ceiling probe does not make it compute-bound
    assert found[0].headline.startswith(
        "Launch-bound: the GPU sat idle waiting for the host to launch work 62% of the sampled time "
        "(92 kernels per step, median 9.0 µs)")
    # In the order the measurements support: a larger batch, CUDA graphs, a fused optimizer, channels_last (an H100
    # run of small-cnn had layout conversions around every conv); plain compile (0.85× on an H100) after them.
    assert [(f.field, f.value) for f in found[:4]] == [("batch_size", 256), ("compile", "reduce-overhead"),
                                                       ("fused_optimizer", True), ("channels_last", True)]


def test_the_larger_problem_comes_first():
    found = find(facts(**timeline(kernel_busy_fraction=0.2, idle_waiting_for_data_fraction=0.25,
                                  idle_waiting_for_host_fraction=0.5)))
    assert found[0].kind == "launch-bound" and "input-bound" in kinds(found)


def test_compute_bound_offers_faster_math_it_does_not_use_yet():
    found = find(facts(**timeline(kernel_busy_fraction=0.93), pipeline_efficiency=0.91))
    assert found[0].headline == "Compute-bound: kernels ran 93% of the sampled time, at 91% of its compute ceiling."
    assert [(f.field, f.value) for f in found] == [("precision", "bf16"), ("channels_last", True), ("compile", "default")]
    old_gpu = find(facts(bf16_supported=False, **timeline(kernel_busy_fraction=0.93)))
    assert old_gpu[0].value == "fp16"
    done = find(facts(RunConfig(precision="bf16", channels_last=True, compile=True), **timeline(kernel_busy_fraction=0.9)))
    assert len(done) == 1 and done[0].field is None and "faster GPU" in done[0].text


def test_without_a_timeline_near_the_ceiling_is_model_bound_never_compute_bound():
    # On an H100, mobilenet_v3_small reached 97 % of its ceiling at 13 % kernel-busy: the ceiling probe
    # launches the same kernels, so a launch-bound model sits near it too.
    found = find(facts(pipeline_efficiency=0.97))
    assert {f.kind for f in found} == {"model-bound"}
    assert [(f.field, f.value) for f in found] == [("profile", True), ("compile", "default")]
    assert found[0].headline.startswith("Model-bound: the run reaches 97% of its compute ceiling, so its data path")
    assert "stale" not in found[0].headline
    assert find(facts(pipeline_efficiency=0.84))[0].kind == "unmeasured"
    # Issue 22: above 100 % the ceiling is stale, no figure to reason from: no rule reads it, no text shows it.
    above = find(facts(pipeline_efficiency=1.11))
    assert above[0].kind == "unmeasured" and all("ceiling" not in f.text and "111" not in f.text for f in above)
    cpu = find(facts(device_type="cpu", data_wait_fraction=0.03, pipeline_efficiency=1.35))
    assert cpu[0].kind == "compute-bound" and "ceiling" not in cpu[0].text
    unmeasured = find(facts(pipeline_efficiency=0.6))
    assert unmeasured[0].kind == "unmeasured"
    assert (unmeasured[0].field, unmeasured[0].value) == ("profile", True)
    assert "60% of its compute ceiling" in unmeasured[0].headline


def test_a_profiled_run_without_a_timeline_is_told_why_not_to_turn_profile_on():
    # A profiled run can lack a timeline (CUPTI unavailable, a run too short for a sample): asking it for
    # profile=true again would change nothing; it is told why instead.
    reason = "the profiler recorded no GPU activity (CUPTI unavailable?)"
    near_ceiling = find(facts(RunConfig(profile=True, compile=True), pipeline_efficiency=0.95,
                              gpu_timeline_unavailable_reason=reason))
    assert [(f.kind, f.field) for f in near_ceiling] == [("model-bound", None)]
    assert f"It ran with profile=true, but has no GPU timeline: {reason}." in near_ceiling[0].text
    assert [f.field for f in find(facts(RunConfig(profile=True), pipeline_efficiency=0.95))] == ["compile"]
    unmeasured = find(facts(RunConfig(profile=True), gpu_timeline_unavailable_reason=reason))
    assert [(f.kind, f.field) for f in unmeasured] == [("unmeasured", None)]
    assert "Try profile=true" not in unmeasured[0].text and reason in unmeasured[0].text


def test_an_unprofiled_gpu_run_is_never_called_compute_bound_from_its_event_span():
    # The old verdict said "compute-bound" for a 99 % event span: the span includes the idle gaps.
    found = find(facts(device_span_fraction=0.99))
    assert kinds(found) == ["unmeasured"]
    assert "cannot tell busy from waiting" in found[0].headline


def test_a_cpu_run_is_cpu_bound_and_points_at_the_gpu_it_left_unused():
    found = find(facts(RunConfig(device="cpu"), device_type="cpu", data_wait_fraction=0.05))
    assert found[0].headline.startswith("CPU-bound: the training thread spent 95% of the time in its steps")
    assert (found[0].field, found[0].value) == ("device", "auto")
    no_gpu = find(facts(RunConfig(device="cpu"), device_type="cpu", cuda_available=False))
    assert no_gpu[0].field is None


def test_memory_headroom_from_the_measured_bytes_per_sample():
    # 1 M parameters (16 MB of weights, gradients and momentum), a 2,000-image test split on the device,
    # and a training peak of 2 GiB at batch 128: about 16 MiB per sample, room for about 4,300 in 68 GiB.
    config = RunConfig(batch_size=128)
    f = facts(config, training_peak_allocated_bytes=2 * GIB, parameter_count=1_000_000, train_size=50_000,
              test_size=2_000, **timeline(kernel_busy_fraction=0.9))
    estimate = rules.max_batch_estimate(f)
    fixed = 1_000_000 * 4 * 3 + 2_000 * 3072
    assert estimate == int((80 * GIB * 0.85 - fixed) // ((2 * GIB - fixed) / 128))
    [headroom] = [finding for finding in find(f) if finding.kind == "memory-headroom"]
    assert (headroom.field, headroom.value) == ("batch_size", 4096)
    assert headroom.figure == estimate and headroom.threshold == 256
    assert f"grow to about {estimate:,}" in headroom.headline
    tight = facts(config, training_peak_allocated_bytes=50 * GIB, parameter_count=1_000_000, train_size=50_000,
                  test_size=2_000)
    assert "memory-headroom" not in kinds(find(tight))


def test_a_launch_bound_run_is_not_offered_a_batch_that_would_not_fit():
    f = facts(RunConfig(batch_size=4096), training_peak_allocated_bytes=60 * GIB, parameter_count=1_000_000,
              train_size=50_000, test_size=2_000, **timeline(kernel_busy_fraction=0.3, idle_waiting_for_host_fraction=0.5))
    assert "batch_size" not in [finding.field for finding in find(f)]


def test_nothing_measured_no_findings_and_no_verdict():
    assert find(facts(images_per_sec=None, data_wait_fraction=None)) == ()
    assert RunSummary(status="failed").verdict is None


@pytest.mark.parametrize("threshold", ["INPUT_BOUND_WAIT", "LAUNCH_BOUND_HOST_WAIT", "COMPUTE_BOUND_BUSY"])
def test_thresholds_are_exact_boundaries(threshold):
    value = getattr(rules, threshold)
    figure = {"INPUT_BOUND_WAIT": "idle_waiting_for_data_fraction",
              "LAUNCH_BOUND_HOST_WAIT": "idle_waiting_for_host_fraction",
              "COMPUTE_BOUND_BUSY": "kernel_busy_fraction"}[threshold]
    kind = {"INPUT_BOUND_WAIT": "input-bound", "LAUNCH_BOUND_HOST_WAIT": "launch-bound",
            "COMPUTE_BOUND_BUSY": "compute-bound"}[threshold]
    assert kind in kinds(find(facts(**timeline(**{figure: value}))))
    assert kind not in kinds(find(facts(**timeline(**{figure: value - 0.01}))))


def test_a_diverged_run_is_named_first_with_a_tenth_of_its_lr():
    case = facts(data_wait_fraction=0.4, config=RunConfig(augment="cpu", lr=0.3))  # input-bound too
    case = dataclasses.replace(case, summary=dataclasses.replace(
        case.summary, status="failed", failure_kind="diverged", final_loss=279.0,
        reason="training diverged: the loss rose to 81.6, 279, 717 at 3 log points in a row (up to step 24)"))
    found = find(case)
    assert kinds(found)[0] == "diverged" and "input-bound" in kinds(found)
    first = found[0]
    assert (first.field, first.value, first.figure, first.figure_name) == ("lr", 0.03, 279.0, "final_loss")
    assert first.text.startswith(first.headline) and not RunConfig(lr=0.3).replace(lr=first.value).validate()
    unmeasured = dataclasses.replace(case, summary=dataclasses.replace(case.summary, images_per_sec=None,
                                                                       data_wait_fraction=None))
    assert kinds(find(unmeasured)) == ["diverged"]  # even with no speed figure
    assert "diverged" not in kinds(find(facts(data_wait_fraction=0.4)))


def test_no_launch_bound_finding_from_a_flagged_timeline():
    flagged = facts(**timeline(kernel_busy_fraction=0.25, idle_waiting_for_host_fraction=0.62,
                               timeline_flag="1 of 1 samples: the run's step is shorter than the GPU's work"))
    assert "launch-bound" not in kinds(find(flagged))


def test_gpm_activity_is_quoted_beside_kernel_busy_and_low_tensor_activity_backs_faster_math():
    found = find(facts(**timeline(kernel_busy_fraction=0.93, sm_activity_fraction=0.62, tensor_activity_fraction=0.04),
                       pipeline_efficiency=0.91))
    assert found[0].headline == ("Compute-bound: kernels ran 93% of the sampled time (SM activity 62% by GPM), "
                                 "at 91% of its compute ceiling.")
    assert [(f.field, f.value) for f in found[:2]] == [("precision", "bf16"), ("channels_last", True)]
    assert all("the tensor cores were active only 4% of the time (GPM)" in f.text for f in found[:2])
    busy_tensor_cores = find(facts(**timeline(kernel_busy_fraction=0.93, tensor_activity_fraction=0.7)))
    assert "tensor cores were active" not in busy_tensor_cores[0].text
    balanced = find(facts(**timeline(kernel_busy_fraction=0.5, sm_activity_fraction=0.3)))
    assert balanced[0].headline.startswith("No single bottleneck: kernels ran 50% of the sampled time "
                                           "(SM activity 30% by GPM); ")


def test_an_input_bound_cpu_run_is_not_offered_the_gpu_and_is_told_what_all_its_cores_as_workers_cost():
    """Issue 30 §4 and §8: "Try augment=gpu … on the GPU" on a machine with none; num_workers=2 advised on a
    2-core CPU without a word of what it costs the training thread."""
    config = RunConfig(augment="cpu", pipeline="dataloader", num_workers=0, device="cpu")
    found = find(facts(config, device_type="cpu", cpu_count=2, cuda_available=False, data_wait_fraction=0.4))
    offered = [(f.field, f.value) for f in found if f.kind == "input-bound"]
    assert ("augment", "gpu") not in offered and ("num_workers", 2) in offered
    workers = next(f for f in found if f.field == "num_workers")
    assert "on 2 cores they leave none to the training thread" in workers.text
    roomy = find(facts(config.replace(device="auto"), cpu_count=16, data_wait_fraction=0.4))
    assert "leave none" not in next(f for f in roomy if f.field == "num_workers").text


def test_a_communication_bound_run_is_told_to_accumulate_and_about_ddp_buckets():
    found = find(facts(RunConfig(devices=2, accumulation_steps=1),
                       **timeline(kernel_busy_fraction=0.4, communication_fraction=0.35)))
    bound = [f for f in found if f.kind == "communication-bound"]
    assert bound and bound[0].figure == 0.35 and bound[0].threshold == rules.COMMUNICATION_BOUND
    assert bound[0].field == "accumulation_steps" and bound[0].value == 2
    assert "bucket_cap_mb" in bound[0].text and "overlap" in bound[0].text


def test_little_communication_is_no_finding():
    found = find(facts(RunConfig(devices=2), **timeline(kernel_busy_fraction=0.9, communication_fraction=0.05)))
    assert "communication-bound" not in kinds(found)
