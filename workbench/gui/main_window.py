"""The main window: settings on the left, device facts and the tabs (Live, GPU time, Trace, Experiments, Sample
batch, Runs) on the right, Start / Stop / progress below; File → Open trace… (or a trace dropped on the window).

It is the view of ``workbench.controller.RunController``: it builds the widgets, draws what the
controller hands it and forwards what the user does. What a click means (start, stop, a sweep, Apply,
closing mid-run) is decided there, without Qt; the training thread is the TrainingThread's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Hashable, Optional, Sequence

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import QLabel, QMainWindow, QSplitter, QTabWidget, QVBoxLayout, QWidget

from workbench.config import RunConfig
from workbench.controller.controls import Controls
from workbench.controller.jobs import MeasureCeiling, Probe, Recordings
from workbench.controller.lifecycle import READY, RunController
from workbench.controller.view import Progress
from workbench.engine.events import (
    DeviceInfo,
    EpochStats,
    MemoryRelease,
    ProfileSample,
    RunEnded,
    RunStarted,
    StepStats,
)
from workbench.engine.run_summary import Finding
from workbench.gui import garbage
from workbench.gui.background import BackgroundCall, call_in_background
from workbench.gui.device_panel import DevicePanel
from workbench.gui.engine_calls import (
    engine_ceiling,
    engine_model_names,
    engine_preview,
    engine_probe,
    engine_probe_for,
    engine_release,
    engine_run,
)
from workbench.gui.experiments_tab import ExperimentsTab
from workbench.gui.gpu_time_tab import GpuTimeTab
from workbench.gui.live_tab import LiveTab
from workbench.gui.plots import PlotsPanel
from workbench.gui.run_bar import START_KEYS, STOP_KEYS, ReleaseBox, RunBar, apply_action
from workbench.gui.runs_tab import RunsTab
from workbench.gui.sample_view import PreviewFunction, SampleView
from workbench.gui.sequence_dialogs import MaxBatchDialog, SweepDialog, SweepRequest, TuneDialog, TuneRequest
from workbench.gui.series import X_AXES
from workbench.gui.settings_file import SettingsFile
from workbench.gui.settings_form import SettingsForm
from workbench.gui.trace_tab import TraceTab
from workbench.gui.window_settings import (  # noqa: F401 (SETTINGS_CONFIG: tests and scripts read it here)
    SETTINGS_CONFIG,
    SETTINGS_GEOMETRY,
    SETTINGS_SPLITTER,
    SETTINGS_X_AXIS,
    home_settings,
    load_config,
    save_config,
    store_bytes,
    stored_bytes,
)
from workbench.gui.worker import RunFunction, TrainingThread
from workbench.telemetry_text import live_line

ProbeFunction = Callable[[], DeviceInfo]
ReleaseFunction = Callable[[], MemoryRelease]
CPU_MEMORY_NOTE = "<b>CPU mode:</b> the GPU figures (torch, NVML) need a CUDA GPU."
TAB_TIPS = {
    "Live": "Loss, throughput, memory and data wait of the current run, over earlier runs",
    "GPU time": "Where the GPU's time went in each profiler sample, and what to change",
    "Trace": "A torch.profiler trace of your own script (File → Open trace…, or drop it here): where the GPU's "
             "time went, and what to change",
    "Experiments": "Sweeps, the search for faster settings, the largest batch that fits",
    "Sample batch": "The images the current settings feed the model, after augmentation",
    "Runs": "Every run so far, to compare and export",
}


class MainWindow(QMainWindow):
    """``recordings()``, if given, makes a recorder factory for each job (e.g. a HistoryRecording on the
    run history): every run, alone or in a sequence, is recorded through it on the training thread."""

    def __init__(
        self,
        settings: Optional[SettingsFile] = None,
        run_function: RunFunction = engine_run,
        probe_function: ProbeFunction = engine_probe,
        release_function: ReleaseFunction = engine_release,
        preview_function: PreviewFunction = engine_preview,
        recordings: Optional[Recordings] = None,
        sequence_probe: Probe = engine_probe_for,
        measure_ceiling: MeasureCeiling = engine_ceiling,
        model_names_function: Callable[[], Sequence[str]] = engine_model_names,
        history_home: Optional[Path] = None,
    ):
        """``history_home``: the run history's folder, where an opened trace is kept (None: shown, not kept)."""
        super().__init__()
        self.setObjectName("mainWindow")
        self.setWindowTitle("GPU Training Workbench")
        settings_file_note = None
        if settings is None:
            settings, settings_file_note = home_settings()
        self._settings = settings
        self._probe_function = probe_function
        self._model_names_function = model_names_function
        self._probe_call: Optional[BackgroundCall] = None
        # Cyclic garbage (Qt objects among it) is collected on this thread only while the window lives.
        garbage.window_opened()
        self._collects_garbage = True

        config, settings_note = load_config(self._settings)
        self.training_thread = TrainingThread(run_function, parent=self)
        self.form = SettingsForm(config)
        self.device_panel = DevicePanel()
        self.plots = PlotsPanel()
        self.gpu_time = GpuTimeTab()
        self.breakdown = self.gpu_time.breakdown
        self.experiments = ExperimentsTab()
        self.trace_tab = TraceTab(history_home)
        self.sample_view = SampleView(preview_function)
        self.sample_view.set_config(config)
        self.controller = RunController(self, self.training_thread, run_function, recordings, sequence_probe,
                                        release_function, measure_ceiling)
        self._build_layout()
        self._connect()
        self._restore_window()
        self.controller.config_changed()
        self.status_line.setText(" ".join(note for note in (settings_file_note, settings_note) if note) or READY)

    # == assembly ================================================================================
    def _build_layout(self) -> None:
        self.form.setMinimumWidth(330)
        self.live = LiveTab(self.plots)
        self.run_message = self.live.run_message
        self.runs_tab = RunsTab()

        self.tabs = QTabWidget()
        self.tabs.setObjectName("mainTabs")
        for widget, title in ((self.live, "Live"), (self.gpu_time, "GPU time"), (self.trace_tab, "Trace"),
                              (self.experiments, "Experiments"), (self.sample_view, "Sample batch"),
                              (self.runs_tab, "Runs")):
            self.tabs.addTab(widget, title)
            self.tabs.setTabToolTip(self.tabs.count() - 1, TAB_TIPS[title])

        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.device_panel)
        right_layout.addWidget(self.tabs, 1)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.form)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([350, 1000])
        self.splitter.setChildrenCollapsible(False)

        self.run_bar = RunBar()
        self.start_button, self.stop_button, self.progress = (
            self.run_bar.start_button, self.run_bar.stop_button, self.run_bar.progress)
        # The release control sits with the device it acts on; why it is disabled is said beside it.
        self.release_box = ReleaseBox()
        self.release_button, self.release_result = self.release_box.button, self.release_box.result
        self.device_panel.add_side_widget(self.release_box)

        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(8, 8, 8, 4)
        layout.addWidget(self.splitter, 1)
        layout.addWidget(self.run_bar)
        self.setCentralWidget(central)

        file_menu = self.menuBar().addMenu("&File")
        self.open_trace_action = file_menu.addAction("Open trace…")
        self.open_trace_action.setObjectName("openTraceAction")
        self.open_trace_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_trace_action.setToolTip("Read a torch.profiler trace (.json, .json.gz) of your own script")
        self.open_trace_folder_action = file_menu.addAction("Open trace folder…")
        self.open_trace_folder_action.setObjectName("openTraceFolderAction")
        self.open_trace_folder_action.setToolTip("Read a folder of rank traces (one file per rank), side by side")
        self.setAcceptDrops(True)

        self.status_line = QLabel()
        self.status_line.setObjectName("statusLine")
        self.status_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.statusBar().addWidget(self.status_line, 1)

    def _connect(self) -> None:
        controller = self.controller
        self.start_button.clicked.connect(controller.start_run)
        self.stop_button.clicked.connect(controller.stop)
        self.release_button.clicked.connect(controller.release_memory)
        self.gpu_time.sample_button.clicked.connect(controller.request_sample)
        self.gpu_time.ceiling_button.clicked.connect(controller.measure_ceiling)
        self.breakdown.apply_requested.connect(controller.apply_setting)
        self.breakdown.verify_requested.connect(controller.verify_finding)
        self.open_trace_action.triggered.connect(self.open_trace)
        self.open_trace_folder_action.triggered.connect(self.open_trace_folder)
        self.trace_tab.trace_kept.connect(self.history_changed)
        self.trace_tab.busy_changed.connect(self._trace_busy)
        self.experiments.sweep_button.clicked.connect(self.start_sweep)
        self.experiments.tune_button.clicked.connect(self.start_tune)
        self.experiments.max_batch_button.clicked.connect(self.start_max_batch)
        self.experiments.tune_view.apply_button.clicked.connect(controller.apply_best)
        QShortcut(QKeySequence(START_KEYS), self, activated=self.start_button.click)
        QShortcut(QKeySequence(STOP_KEYS), self, activated=self.stop_button.click)
        self.form.config_changed.connect(self._on_config_changed)
        thread = self.training_thread
        thread.steps.connect(controller.on_steps)
        thread.event.connect(controller.on_event)
        thread.finished.connect(controller.on_finished)

    def set_runs_view(self, view: QWidget) -> None:
        """Host the run-history view in the Runs tab (replaces the placeholder).

        If the view offers them, its ``overlayRequested([(run id, label, series), …])`` draws the selected
        runs on the plots, its ``loadSettingsRequested(RunConfig)`` fills the form, and its ``refresh()``
        is called whenever a run's record appears or changes.
        """
        self.runs_tab.host(view, lambda overlays: self.plots.set_overlays(overlays, source="history"),
                           self.controller.load_settings)

    # == a trace of the user's own script ========================================================
    def open_trace(self) -> None:
        self.tabs.setCurrentWidget(self.trace_tab)
        self.trace_tab.choose_file()

    def _trace_busy(self, busy: bool) -> None:
        # One trace at a time: the actions wait, so nobody goes through a file dialog only to be refused.
        self.open_trace_action.setEnabled(not busy)
        self.open_trace_folder_action.setEnabled(not busy)

    def open_trace_folder(self) -> None:
        self.tabs.setCurrentWidget(self.trace_tab)
        self.trace_tab.choose_folder()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt's name)
        # Local paths only, and nothing opened or even looked at here: the Trace tab reads them off this thread.
        urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
        if urls and all(url.isLocalFile() for url in urls):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt's name)
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        self.drop_paths(paths)

    def drop_paths(self, paths: Sequence[str]) -> None:
        """Open a dropped trace file, or folder of rank traces, in the Trace tab."""
        self.tabs.setCurrentWidget(self.trace_tab)
        self.trace_tab.open_dropped(paths)

    # == the user's sequences: a dialog, then the controller ===================================
    def start_sweep(self) -> None:
        request = self._ask_sweep()
        if request is not None:
            self.controller.start_sweep(request.axes, request.length, repeats=request.repeats)

    def start_tune(self) -> None:
        request = self._ask_tune()
        if request is not None:
            self.controller.start_tune(request.allow, request.budget_seconds)

    def start_max_batch(self) -> None:
        if not self.controller.controls().max_batch.enabled:
            self.controller.start_max_batch()  # refused: the controller says why
            return
        budget = self._ask_max_batch()
        if budget is not False:
            self.controller.start_max_batch(budget)

    # Dialogs: tests replace these.
    def _ask_sweep(self) -> Optional[SweepRequest]:
        dialog = SweepDialog(self.form.config(), self)
        return dialog.request()[0] if dialog.exec() else None

    def _ask_tune(self) -> Optional[TuneRequest]:
        dialog = TuneDialog(self)
        return dialog.request() if dialog.exec() else None

    def _ask_max_batch(self):  # → budget bytes, None (no budget), or False (cancelled)
        dialog = MaxBatchDialog(self)
        return dialog.budget_bytes() if dialog.exec() else False

    # == the device ===========================================================================
    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if self._probe_call is None:
            # After the first paint: probing imports torch, which takes a second or two.
            QTimer.singleShot(0, self._start_probe)

    def _start_probe(self) -> None:
        if self._probe_call is not None:
            return
        self._probe_call = BackgroundCall(self._probe_function)
        self._probe_call.succeeded.connect(self._on_device)
        self._probe_call.failed.connect(self._on_probe_failed)
        self._probe_call.start()

    def _on_probe_failed(self, error: Exception) -> None:
        self.device_panel.show_error(f"{type(error).__name__}: {error}")

    def _on_device(self, device: DeviceInfo) -> None:
        self.controller.device_known(device)
        garbage.freeze_what_lives()  # the engine is loaded now: what exists lives as long as the window
        # torchvision's model names join the model field's list (importing it takes a second: off this thread).
        self.run_in_background(self._model_names_function, self.form.add_model_suggestions, lambda error: None)

    def _set_memory_context(self, device: DeviceInfo) -> None:
        if device.type == "cuda":
            self.plots.set_memory_context(device.total_memory_bytes)
        else:
            self.plots.set_memory_context(None, CPU_MEMORY_NOTE)

    def _on_config_changed(self, config: RunConfig) -> None:
        self.sample_view.set_config(config)
        self.controller.config_changed()

    # == WindowView: what the controller asks ================================================
    def form_config(self) -> RunConfig:
        return self.form.config()

    def form_problems(self) -> list[str]:
        return self.form.problems()

    def set_form_config(self, config: RunConfig) -> None:
        self.form.set_config(config)

    def save_config(self, config: RunConfig) -> None:
        save_config(self._settings, config)

    def show_controls(self, controls: Controls) -> None:
        self.form.set_editable(controls.form_editable)
        apply_action(self.start_button, controls.start)
        apply_action(self.stop_button, controls.stop)
        self.release_box.show_action(controls.release)
        self.gpu_time.show_actions(controls.sample_now, controls.ceiling)
        self.experiments.show_actions(controls.sweep, controls.tune, controls.max_batch)

    def show_status(self, text: str) -> None:
        self.status_line.setText(text)

    def show_run_message(self, status: str, text: str, details: Optional[str] = None) -> None:
        self.live.show_message(status, text, details)

    def show_progress(self, progress: Progress) -> None:
        self.run_bar.show_progress(progress)

    def show_device(self, device: DeviceInfo) -> None:
        self.device_panel.show_device(device)
        self.form.set_device(device)
        self._set_memory_context(device)

    def show_ceiling(self, text: str) -> None:
        self.gpu_time.ceiling_label.setText(text)

    def begin_run(self, label: str, key: Hashable) -> None:
        self.plots.begin_run(label, key)
        self.live.hold_message_height()

    def draw_run_started(self, event: RunStarted) -> None:
        self._set_memory_context(event.device)

    def draw_steps(self, steps: Sequence[StepStats]) -> None:
        self.plots.add_steps(steps)
        if steps:
            self.device_panel.show_live(live_line(steps[-1]))

    def draw_epoch(self, stats: EpochStats) -> None:
        self.plots.add_epoch(stats)

    def draw_sample(self, sample: ProfileSample) -> None:
        self.breakdown.add_sample(sample)

    def draw_findings(self, findings: Sequence[Finding]) -> None:
        self.breakdown.set_findings(findings)

    def draw_run_ended(self, event: RunEnded) -> None:
        self.live.free_message_height()

    def draw_sequence_event(self, event: Any) -> None:
        self.experiments.handle(event)

    def mark_release(self, release: MemoryRelease) -> None:
        self.plots.mark_release(release)

    def mark_refused(self, config: RunConfig, reason: str) -> None:
        self.form.show_refused(config, reason)

    def history_changed(self) -> None:
        self.runs_tab.refresh()

    def run_in_background(self, function: Callable[[], Any], done: Callable[[Any], None],
                          failed: Callable[[Exception], None]) -> None:
        call_in_background(self, function, done, failed)

    def close_window(self) -> None:
        self.close()

    # == persistence and closing ================================================================
    def _restore_window(self) -> None:
        geometry = stored_bytes(self._settings, SETTINGS_GEOMETRY)
        if geometry is not None:
            self.restoreGeometry(geometry)
        else:
            available = self.screen().availableGeometry()
            self.resize(min(1440, available.width() - 40), min(900, available.height() - 60))
        splitter = stored_bytes(self._settings, SETTINGS_SPLITTER)
        if splitter is not None:
            self.splitter.restoreState(splitter)
        x_axis = self._settings.value(SETTINGS_X_AXIS)
        if isinstance(x_axis, str) and x_axis in X_AXES:
            self.plots.set_x_axis(x_axis)

    def save_settings(self) -> None:
        save_config(self._settings, self.form.config())
        store_bytes(self._settings, SETTINGS_GEOMETRY, self.saveGeometry())
        store_bytes(self._settings, SETTINGS_SPLITTER, self.splitter.saveState())
        self._settings.set_value(SETTINGS_X_AXIS, self.plots.x_axis)
        self._settings.save()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt's name)
        if not self.controller.request_close():
            # Stop first and close once the thread has ended: never destroy a running QThread.
            event.ignore()
            return
        self.save_settings()
        self.trace_tab.shutdown()
        self.plots.redraw_timer.stop()
        if self._collects_garbage:
            self._collects_garbage = False
            garbage.window_closed()
        event.accept()
