"""The main window end to end: real tiny CPU runs, stop, failures, memory button, persistence, reruns."""

import pytest
from builders import CPU, GPU, GPU_MEMORY, TINY_RUN, FakeRun, ListRecording, collect, run_once, window_probe

from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.gui.main_window import SETTINGS_CONFIG
from workbench.gui.settings_file import SettingsFile
from workbench.gui.engine_calls import engine_run


def curve_points(curve) -> int:
    x, _ = curve.getData()
    return 0 if x is None else len(x)


def wait_for_device(qtbot, window):
    qtbot.waitUntil(lambda: window.controller.device is not None, timeout=30_000)


def test_widgets_carry_stable_object_names(make_window):
    window = make_window()
    for name in ("startButton", "stopButton", "releaseMemoryButton", "lossPlot", "throughputPlot", "memoryPlot",
                 "progressBar", "statusLine", "devicePanel", "batch_size", "num_workers", "runsTab"):
        assert window.findChild(object, name) is not None, name


def test_real_cpu_run_finishes_and_the_plots_hold_data(qtbot, make_window):
    from workbench.engine import probe_device

    window = make_window(run_function=engine_run, probe_function=lambda: probe_device("auto"))
    window.show()
    wait_for_device(qtbot, window)
    ended = []
    window.training_thread.event.connect(collect(RunEnded, ended))
    run_once(qtbot, window, TINY_RUN.replace(epochs=2))
    assert [event.status for event in ended] == ["finished"], ended[0].reason
    assert curve_points(window.plots.raw_loss_curve) == 8  # 256 // 32 = 8 steps per epoch, logged every 2
    assert curve_points(window.plots.smooth_loss_curve) == 0  # 8 points: too few to smooth, drawn raw
    assert curve_points(window.plots.throughput_curve) == 8
    assert curve_points(window.plots.data_wait_curve) == 8
    assert len(window.plots.test_loss_points.data) == 2  # one test loss per epoch
    # CPU: the memory plot shows this process's resident memory, and says the GPU figures need CUDA.
    assert curve_points(window.plots.memory.curves["process_rss"]) == 8
    assert all(curve_points(window.plots.memory.curves[key]) == 0
               for key in ("torch_allocated", "torch_reserved", "nvml_device_used"))
    caption = window.plots.memory.caption
    assert caption.isVisible() and "resident memory (RSS) of this process" in caption.text()
    assert "CPU mode" in caption.text() and "need a CUDA GPU" in caption.text()
    assert window.progress.value() == window.progress.maximum() == 16
    assert window.status_line.text().startswith("Finished: test accuracy")
    assert window.start_button.isEnabled() and not window.stop_button.isEnabled() and window.form.editable


def test_gpu_run_fills_the_memory_plot_with_the_device_total_as_limit(qtbot, make_window):
    window = make_window(run_function=FakeRun(steps=30, memory=GPU_MEMORY, device=GPU),
                         probe_function=window_probe(GPU))
    window.show()
    wait_for_device(qtbot, window)
    run_once(qtbot, window, TINY_RUN.replace(device="auto"))
    for key in ("torch_allocated", "torch_reserved", "nvml_device_used"):
        assert curve_points(window.plots.memory.curves[key]) == 30
    assert curve_points(window.plots.memory.curves["process_rss"]) == 0  # host memory: not on the GPU's axis
    x, y = window.plots.memory.curves["torch_reserved"].getData()
    assert y[0] == pytest.approx(3.0)  # GiB
    assert window.plots.memory.device_total_line.isVisible() and window.plots.memory.device_total_line.value() == 80
    assert "NVML used (device-wide: all processes" in window.plots.memory.caption.text()
    assert "CPU mode" not in window.plots.memory.caption.text()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stop_mid_run_stops_the_run_and_frees_the_window(qtbot, make_window, num_workers):
    # 1000 epochs would train for many minutes: a run that ends within the 60 s allowed (a loaded machine's
    # margin) was stopped. The engine checks the stop flag before every step (tests/engine/test_stop_phases.py).
    window = make_window(run_function=engine_run)
    window.form.set_config(TINY_RUN.replace(synthetic_size=512, epochs=1000, log_every=1, num_workers=num_workers))
    ended = []
    window.training_thread.event.connect(collect(RunEnded, ended))
    with qtbot.waitSignal(window.training_thread.steps, timeout=60_000):
        window.start_button.click()
    assert window.stop_button.isEnabled() and not window.start_button.isEnabled()
    assert not window.form.editable
    with qtbot.waitSignal(window.training_thread.finished, timeout=60_000):
        window.stop_button.click()
    assert [event.status for event in ended] == ["stopped"]
    assert window.status_line.text().startswith("Stopped")
    assert window.start_button.isEnabled()


def test_worker_exception_shows_a_failed_run_with_its_reason(qtbot, make_window):
    window = make_window(run_function=FakeRun(steps=10, raise_at=5))
    run_once(qtbot, window, TINY_RUN)
    assert window.run_message.isVisibleTo(window)
    assert window.run_message.property("status") == "failed"
    assert window.run_message.text() == "Run failed: RuntimeError: boom at step 5"
    assert window.status_line.text() == "Run failed: RuntimeError: boom at step 5"
    assert window.progress.format() == "Failed"
    assert curve_points(window.plots.raw_loss_curve) == 4  # the steps before the failure stay on the plot
    assert window.start_button.isEnabled()


def test_invalid_settings_disable_start_with_the_reason(make_window):
    window = make_window()
    window.form.set_config(RunConfig(dataset="npz", data_path=""))
    assert not window.start_button.isEnabled()
    assert "dataset=npz needs data_path" in window.start_button.toolTip()
    assert "dataset=npz needs data_path" in window.form.problems_label.text()
    window.form.editor("dataset").setCurrentIndex(window.form.editor("dataset").findData("synthetic"))
    assert window.start_button.isEnabled()


def test_release_button_is_disabled_on_cpu_with_the_reason(qtbot, make_window):
    window = make_window(probe_function=window_probe(CPU))
    assert not window.release_button.isEnabled()  # before the probe: the device is not known yet
    window.show()
    wait_for_device(qtbot, window)
    assert not window.release_button.isEnabled()
    assert "CPU mode" in window.release_button.toolTip()
    # The reason is on screen, not only in a tooltip a disabled button may never show.
    assert window.release_result.isVisible() and window.release_result.text() == "No CUDA cache on a CPU"
    assert window.device_panel.title.text() == "CPU mode: no CUDA GPU found"
    assert window.device_panel.property("state") == "cpu"


def test_release_button_on_a_gpu_shows_what_it_freed_and_marks_the_plot(qtbot, make_window):
    window = make_window(probe_function=window_probe(GPU))
    window.show()
    wait_for_device(qtbot, window)
    assert window.release_button.isEnabled()
    assert window.device_panel.title.text() == f"GPU: {GPU.name}"
    assert "compute capability 9.0" in window.device_panel.details.text()
    window.release_button.click()
    qtbot.waitUntil(lambda: window.release_result.text() == "reserved 3.0 GiB → 1.0 GiB")
    assert "reserved 3.0 GiB → 1.0 GiB" in window.status_line.text()
    window.plots.redraw()
    _, reserved = window.plots.memory.curves["torch_reserved"].getData()
    assert list(reserved) == [3.0, 1.0]  # the drop, in GiB
    assert window.release_button.isEnabled()


def test_rerun_keeps_the_previous_run_and_names_it_by_its_data_and_what_changed(qtbot, make_window):
    """Without a history the window names runs as the history would (history.naming)."""
    window = make_window(run_function=FakeRun(steps=12))
    run_once(qtbot, window, TINY_RUN)
    run_once(qtbot, window, TINY_RUN.replace(batch_size=64))
    assert window.plots.overlay_labels() == ["#1 synthetic: small-cnn, batch 32, fp32"]
    assert window.plots.legend_labels() == ["#1 synthetic: small-cnn, batch 32, fp32", "#2 synthetic: batch_size=64"]
    window.plots.clear_overlays()
    assert window.plots.overlay_labels() == []
    assert window.plots.legend_labels() == ["#2 synthetic: batch_size=64"]


def test_settings_and_geometry_persist_between_launches(qtbot, make_window, settings):
    first = make_window()
    first.form.set_config(TINY_RUN.replace(batch_size=48, model="resnet18"))
    first.plots.set_x_axis("samples_seen")
    first.resize(1111, 777)
    first.show()
    first.close()
    second = make_window()
    assert second.form.config() == TINY_RUN.replace(batch_size=48, model="resnet18")
    assert (second.width(), second.height()) == (1111, 777)
    assert second.plots.x_axis == "samples_seen"
    assert isinstance(settings.value("window/geometry"), str)  # base64 text: the file holds nothing but text
    assert SettingsFile.read(settings.path)[0].value("plots/x_axis") == "samples_seen"  # saved on close


def test_stale_stored_settings_drop_what_is_gone_and_keep_the_rest(make_window, settings):
    settings.set_value(SETTINGS_CONFIG, '{"batch_size": 64, "renamed_knob": 3}')
    window = make_window()
    assert window.form.config() == RunConfig(batch_size=64)
    assert "renamed_knob is not a setting of this version: dropped" in window.status_line.text()
    settings.set_value(SETTINGS_CONFIG, "{not json")
    window = make_window()
    assert window.form.config() == RunConfig()
    assert "all reset to the defaults" in window.status_line.text()


def test_closing_mid_run_stops_the_run_then_closes(qtbot, make_window):
    window = make_window(run_function=FakeRun(steps=100_000, step_seconds=0.002))
    window.show()
    with qtbot.waitSignal(window.training_thread.steps, timeout=10_000):
        window.start_button.click()
    # Unstopped, the fake would step for 200 s: a finish within 30 s (a loaded machine's margin) is the stop's.
    with qtbot.waitSignal(window.training_thread.finished, timeout=30_000):
        assert not window.close()  # refused for now: the run must stop first
    qtbot.waitUntil(lambda: not window.isVisible())
    assert not window.training_thread.running


def test_runs_view_replaces_the_placeholder(make_window):
    from PySide6.QtWidgets import QLabel

    window = make_window()
    window.set_runs_view(QLabel("runs table"))
    assert window.runs_tab.layout().count() == 1
    assert window.runs_tab.layout().itemAt(0).widget().text() == "runs table"


def test_recorder_gets_every_event_of_each_run_in_order(qtbot, make_window):
    recording = ListRecording()
    recorders = recording.recorders
    window = make_window(run_function=FakeRun(steps=7), recordings=recording)
    run_once(qtbot, window, TINY_RUN)
    run_once(qtbot, window, TINY_RUN.replace(seed=1))
    assert [recorder.config.seed for recorder in recorders] == [0, 1]
    for recorder in recorders:
        kinds = [type(event).__name__ for event in recorder.events]
        assert kinds == ["StatusChanged", "RunStarted"] + ["StepStats"] * 7 + ["EpochStats", "RunEnded"]


def test_a_failing_recorder_is_reported_and_the_run_goes_on(qtbot, make_window):
    window = make_window(run_function=FakeRun(steps=7), recordings=ListRecording(fail_at=3))
    messages = []
    window.training_thread.steps.connect(lambda _steps: messages.append(window.status_line.text()))
    ended = []
    window.training_thread.event.connect(collect(RunEnded, ended))
    run_once(qtbot, window, TINY_RUN)
    assert any("not being recorded in the history: OSError: disk full" in message for message in messages)
    assert [event.status for event in ended] == ["finished"]
    assert window.run_message.text().endswith("(not recorded in the history: OSError: disk full)")


def test_real_npz_data_runs_from_the_form(qtbot, make_window, subset_npz):
    window = make_window(run_function=engine_run)
    form = window.form
    form.set_config(TINY_RUN)
    form.editor("dataset").setCurrentIndex(form.editor("dataset").findData("npz"))
    assert not window.start_button.isEnabled()  # no file yet
    form.editor("data_path").setText(str(subset_npz))
    form.editor("max_steps").setValue(6)
    assert "5,085 training images" in form.derived_label.text()
    ended = []
    window.training_thread.event.connect(collect(RunEnded, ended))
    with qtbot.waitSignal(window.training_thread.finished, timeout=60_000):
        window.start_button.click()
    assert [(event.status, event.summary.steps) for event in ended] == [("finished", 6)]
    assert 0.0 <= ended[0].summary.test_accuracy <= 1.0


def test_a_long_running_banner_is_cut_at_a_whole_note_and_the_tooltip_holds_it_all(qtbot, make_window):
    """Issue 30 §8: the running banner, two lines high while a run goes, was cut mid-sentence."""
    window = make_window()
    window.resize(1400, 800)
    window.show()
    live = window.live
    notes = " · ".join(f"note {index}: persistent_workers and prefetch_factor need num_workers ≥ 1" for index in range(6))
    text = f"Running #7 pets: num_workers=2, effective batch 64 (64 × 1 step). Notes: {notes}"
    live.hold_message_height()
    live.show_message("running", text)
    shown = live.run_message.text()
    assert shown != text and shown.endswith("more: hover)") and " · note " in shown
    assert live.run_message.toolTip() == text
    window.resize(700, 800)  # narrower: fewer whole notes, never half of one
    qtbot.waitUntil(lambda: live.run_message.text() != shown)
    assert live.run_message.text().endswith("hover)") and "note… " not in live.run_message.text()
    live.free_message_height()
    live.show_message("finished", text)
    assert live.run_message.text() == text  # after the run the banner may wrap: the text whole
