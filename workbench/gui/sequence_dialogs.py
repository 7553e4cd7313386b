"""The small dialogs that start a sequence of runs: a sweep (one or two settings over their values, and
how long each member trains), the search for faster settings (what it may change, a time budget), and
the largest-batch search (an optional memory budget). Values are read by experiments.values, as the
CLI reads --values: the same text is accepted and refused in the same words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from workbench.config import CHOICES, FIELD_NAMES, SETTINGS, RunConfig
from workbench.experiments.rounds import MAX_REPEATS
from workbench.experiments.sweep import SweepAxis
from workbench.experiments.values import parse_values
from workbench.formatting import format_setting

# The settings people sweep most, first; every other setting follows.
COMMON_SWEEPS = ("num_workers", "batch_size", "precision", "pipeline", "augment", "pin_memory", "channels_last",
                 "prefetch_factor", "accumulation_steps", "model", "lr", "compile")


@dataclass(frozen=True)
class SweepRequest:
    axes: tuple[SweepAxis, ...]
    length: dict[str, Any]  # {"max_steps": 40} or {"epochs": 1, "max_steps": None}
    repeats: int = 1  # runs of each value, interleaved


def suggested_values(name: str, config: RunConfig) -> str:
    """A starting list for a setting: its choices, on/off, or a few values around the current one."""
    if name in CHOICES:
        return ",".join(CHOICES[name])
    current = getattr(config, name)
    if isinstance(current, bool):
        return "off,on"
    if name == "num_workers":
        return "0,1,2,4"
    if isinstance(current, int) and current > 0:
        return ",".join(str(value) for value in (max(1, current // 2), current, current * 2))
    if isinstance(current, float) and current > 0:
        return ",".join(format_setting(value) for value in (current / 2, current, current * 2))
    return format_setting(current)


class _AxisRow(QWidget):
    def __init__(self, name: str, config: RunConfig, first: str):
        super().__init__()
        self.config = config
        self.field = QComboBox()
        self.field.setObjectName(f"{name}Field")
        for field in (*COMMON_SWEEPS, *(f for f in FIELD_NAMES if f not in COMMON_SWEEPS)):
            self.field.addItem(field, field)
            self.field.setItemData(self.field.count() - 1, SETTINGS[field].help if field in SETTINGS else "",
                                   Qt.ItemDataRole.ToolTipRole)
        self.values = QLineEdit()
        self.values.setObjectName(f"{name}Values")
        self.values.setPlaceholderText("comma-separated values")
        self.field.currentIndexChanged.connect(self._suggest)
        self.field.setCurrentIndex(max(0, self.field.findData(first)))
        self._suggest()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.field)
        layout.addWidget(self.values, 1)

    def _suggest(self) -> None:
        self.values.setText(suggested_values(self.field.currentData(), self.config))

    def axis(self) -> tuple[Optional[SweepAxis], list[str]]:
        name = self.field.currentData()
        values, problems = parse_values(name, self.values.text())
        return (SweepAxis(name, values) if values and not problems else None), problems


class SweepDialog(QDialog):
    """One setting over a list of values, optionally a second one (a grid), each member a run of this length."""

    def __init__(self, config: RunConfig, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("sweepDialog")
        self.setWindowTitle("Sweep a setting")
        self.first = _AxisRow("sweepFirst", config, "num_workers")
        self.second_check = QCheckBox("and a second setting (every combination)")
        self.second_check.setObjectName("sweepSecondCheck")
        self.second = _AxisRow("sweepSecond", config, "precision")
        self.second.setEnabled(False)
        self.second_check.toggled.connect(self.second.setEnabled)
        self.by_steps = QRadioButton("steps")
        self.by_steps.setChecked(True)
        self.by_epochs = QRadioButton("epochs (test accuracy compares)")
        self.steps = QSpinBox()
        self.steps.setObjectName("sweepSteps")
        self.steps.setRange(4, 1_000_000)
        self.steps.setValue(60)
        self.epochs = QSpinBox()
        self.epochs.setObjectName("sweepEpochs")
        self.epochs.setRange(1, 1000)
        self.epochs.setValue(1)
        length = QHBoxLayout()
        for widget in (self.steps, self.by_steps, self.epochs, self.by_epochs):
            length.addWidget(widget)
        length.addStretch(1)
        self.repeats = QSpinBox()
        self.repeats.setObjectName("sweepRepeats")
        self.repeats.setRange(1, MAX_REPEATS)
        self.repeats.setValue(1)
        self.repeats.setToolTip("Run every value this many times, interleaved (a b a b …): each value then shows the "
                                "median of its runs with error bars for its interval (3 or more runs), and the "
                                "fastest is compared with the runner-up beyond the noise")
        self.problems = QLabel()
        self.problems.setObjectName("sweepProblems")
        self.problems.setWordWrap(True)
        self.problems.setStyleSheet("color: #b71c1c;")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Run sweep")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        for edit in (self.first.values, self.second.values):
            edit.textChanged.connect(self._check)
        self.second_check.toggled.connect(self._check)

        form = QFormLayout()
        form.addRow("Setting", self.first)
        form.addRow("", self.second_check)
        form.addRow("Second setting", self.second)
        form.addRow("Each member trains", length)
        form.addRow("Runs of each value", self.repeats)
        layout = QVBoxLayout(self)
        intro = QLabel("Every member is an ordinary run with the form's settings and these values, checked "
                       "before the first starts; Stop ends the whole sweep.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.problems)
        layout.addWidget(self.buttons)
        self._check()

    def request(self) -> tuple[Optional[SweepRequest], list[str]]:
        rows = [self.first] + ([self.second] if self.second_check.isChecked() else [])
        axes, problems = [], []
        for row in rows:
            axis, found = row.axis()
            problems += found
            if axis is not None:
                axes.append(axis)
        if len(rows) == 2 and self.first.field.currentData() == self.second.field.currentData():
            problems.append("the second setting must differ from the first")
        if problems:
            return None, problems
        if self.by_steps.isChecked():
            length: dict[str, Any] = {"max_steps": self.steps.value()}
        else:
            length = {"epochs": self.epochs.value(), "max_steps": None}
        return SweepRequest(tuple(axes), length, self.repeats.value()), []

    def _check(self) -> None:
        _, problems = self.request()
        self.problems.setText("\n".join(problems))
        self.problems.setVisible(bool(problems))
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(not problems)


@dataclass(frozen=True)
class TuneRequest:
    allow: frozenset[str]
    budget_seconds: Optional[float]


class TuneDialog(QDialog):
    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("tuneDialog")
        self.setWindowTitle("Find faster settings")
        intro = QLabel("Tries the settings that change speed but not what is learned (pipeline and augmentation "
                       "placement, workers, pin_memory, precision, channels_last, compile…), one at a time from "
                       "the form's settings, in short runs: each change runs 3 times interleaved with the best "
                       "settings so far (6 runs a change) and is kept only when the 90 % interval of its speed-up "
                       "lies above 1.02×. Every trial is kept in the history.")
        intro.setWordWrap(True)
        self.allow = {}
        for name, text in (("batch_size", "batch size"), ("lr", "learning rate (follows the batch size)"),
                           ("accumulation_steps", "gradient accumulation")):
            check = QCheckBox(f"May change the {text}")
            check.setObjectName(f"tuneAllow_{name}")
            check.setToolTip("These change what is learned: left alone unless ticked")
            self.allow[name] = check
        self.budget = QDoubleSpinBox()
        self.budget.setObjectName("tuneBudget")
        self.budget.setRange(0, 24 * 3600)
        self.budget.setDecimals(0)
        self.budget.setSuffix(" s")
        self.budget.setSpecialValueText("no limit")
        self.budget.setValue(300)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Search")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        for check in self.allow.values():
            layout.addWidget(check)
        budget = QFormLayout()
        budget.addRow("Time budget", self.budget)
        layout.addLayout(budget)
        layout.addWidget(buttons)

    def request(self) -> TuneRequest:
        allow = frozenset(name for name, check in self.allow.items() if check.isChecked())
        return TuneRequest(allow, self.budget.value() or None)


class MaxBatchDialog(QDialog):
    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("maxBatchDialog")
        self.setWindowTitle("Largest batch that fits")
        intro = QLabel("Doubles the batch from the form's until CUDA runs out of memory, then binary-searches the "
                       "largest size that fits, with the form's model, precision, memory format and compile; a few "
                       "real training steps per size, the memory released after each.")
        intro.setWordWrap(True)
        self.budget = QDoubleSpinBox()
        self.budget.setObjectName("maxBatchBudget")
        self.budget.setRange(0, 4096)
        self.budget.setDecimals(1)
        self.budget.setSuffix(" GiB")
        self.budget.setSpecialValueText("the whole device")
        self.budget.setToolTip("A size whose peak reserved memory passes this budget does not fit")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Search")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow("Memory budget", self.budget)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def budget_bytes(self) -> Optional[int]:
        return int(self.budget.value() * 2**30) or None
