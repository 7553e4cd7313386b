"""BreakdownView: a stacked bar per sample, its top kernels and ops, findings with Apply buttons."""

import pytest

from workbench.engine.events import ProfileSample
from workbench.engine.run_summary import Finding, NamedTime
from workbench.gui import breakdown_model as model
from workbench.gui.breakdown_view import BreakdownView

KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
          "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")


def gpu_sample(first=21, busy=0.025, host=0.06, data=0.01, other=0.004, memcpy=0.001):
    return ProfileSample(
        first_step=first, last_step=first + 10, device_type="cuda", steps=8, window_seconds=0.1, images_per_sec=2560.0,
        host_data_wait_seconds=data, top_ops=(NamedTime(name="cudaLaunchKernel", seconds=0.02, count=700), NamedTime(name="aten::add_", seconds=0.004, count=90)),
        ops_steps=2, kernel_busy_seconds=busy, memcpy_seconds=memcpy, memset_seconds=0.0,
        idle_waiting_for_data_seconds=data, idle_waiting_for_host_seconds=host, idle_other_seconds=other,
        kernels=696, launches=712, median_kernel_seconds=2.4e-6,
        top_kernels=(NamedTime(name=KERNEL, seconds=0.004, count=300), NamedTime(name="sm80_xmma_gemm_f32f32", seconds=0.002, count=24)),
        trace_path=f"/home/traces/step-{first:07d}.trace.json.gz",
    )


CPU_SAMPLE = ProfileSample(first_step=7, last_step=9, device_type="cpu", steps=3, window_seconds=0.9, images_per_sec=107.0,
                           host_data_wait_seconds=0.09, top_ops=(NamedTime(name="aten::mkldnn_convolution", seconds=0.4, count=12),),
                           gpu_unavailable_reason="a CPU run has no GPU timeline", trace_path="/t/cpu.trace.json.gz")
FINDINGS = (
    Finding(kind="launch-bound", headline="Launch-bound: …", text="Launch-bound: … Try batch_size=256: more work per launch.", figure=0.6,
            figure_name="idle_waiting_for_host_fraction", threshold=0.2, field="batch_size", value=256),
    Finding(kind="launch-bound", headline="Launch-bound: …", text="Launch-bound: … Try compile=true: fewer launches.", figure=0.6,
            figure_name="idle_waiting_for_host_fraction", threshold=0.2, field="compile", value=True),
    Finding(kind="compute-bound", headline="Compute-bound: …", text="Compute-bound: … Only a faster GPU is left.", figure=0.9,
            figure_name="kernel_busy_fraction", threshold=0.8),
)


@pytest.fixture
def view(qtbot):
    widget = BreakdownView()
    qtbot.addWidget(widget)
    widget.resize(900, 700)
    return widget


def test_each_sample_is_a_stacked_bar_of_its_window(view):
    view.add_sample(gpu_sample(21))
    view.add_sample(gpu_sample(61, busy=0.08, host=0.01, data=0.005, other=0.004))
    heights = view.bar_heights()
    assert list(heights) == ["compute", "communication", "memcpy", "data", "host", "other"]
    assert heights["communication"] == [0.0, 0.0]  # no NCCL kernels in these samples
    assert heights["compute"] == pytest.approx([25.0, 80.0])
    assert heights["host"] == pytest.approx([60.0, 10.0])
    assert [sum(part[i] for part in heights.values()) for i in range(2)] == pytest.approx([100.0, 100.0])
    assert view.sample_picker.count() == 2 and view.sample_picker.currentIndex() == 1  # the newest is shown
    assert not view.plot.isHidden() and not view.kernels_table.isHidden()


def test_the_chosen_sample_lists_its_kernels_ops_and_trace(view):
    view.add_sample(gpu_sample(21))
    assert view.kernels_table.item(0, 0).text() == "at::native::vectorized_elementwise_kernel"
    assert view.kernels_table.item(0, 0).toolTip() == KERNEL
    assert view.kernels_table.item(0, 1).text() == "4.00"
    assert view.ops_table.item(0, 0).text() == "cudaLaunchKernel" and view.ops_table.item(0, 2).text() == "700"
    assert "waiting for host 60%" in view.summary.text() and "87 kernels/step" in view.summary.text()
    assert view.trace.text() == "Trace: /home/traces/step-0000021.trace.json.gz"


def test_a_cpu_sample_has_no_bar_but_its_ops(view):
    view.add_sample(CPU_SAMPLE)
    assert all(part == [0.0] for part in view.bar_heights().values())
    assert view.summary.text().startswith("No GPU timeline (a CPU run has no GPU timeline)")
    assert view.ops_table.rowCount() == 1 and view.kernels_table.rowCount() == 0
    # Only CPU samples: no empty chart and no empty kernel table take the room of the host ops.
    assert view.plot.isHidden() and view.kernels_table.isHidden() and view.legend.isHidden()
    assert view.title.text().startswith("Profiler samples")
    assert not view.ops_table.isHidden()


def test_apply_emits_the_field_and_value(view, qtbot):
    view.set_findings(FINDINGS)
    assert [button.text() for button in view.apply_buttons] == ["Apply batch_size=256", "Apply compile=true"]
    assert [label.text() for label in view.headline_labels] == ["1. Launch-bound: …", "2. Compute-bound: …"]
    assert [label.text() for label in view.remedy_labels] == [
        "• Try batch_size=256: more work per launch.", "• Try compile=true: fewer launches.",
        "• Only a faster GPU is left."]  # the last has no setting to apply
    with qtbot.waitSignal(view.apply_requested) as signal:
        view.apply_buttons[1].click()
    assert signal.args == ["compile", True]
    with qtbot.waitSignal(view.apply_requested) as signal:
        view.apply_buttons[0].click()
    assert signal.args == ["batch_size", 256]


def test_new_findings_replace_the_old(view):
    view.set_findings(FINDINGS)
    view.set_findings(FINDINGS[2:])
    assert view.apply_buttons == [] and len(view.headline_labels) == 1
    view.set_findings(())
    assert view.no_findings.isVisibleTo(view)


def test_clear_forgets_the_samples(view):
    view.add_sample(gpu_sample())
    view.clear()
    assert view.samples == () and view.sample_picker.count() == 0 and view.kernels_table.rowCount() == 0


def test_short_kernel_names():
    assert model.short_kernel_name(KERNEL) == "at::native::vectorized_elementwise_kernel"
    assert model.short_kernel_name("void at::native::(anonymous namespace)::max_pool_backward_nchw<float>(int)") == (
        "at::native::max_pool_backward_nchw")
    assert model.short_kernel_name("sm90_xmma_fprop_implicit_gemm_bf16") == "sm90_xmma_fprop_implicit_gemm_bf16"


def test_a_flagged_sample_draws_no_negative_bar_and_says_why():
    import dataclasses

    sample = dataclasses.replace(gpu_sample(), unprofiled_step_seconds=0.002, unprofiled_data_wait_seconds=0.0)
    parts = {part.key: part.fraction for part in model.segments(sample)}
    assert parts["host"] == 0.0 and parts["compute"] > 1  # the base is shorter than the kernels alone
    assert "Flagged: the run's step (2.00 ms) is shorter than the GPU's work per step" in model.sample_summary(sample)
