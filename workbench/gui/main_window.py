"""The main window: settings on the left, device facts and live plots on the right, controls below.

It wires the pieces together and holds no truth of its own: the form makes the RunConfig, the
RunSession trains it on a QThread, the plots draw what the session reports.
"""

from __future__ import annotations

from typing import Callable, Optional, Protocol

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.config import ConfigError, RunConfig
from workbench.engine.events import (
    DeviceInfo,
    EpochStats,
    Event,
    MemoryRelease,
    RunEnded,
    RunStarted,
    StatusChanged,
    StepStats,
)
from workbench.gui import run_messages
from workbench.gui.background import BackgroundCall
from workbench.gui.device_panel import DevicePanel
from workbench.gui.engine_calls import engine_preview, engine_probe, engine_release, engine_run
from workbench.gui.plots import PlotsPanel
from workbench.gui.series import X_AXES
from workbench.gui.sample_view import PreviewFunction, SampleView
from workbench.gui.settings_form import SettingsForm
from workbench.gui.worker import RunFunction, RunSession
from workbench.history.naming import run_name
from workbench.paths import gui_settings_file

ProbeFunction = Callable[[], DeviceInfo]
ReleaseFunction = Callable[[], MemoryRelease]
CPU_MEMORY_NOTE = "<b>CPU mode:</b> the GPU figures (torch, NVML) need a CUDA GPU."

SETTINGS_CONFIG = "run/config"
SETTINGS_GEOMETRY = "window/geometry"
SETTINGS_SPLITTER = "window/splitter"
SETTINGS_X_AXIS = "plots/x_axis"

# Why the release button is disabled, in words shown beside it (short) and in its tooltip (whole).
RELEASE_CHECKING = ("Checking the device…", "Checking the device…")
RELEASE_ON_CPU = ("No CUDA cache on a CPU",
                  "CPU mode: there is no CUDA cache to release (torch's caching allocator is only used on a GPU)")
RELEASE_DURING_RUN = ("Disabled while training",
                      "Disabled while a run trains: a release synchronises the GPU and stalls that log window, "
                      "so its images/sec and data-wait figures would not mean what they say, and the running "
                      "training takes the memory straight back. Release it after the run.")


def home_settings() -> QSettings:
    """The GUI's own settings (last run's config, window geometry), kept in the workbench home: a fresh
    --home or WORKBENCH_HOME starts fresh, as its history does."""
    return QSettings(str(gui_settings_file()), QSettings.Format.IniFormat)


def load_config(settings: QSettings) -> tuple[RunConfig, Optional[str]]:
    """The last run's settings, or the defaults with a note when the stored ones no longer fit."""
    stored = settings.value(SETTINGS_CONFIG)
    if not stored:
        return RunConfig(), None
    try:
        return RunConfig.from_json(str(stored)), None
    except ConfigError as error:
        return RunConfig(), f"Saved settings were out of date and were reset to the defaults ({error})."


class Recorder(Protocol):
    def record(self, event: Event) -> None: ...


RecorderFactory = Callable[[RunConfig], Recorder]


class MainWindow(QMainWindow):
    """``recorder_factory(config)``, if given, is called as each run starts (e.g. the history store's
    ``start_run``); the recorder then gets every event of that run, in order, on the GUI thread."""

    def __init__(
        self,
        settings: Optional[QSettings] = None,
        run_function: RunFunction = engine_run,
        probe_function: ProbeFunction = engine_probe,
        release_function: ReleaseFunction = engine_release,
        preview_function: PreviewFunction = engine_preview,
        recorder_factory: Optional[RecorderFactory] = None,
    ):
        super().__init__()
        self.setObjectName("mainWindow")
        self.setWindowTitle("GPU Training Workbench")
        self._settings = settings if settings is not None else home_settings()
        self._probe_function = probe_function
        self._release_function = release_function
        self._recorder_factory = recorder_factory
        self._recorder: Optional[Recorder] = None
        self._history_error: Optional[str] = None
        self._device: Optional[DeviceInfo] = None
        self._runs_started = 0
        self._previous_config: Optional[RunConfig] = None
        self._close_when_finished = False
        self._probe_call: Optional[BackgroundCall] = None
        self._release_call: Optional[BackgroundCall] = None
        self._release_outcome = ""  # what the last release did, shown beside the button when it is usable

        config, settings_note = load_config(self._settings)
        self.session = RunSession(run_function, parent=self)
        self.form = SettingsForm(config)
        self.device_panel = DevicePanel()
        self.plots = PlotsPanel()
        self.sample_view = SampleView(preview_function)
        self.sample_view.set_config(config)
        self._build_layout()
        self._connect()
        self._restore_window()
        self._update_controls()
        self.status_line.setText(settings_note or "Ready. Set the knobs and press Start.")

    # -- assembly ----------------------------------------------------------------------------
    def _build_layout(self) -> None:
        self.form.setMinimumWidth(330)

        # One line of news above the plots: what is running (and the engine's notes), then the outcome.
        # Its height stays fixed while a run goes: a relayout would repaint every plot at once.
        self.run_message = QLabel("Press Start to train with these settings; the plots fill in as the run goes.")
        self.run_message.setObjectName("runMessage")
        self.run_message.setProperty("status", "idle")
        self.run_message.setWordWrap(True)
        self.run_message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._message_height = 2 * self.run_message.fontMetrics().lineSpacing() + 14
        self.run_message.setMinimumHeight(self._message_height)
        live = QWidget()
        live_layout = QVBoxLayout(live)
        live_layout.addWidget(self.run_message)
        live_layout.addWidget(self.plots, 1)

        self.runs_tab = QWidget()
        self.runs_tab.setObjectName("runsTab")
        runs_layout = QVBoxLayout(self.runs_tab)
        self.runs_placeholder = QLabel("The run history appears here.")
        self.runs_placeholder.setObjectName("runsPlaceholder")
        self.runs_placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        runs_layout.addWidget(self.runs_placeholder)

        self.tabs = QTabWidget()
        self.tabs.setObjectName("mainTabs")
        self.tabs.addTab(live, "Live")
        self.tabs.addTab(self.sample_view, "Sample batch")
        self.tabs.addTab(self.runs_tab, "Runs")
        self.tabs.setTabToolTip(0, "Loss, throughput, memory and data wait of the current run, over earlier runs")
        self.tabs.setTabToolTip(1, "The images the current settings feed the model, after augmentation")
        self.tabs.setTabToolTip(2, "Every run so far, to compare and export")

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

        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("startButton")
        self.start_button.setDefault(True)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setToolTip("Stop after the current step (Ctrl+.): the run is kept as stopped")
        self.progress = QProgressBar()
        self.progress.setObjectName("progressBar")
        self.progress.setTextVisible(True)
        self.progress.setFormat("No run yet")
        self.progress.setValue(0)
        self.progress.setToolTip("Epoch, step, estimated time left and the latest images/sec of the current run")
        self.progress.setProperty("status", "idle")
        # The release control sits with the device it acts on; why it is disabled is said beside it.
        self.release_button = QPushButton("Release cached memory")
        self.release_button.setObjectName("releaseMemoryButton")
        self.release_result = QLabel()
        self.release_result.setObjectName("releaseResult")
        self.release_result.setWordWrap(True)
        self.release_result.setMaximumWidth(190)
        self.release_result.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        release_box = QWidget()
        release_box.setObjectName("releaseBox")
        release_layout = QVBoxLayout(release_box)
        release_layout.setContentsMargins(0, 0, 0, 0)
        release_layout.setSpacing(2)
        release_layout.addWidget(self.release_button)
        release_layout.addWidget(self.release_result)
        release_layout.addStretch(1)
        self.device_panel.add_side_widget(release_box)
        controls = QHBoxLayout()
        controls.addWidget(self.start_button)
        controls.addWidget(self.stop_button)
        controls.addWidget(self.progress, 1)

        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(8, 8, 8, 4)
        layout.addWidget(self.splitter, 1)
        layout.addLayout(controls)
        self.setCentralWidget(central)

        self.status_line = QLabel()
        self.status_line.setObjectName("statusLine")
        self.status_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.statusBar().addWidget(self.status_line, 1)

    def _connect(self) -> None:
        self.start_button.clicked.connect(self.start_run)
        self.stop_button.clicked.connect(self.stop_run)
        self.release_button.clicked.connect(self.release_memory)
        QShortcut(QKeySequence("Ctrl+Return"), self, activated=self.start_button.click)
        QShortcut(QKeySequence("Ctrl+."), self, activated=self.stop_button.click)
        self.form.config_changed.connect(self._on_config_changed)
        self.session.status_changed.connect(self._on_status)
        self.session.run_started.connect(self._on_run_started)
        self.session.steps.connect(self._on_steps)
        self.session.epoch_ended.connect(self._on_epoch)
        self.session.run_ended.connect(self._on_run_ended)
        self.session.finished.connect(self._on_session_finished)

    def set_runs_view(self, view: QWidget) -> None:
        """Host the run-history view in the Runs tab (replaces the placeholder).

        If the view offers them, its ``overlayRequested([(run id, label, series), …])`` draws the selected
        runs on the plots and its ``loadSettingsRequested(RunConfig)`` fills the form.
        """
        layout = self.runs_tab.layout()
        while layout.count():
            item = layout.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        layout.addWidget(view)
        if hasattr(view, "overlayRequested"):
            view.overlayRequested.connect(lambda overlays: self.plots.set_overlays(overlays, source="history"))
        if hasattr(view, "loadSettingsRequested"):
            view.loadSettingsRequested.connect(self.load_settings)
        if hasattr(view, "refresh"):  # show a run's row as it starts and its figures as it ends
            self.session.run_started.connect(lambda _event: view.refresh())
            self.session.finished.connect(view.refresh)

    def load_settings(self, config: RunConfig) -> None:
        """Fill the form with a run's settings (from the history); ignored while a run is going."""
        if self.session.running:
            self.status_line.setText("Stop the current run before loading other settings.")
            return
        self.form.set_config(config)
        self.status_line.setText("Settings loaded: press Start to rerun them.")

    # -- device ------------------------------------------------------------------------------
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
        self._device = device
        self.device_panel.show_device(device)
        self.form.set_device(device)
        self._set_memory_context(device)
        self._update_controls()

    def _set_memory_context(self, device: DeviceInfo) -> None:
        if device.type == "cuda":
            self.plots.set_memory_context(device.total_memory_bytes)
        else:
            self.plots.set_memory_context(None, CPU_MEMORY_NOTE)

    # -- running -----------------------------------------------------------------------------
    def start_run(self) -> None:
        if self.session.running or self.form.problems():
            return
        config = self.form.config()
        self._runs_started += 1
        self._recorder = None
        self._history_error = None
        if self._recorder_factory is not None:
            try:
                self._recorder = self._recorder_factory(config)
            except Exception as error:  # the run still goes ahead; the user is told it is not recorded
                self._history_failed(error)
        label, key = self._name_run(config)
        self._previous_config = config
        self._save_config(config)
        self.plots.begin_run(label, key)
        self._show_run_message("running", f"Running {label}…")
        self.run_message.setFixedHeight(self._message_height)
        self.progress.setRange(0, 0)  # busy until the run knows its length
        self.progress.setFormat("Starting…")
        self._set_progress_status("running")
        if self._history_error is None:
            self.status_line.setText(f"Starting run {label}…")
        self.session.start(config)
        self._update_controls()

    def _name_run(self, config: RunConfig) -> tuple[str, object]:
        """The run's label and plot key: the history's ("#7 synthetic: num_workers=0", run id 7) when it is
        recorded, so the plots, the Runs tab and the CSV say the same; else named the same way in this window."""
        label, run_id = getattr(self._recorder, "label", None), getattr(self._recorder, "run_id", None)
        if label and run_id is not None:
            return label, run_id
        return f"#{self._runs_started} {run_name(config, self._previous_config)}", f"window run {self._runs_started}"

    def stop_run(self) -> None:
        if self.session.running:
            self.session.request_stop()
            self.stop_button.setEnabled(False)
            self.status_line.setText("Stopping after the current step…")

    def _record(self, events: list[Event]) -> None:
        if self._recorder is None:
            return
        try:
            for event in events:
                self._recorder.record(event)
        except Exception as error:
            self._recorder = None  # one message, not one per event
            self._history_failed(error)

    def _history_failed(self, error: Exception) -> None:
        self._history_error = f"{type(error).__name__}: {error}"
        self.status_line.setText(f"This run is not being recorded in the history: {self._history_error}")

    def _on_status(self, event: StatusChanged) -> None:
        self._record([event])
        self.status_line.setText(event.message)

    def _on_run_started(self, event: RunStarted) -> None:
        self._record([event])
        self.progress.setRange(0, max(1, event.total_steps))
        self.progress.setValue(0)
        epochs = -(-event.total_steps // max(1, event.steps_per_epoch))  # max_steps may end it early
        self.progress.setFormat(f"Epoch 1/{epochs} · step 0/{event.total_steps:,}")
        self.status_line.setText(run_messages.started_text(event))
        notes = " · ".join(event.notes)
        self._show_run_message("running", f"Running {self.plots.run_label}." + (f" Notes: {notes}" if notes else ""))
        self._set_memory_context(event.device)

    def _on_steps(self, steps: list[StepStats]) -> None:
        self._record(steps)
        self.plots.add_steps(steps)
        last = steps[-1]
        self.progress.setMaximum(max(1, last.total_steps))
        self.progress.setValue(last.step)
        self.progress.setFormat(run_messages.progress_text(last))

    def _on_epoch(self, stats: EpochStats) -> None:
        self._record([stats])
        self.plots.add_epoch(stats)
        self.status_line.setText(run_messages.epoch_text(stats))

    def _on_run_ended(self, event: RunEnded) -> None:
        self._record([event])
        self._recorder = None
        text = run_messages.ended_text(event)
        history_note = f" (not recorded in the history: {self._history_error})" if self._history_error else ""
        self.status_line.setText(text + history_note)
        if self.progress.maximum() == 0:  # ended before RunStarted: leave the busy state
            self.progress.setRange(0, 1)
            self.progress.setValue(0)  # a value below the range would hide the text
        self.progress.setFormat(event.status.capitalize())
        self._set_progress_status(event.status)
        if event.status == "finished":
            self.progress.setValue(self.progress.maximum())
        self.run_message.setMaximumHeight(16_777_215)  # QWIDGETSIZE_MAX: a long failure reason may wrap
        # The verdict says what bounded the run: the one line a user should read first after the figures.
        verdict = f"\n{event.summary.verdict}" if event.status != "failed" and event.summary.verdict else ""
        self._show_run_message(event.status, text + verdict + history_note)

    def _set_progress_status(self, status: str) -> None:
        self.progress.setProperty("status", status)  # the stylesheet colours the fill by it
        self.progress.style().unpolish(self.progress)
        self.progress.style().polish(self.progress)

    def _show_run_message(self, status: str, text: str) -> None:
        if self.run_message.property("status") != status:
            self.run_message.setProperty("status", status)
            self.run_message.style().unpolish(self.run_message)  # re-apply the [status=…] style rule
            self.run_message.style().polish(self.run_message)
        self.run_message.setText(text)
        self.run_message.setToolTip(text)

    def _on_session_finished(self) -> None:
        self._update_controls()
        if self._close_when_finished:
            self.close()

    # -- memory ------------------------------------------------------------------------------
    def release_memory(self) -> None:
        if self._release_call is not None and self._release_call.running:
            return
        self.release_button.setEnabled(False)
        self._release_outcome = "Releasing…"
        self.release_result.setText(self._release_outcome)
        self._release_call = BackgroundCall(self._release_function)
        self._release_call.succeeded.connect(self._on_released)
        self._release_call.failed.connect(self._on_release_failed)
        self._release_call.start()

    def _on_released(self, release: MemoryRelease) -> None:
        self._release_outcome = release.message
        self.status_line.setText(f"Released cached memory: {release.message}")
        self.plots.mark_release(release)
        self._update_controls()

    def _on_release_failed(self, error: Exception) -> None:
        self._release_outcome = f"Release failed: {error}"
        self._update_controls()

    # -- state -------------------------------------------------------------------------------
    def _on_config_changed(self, config: RunConfig) -> None:
        self.sample_view.set_config(config)
        self._update_controls()

    def _update_controls(self) -> None:
        running = self.session.running
        problems = self.form.problems()
        self.form.set_editable(not running)
        self.start_button.setEnabled(not running and not problems)
        if running:
            self.start_button.setToolTip("A run is in progress")
        elif problems:
            self.start_button.setToolTip("Cannot start:\n• " + "\n• ".join(problems))
        else:
            self.start_button.setToolTip("Train with these settings (Ctrl+Return)")
        if not running:
            self.stop_button.setEnabled(False)
        elif not self._close_when_finished:
            self.stop_button.setEnabled(True)

        releasing = self._release_call is not None and self._release_call.running
        if self._device is None:
            disabled = RELEASE_CHECKING
        elif not self._device.cuda_available:
            disabled = RELEASE_ON_CPU
        elif running:
            disabled = RELEASE_DURING_RUN
        else:
            disabled = None
        self.release_button.setEnabled(disabled is None and not releasing)
        if disabled is not None:
            self.release_result.setText(disabled[0])
            self.release_button.setToolTip(disabled[1])
            self.release_result.setToolTip(disabled[1])
        else:
            self.release_result.setText(self._release_outcome)
            self.release_result.setToolTip("")
            self.release_button.setToolTip(
                "Give the blocks torch's CUDA allocator keeps cached back to the driver (torch.cuda.empty_cache). "
                "Frees memory for other processes; a new run fills the cache again.")

    # -- persistence and closing -------------------------------------------------------------
    def _save_config(self, config: RunConfig) -> None:
        self._settings.setValue(SETTINGS_CONFIG, config.to_json())

    def _restore_window(self) -> None:
        geometry = self._settings.value(SETTINGS_GEOMETRY)
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            available = self.screen().availableGeometry()
            self.resize(min(1440, available.width() - 40), min(900, available.height() - 60))
        splitter = self._settings.value(SETTINGS_SPLITTER)
        if isinstance(splitter, QByteArray) and not splitter.isEmpty():
            self.splitter.restoreState(splitter)
        x_axis = self._settings.value(SETTINGS_X_AXIS)
        if isinstance(x_axis, str) and x_axis in X_AXES:
            self.plots.set_x_axis(x_axis)

    def save_settings(self) -> None:
        self._save_config(self.form.config())
        self._settings.setValue(SETTINGS_GEOMETRY, self.saveGeometry())
        self._settings.setValue(SETTINGS_SPLITTER, self.splitter.saveState())
        self._settings.setValue(SETTINGS_X_AXIS, self.plots.x_axis)
        self._settings.sync()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt's name)
        if self.session.running:
            # Stop first and close once the thread has ended: never destroy a running QThread.
            self._close_when_finished = True
            self.session.request_stop()
            self.stop_button.setEnabled(False)
            self.status_line.setText("Stopping the run before closing…")
            event.ignore()
            return
        self.save_settings()
        self.plots.redraw_timer.stop()
        event.accept()

