"""The settings form: RunConfig ⇄ widgets, one widget per field, objectName = the field's name.

The form never owns the truth: ``config()`` reads a fresh RunConfig from the widgets and
``set_config()`` writes one into them. What it shows besides the values (tooltips, derived facts,
problems, greyed-out fields, disabled choices) comes from ``settings_model``.
"""

from __future__ import annotations

import html
from functools import partial
from typing import Any, Optional, Sequence, get_args

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QScrollArea,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.config import CHOICES, FIELD_NAMES, FIELD_TYPES, GROUPS, OPTIONAL_FIELDS, RANGES, SETTINGS, RunConfig
from workbench.device_info import DeviceInfo
from workbench.folder_layout import training_image_count
from workbench.gui import settings_model
from workbench.gui.background import call_in_background
from workbench.gui.spin_boxes import FloatSpinBox, IntSpinBox
from workbench.setting_checks import BUILTIN_MODELS

INT32_MAX = 2**31 - 1  # QSpinBox holds a C int: a RunConfig range past it would be cut here
NO_LIMIT = "no limit"
OFF = "off"


class PathField(QWidget):
    """A line edit with a Browse… button; the line edit carries the field's objectName."""

    def __init__(self, name: str, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.edit = QLineEdit()
        self.edit.setObjectName(name)
        self.edit.setPlaceholderText("path to an .npz file, an image folder, or a CIFAR folder")
        self.wants_folder = False  # dataset=folder or CIFAR: Browse… picks a folder, not a file
        self.edit.setClearButtonEnabled(True)
        browse = QToolButton()
        browse.setObjectName(f"{name}Browse")
        browse.setText("Browse…")
        browse.setToolTip("Choose the .npz file, or the folder (dataset=folder, cifar10, cifar100)")
        browse.clicked.connect(self._browse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(browse)

    def _browse(self) -> None:
        if self.wants_folder:
            path = QFileDialog.getExistingDirectory(self, "Choose the folder of images (one sub-folder per class)",
                                                    self.edit.text())
        else:
            path, _ = QFileDialog.getOpenFileName(self, "Choose an .npz dataset", self.edit.text(),
                                                  "NumPy archives (*.npz);;All files (*)")
        if path:
            self.edit.setText(path)


class SettingsForm(QWidget):
    """Emits ``config_changed(RunConfig)`` after every edit; ``problems()`` says what blocks a run."""

    config_changed = Signal(object)

    def __init__(self, config: RunConfig = RunConfig(), parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("settingsForm")
        self._device: Optional[DeviceInfo] = None
        self._editors: dict[str, QWidget] = {}  # the value-holding widget, named after the field
        self._rows: dict[str, tuple[QLabel, QWidget]] = {}  # label and row widget, greyed together
        self._tooltips: dict[str, str] = {}
        self._refused: Optional[tuple[RunConfig, str]] = None  # settings the engine refused, and why
        # An image folder's training images, counted off the GUI thread (listing a large or network folder
        # takes seconds): the folder last counted and its count (None: not readable), and whether a count runs.
        self._folder_count: Optional[tuple[str, Optional[int]]] = None
        self._counting_folder = False

        self._fields = fields_widget = QWidget()
        fields_layout = QVBoxLayout(fields_widget)
        fields_layout.setContentsMargins(0, 0, 4, 0)
        fields_layout.setSpacing(6)
        for group, names in GROUPS.items():
            box = QGroupBox(group.replace("&", "&&"))  # a bare & would mark a keyboard mnemonic
            box.setObjectName(f"group{''.join(word.capitalize() for word in group.split() if word.isalpha())}")
            form = QFormLayout(box)
            form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
            form.setVerticalSpacing(5)
            for name in names:
                row_widget = self._make_editor(name)
                label = QLabel(SETTINGS[name].label)
                label.setBuddy(self._editors[name])
                self._tooltips[name] = f"<b>{name}</b> (--{name.replace('_', '-')})<br>" + (
                    SETTINGS[name].tooltip.replace("\n", "<br>"))
                self._rows[name] = (label, row_widget)
                form.addRow(label, row_widget)
            fields_layout.addWidget(box)
        fields_layout.addStretch(1)
        scroll = self._scroll = QScrollArea()
        scroll.setObjectName("settingsScroll")
        scroll.setWidget(fields_widget)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        self.derived_label = QLabel()
        self.derived_label.setObjectName("derivedFacts")
        self.derived_label.setWordWrap(True)
        self.derived_label.setToolTip("Worked out from the settings above as you change them.")
        # A number typed out of range: said at once, and what it was set to when editing ended.
        self.range_notice_label = QLabel()
        self.range_notice_label.setObjectName("rangeNotice")
        self.range_notice_label.setWordWrap(True)
        self.range_notice_label.setVisible(False)
        self._range_notices: dict[str, str] = {}
        self.problems_label = QLabel()
        self.problems_label.setObjectName("problemsLabel")
        self.problems_label.setWordWrap(True)
        self.problems_label.setTextFormat(Qt.TextFormat.RichText)
        # The fields scroll; what they add up to and what blocks a run stay in view below them.
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.range_notice_label)
        layout.addWidget(self.derived_label)
        layout.addWidget(self.problems_label)

        self.set_config(config)

    # -- the contract ------------------------------------------------------------------------
    def config(self) -> RunConfig:
        return RunConfig(**{name: self._read(name) for name in FIELD_NAMES})

    def set_config(self, config: RunConfig) -> None:
        for name in FIELD_NAMES:
            editor = self._editors[name]
            with QSignalBlocker(editor):
                self._write(name, getattr(config, name))
            if isinstance(editor, (IntSpinBox, FloatSpinBox)):
                editor.value_shown(editor.value())  # a notice about the value it held no longer holds
                if editor.notice != self._range_notices.get(name, ""):  # said while its signals were blocked
                    self._on_range_notice(name, editor.notice)
        self.config_changed.emit(self._refresh())  # once, not once per field

    def set_device(self, device: DeviceInfo) -> None:
        """Once the device is known: disable choices it cannot run, grey out what has no effect."""
        self._device = device
        unavailable = settings_model.unavailable_choices(device)
        for name in settings_model.HARDWARE_FIELDS:
            combo = self._editors[name]
            assert isinstance(combo, QComboBox)
            model = combo.model()
            assert isinstance(model, QStandardItemModel)
            for index, choice in enumerate(CHOICES[name]):
                reason = unavailable.get(name, {}).get(choice)
                item = model.item(index)
                item.setEnabled(reason is None)
                item.setText(choice if reason is None else f"{choice} (unavailable)")
                item.setToolTip(reason or "")
        self._refresh()

    def set_editable(self, editable: bool) -> None:
        """Lock the fields during a run; they stay readable and the list still scrolls."""
        self._fields.setEnabled(editable)

    @property
    def editable(self) -> bool:
        return self._fields.isEnabled()

    def problems(self) -> list[str]:
        return settings_model.problems(self.config(), self._device)

    def editor(self, name: str) -> QWidget:
        return self._editors[name]

    def show_refused(self, config: RunConfig, reason: str) -> None:
        """The engine refused ``config`` when it started (a model spec that gives no model, ...): marked and said
        while the form holds these settings. Start stays open: the fix may be in the user's own module."""
        self._refused = (config, reason)
        self._refresh()
        named = settings_model.fields_named_in(reason, config, self._device)
        first = next((name for name in self._editors if name in named), None)
        if first is not None:  # the field the refusal names, in view: it may sit below the fold
            self._scroll.ensureWidgetVisible(self._editors[first])

    def refused_reason(self) -> Optional[str]:
        """Why the engine refused the settings the form holds now (None when it did not)."""
        if self._refused is None or self._refused[0] != self.config():
            return None
        return self._refused[1]

    # -- widgets per field type --------------------------------------------------------------
    def _make_editor(self, name: str) -> QWidget:
        """The widget for one field; returns the row widget (a PathField wraps the editor)."""
        hint = FIELD_TYPES[name]
        row: QWidget
        if name == "data_path":
            row = self._path_field = PathField(name)
            editor: QWidget = row.edit
            row.edit.textChanged.connect(self._on_edit)
        elif name in CHOICES:
            editor = row = QComboBox()
            for choice in CHOICES[name]:
                editor.addItem(choice, choice)
            editor.currentIndexChanged.connect(self._on_edit)
        elif name == "model":  # typed, or picked from the built-ins (torchvision's names join once torch is loaded)
            editor = row = QComboBox()
            editor.setEditable(True)
            editor.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
            for choice in BUILTIN_MODELS:
                editor.addItem(choice, choice)
            editor.currentTextChanged.connect(self._on_edit)
        elif hint is str:
            editor = row = QLineEdit()
            editor.setPlaceholderText("none")
            editor.textChanged.connect(self._on_edit)
        elif hint is bool:
            editor = row = QCheckBox()
            editor.toggled.connect(self._on_edit)
        elif hint is float or (name in OPTIONAL_FIELDS and float in get_args(hint)):
            editor = row = FloatSpinBox(SETTINGS[name].label)
            low, high = RANGES[name]
            if name in OPTIONAL_FIELDS:  # Optional[float]: 0 below the range means None ("off")
                low = 0.0
                editor.setSpecialValueText(OFF)
            editor.setRange(low, high)
            editor.valueChanged.connect(self._on_edit)
            editor.range_notice.connect(lambda notice, name=name: self._on_range_notice(name, notice))
        else:  # int, or Optional[int]: 0 below the range means None ("no limit")
            editor = row = IntSpinBox(SETTINGS[name].label)
            editor.range_notice.connect(lambda notice, name=name: self._on_range_notice(name, notice))
            low, high = RANGES[name]
            if name in OPTIONAL_FIELDS:
                low -= 1
                editor.setSpecialValueText(NO_LIMIT)
            editor.setRange(int(low), int(min(high, INT32_MAX)))
            editor.setGroupSeparatorShown(True)
            editor.setAccelerated(True)
            editor.valueChanged.connect(self._on_edit)
        editor.setObjectName(name)
        self._editors[name] = editor
        return row

    def add_model_suggestions(self, names: Sequence[str]) -> None:
        """More model names to pick from (torchvision's classification models, once torch is loaded)."""
        combo = self._editors["model"]
        assert isinstance(combo, QComboBox)
        known = {combo.itemText(index) for index in range(combo.count())}
        text = combo.currentText()
        with QSignalBlocker(combo):
            for name in names:
                if name not in known:
                    combo.addItem(name, name)
            combo.setCurrentText(text)

    def _read(self, name: str) -> Any:
        editor = self._editors[name]
        if isinstance(editor, QComboBox) and editor.isEditable():
            return editor.currentText().strip()
        if isinstance(editor, QComboBox):
            return editor.currentData()
        if isinstance(editor, QCheckBox):
            return editor.isChecked()
        if isinstance(editor, QLineEdit):
            return editor.text().strip()
        if (isinstance(editor, (QSpinBox, QDoubleSpinBox)) and name in OPTIONAL_FIELDS
                and editor.value() == editor.minimum()):
            return None
        return editor.value()

    def _write(self, name: str, value: Any) -> None:
        editor = self._editors[name]
        if isinstance(editor, QComboBox) and editor.isEditable():
            editor.setCurrentText(str(value))
        elif isinstance(editor, QComboBox):
            editor.setCurrentIndex(max(0, editor.findData(value)))
        elif isinstance(editor, QCheckBox):
            editor.setChecked(bool(value))
        elif isinstance(editor, QLineEdit):
            editor.setText(str(value))
        elif isinstance(editor, (QSpinBox, QDoubleSpinBox)) and value is None:
            editor.setValue(editor.minimum())
        else:
            editor.setValue(value)  # a spin box clamps out-of-range values; validate() would refuse them

    # -- live feedback -----------------------------------------------------------------------
    def _on_range_notice(self, name: str, notice: str) -> None:
        if notice:
            self._range_notices[name] = notice
        else:
            self._range_notices.pop(name, None)
        self.range_notice_label.setText("\n".join(self._range_notices.values()))
        self.range_notice_label.setVisible(bool(self._range_notices))
        editor = self._editors[name]
        typing = bool(getattr(editor, "out_of_range_typed", False))
        if bool(editor.property("outOfRange")) != typing:  # marked while the typed number cannot be kept
            editor.setProperty("outOfRange", typing)
            editor.style().unpolish(editor)
            editor.style().polish(editor)

    def _show_derived_facts(self, config: RunConfig) -> None:
        counted = self._folder_count[1] if self._folder_count and self._folder_count[0] == config.data_path else None
        counting = config.dataset == "folder" and bool(config.data_path) and (
            self._folder_count is None or self._folder_count[0] != config.data_path)
        self.derived_label.setText(settings_model.derive(config, counted).describe(config, counting))

    def _count_folder_images(self, config: RunConfig) -> None:
        """Count again on every edit (cheap: the count is cached until a directory it read changes), one at a time."""
        if config.dataset != "folder" or not config.data_path or self._counting_folder:
            return
        self._counting_folder = True
        path = config.data_path
        call_in_background(self, partial(training_image_count, path), partial(self._folder_counted, path),
                           self._folder_count_failed)

    def _folder_counted(self, path: str, count: Optional[int]) -> None:
        self._counting_folder = False
        self._folder_count = (path, count)
        config = self.config()
        self._show_derived_facts(config)
        if config.dataset == "folder" and config.data_path != path:  # edited while it counted
            self._count_folder_images(config)

    def _folder_count_failed(self, error: Exception) -> None:
        self._counting_folder = False  # training_image_count returns None for what it cannot read; say nothing more

    @property
    def range_notices(self) -> list[str]:
        return list(self._range_notices.values())

    def _on_edit(self, *_: object) -> None:
        config = self._refresh()
        self.config_changed.emit(config)

    def _refresh(self) -> RunConfig:
        config = self.config()
        self._path_field.wants_folder = config.dataset != "npz"
        inactive = settings_model.inactive_settings(config, self._device)
        notes = settings_model.device_notes(config, self._device)
        cpu = settings_model.on_cpu(config, self._device)
        found = settings_model.problems(config, self._device)
        refused = self.refused_reason()
        flagged: set[str] = set()
        for problem in found + ([refused] if refused else []):
            flagged |= settings_model.fields_named_in(problem, config, self._device)
        for name, (label, row) in self._rows.items():
            reason = inactive.get(name)
            label.setEnabled(reason is None)
            row.setEnabled(reason is None)
            tooltip = self._tooltips[name]
            if reason:
                tooltip += f"<br><br><i>Not used now: {reason}.</i>"
            if name in notes:
                tooltip += f"<br><br><b>On this machine:</b> {notes[name]}."
            label.setToolTip(tooltip)
            self._editors[name].setToolTip(tooltip)
            editor = self._editors[name]
            if isinstance(editor, QCheckBox):  # a greyed box still shows its value: say beside it that it is idle
                idle = settings_model.CPU_SWITCH_TEXT if cpu and name in ("pin_memory", "non_blocking") else (
                    settings_model.INACTIVE_SWITCH_TEXT)
                editor.setText(idle if reason else "")
            if bool(editor.property("invalid")) != (name in flagged):
                editor.setProperty("invalid", name in flagged)
                editor.style().unpolish(editor)  # re-apply the stylesheet's [invalid="true"] rule
                editor.style().polish(editor)
        augment = self._editors["augment"]
        assert isinstance(augment, QComboBox)
        augment.setItemText(augment.findData("gpu"), settings_model.AUGMENT_ON_CPU_TEXT if "augment" in notes else "gpu")
        self._show_derived_facts(config)
        self._count_folder_images(config)
        text = ""
        if found:
            items = "".join(f"<li>{html.escape(problem)}</li>" for problem in found)
            text = f"<b>Cannot start:</b><ul style='margin: 0'>{items}</ul>"
        if refused:
            text += f"<b>Refused when it started:</b> {html.escape(refused)}"
        self.problems_label.setText(text)
        self.problems_label.setVisible(bool(text))
        return config

