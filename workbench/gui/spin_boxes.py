"""Spin boxes that never silently change what was typed.

A plain QSpinBox refuses the keystroke that takes a number past its maximum, so typing 70000 into a
field whose maximum is 65,536 leaves 7,000 without a word, and a QDoubleSpinBox quietly reverts an
out-of-range number when editing ends. These keep the typed number visible, say at once that it is
out of range, and when editing ends set the nearest allowed value and say so (``range_notice``). The
notice lasts while it is true: once the value moves off the limit it was set to, it is withdrawn.
"""

from __future__ import annotations

from typing import Optional, Union

from PySide6.QtCore import QSignalBlocker, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QAbstractSpinBox, QDoubleSpinBox, QSpinBox, QWidget

Number = Union[int, float]


class _RangeNotices:
    """The shared part: call ``_checked`` from validate() and ``_clamped`` from fixup()."""

    range_notice: Signal  # str: what happened to an out-of-range entry; "" once there is nothing to say
    out_of_range_typed: bool
    _label: str
    _notice: str
    _clamped_to: Optional[Number]

    def _init_notices(self, label: str) -> None:
        self._label = label
        self._notice = ""
        self._clamped_to = None
        self.out_of_range_typed = False  # the text shows a number out of range, not yet set to the limit
        self.setCorrectionMode(QAbstractSpinBox.CorrectionMode.CorrectToNearestValue)  # type: ignore[attr-defined]
        self.valueChanged.connect(self.value_shown)  # type: ignore[attr-defined]

    def value_shown(self, value: Number) -> None:
        """The box holds ``value`` now (also call it after a write with signals blocked): a "set to the limit"
        notice about another value is no longer true."""
        if self._clamped_to is not None and value != self._clamped_to and not self.out_of_range_typed:
            self._clamped_to = None
            self._say("")

    def _parse(self, text: str) -> Optional[Number]:
        raise NotImplementedError

    def _format(self, value: Number) -> str:
        raise NotImplementedError

    def _bounds(self) -> tuple[Number, Number]:
        return self.minimum(), self.maximum()  # type: ignore[attr-defined]

    def _checked(self, state: QValidator.State, text: str) -> QValidator.State:
        typed = self._parse(text)
        if typed is None:
            return state
        low, high = self._bounds()
        if typed < low or typed > high:
            limit = low if typed < low else high
            self._clamped_to = None
            self.out_of_range_typed = True
            self._say(f"{self._label}: {self._format(typed)} is {'below the smallest' if typed < low else 'above the largest'}"
                      f" allowed, {self._format(limit)}; it will be set to {self._format(limit)}.")
            return QValidator.State.Intermediate
        self.out_of_range_typed = False
        if typed != self._clamped_to:
            self._say("")
        return state

    def _clamped(self, text: str) -> Optional[str]:
        typed = self._parse(text)
        if typed is None:
            return None
        low, high = self._bounds()
        if low <= typed <= high:
            return None
        limit = low if typed < low else high
        self._clamped_to = limit
        self.out_of_range_typed = False
        self._say(f"{self._label}: {self._format(typed)} is {'below the smallest' if typed < low else 'above the largest'} "
                  f"allowed, {self._format(limit)}: set to {self._format(limit)}.")
        return self.textFromValue(limit)  # type: ignore[attr-defined]

    def _say(self, notice: str) -> None:
        if notice != self._notice:
            self._notice = notice
            self.range_notice.emit(notice)

    @property
    def notice(self) -> str:
        return self._notice


class IntSpinBox(_RangeNotices, QSpinBox):
    range_notice = Signal(str)

    def __init__(self, label: str, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self._init_notices(label)

    def _parse(self, text: str) -> Optional[int]:
        body = text.strip()
        if not body or (self.specialValueText() and body == self.specialValueText()):
            return None
        for separator in (self.locale().groupSeparator(), ",", "_", " "):
            body = body.replace(separator, "")
        try:
            return int(body)
        except ValueError:
            return None

    def _format(self, value: Number) -> str:
        return f"{int(value):,}"

    def validate(self, text: str, position: int) -> object:
        state, text, position = super().validate(text, position)
        return self._checked(state, text), text, position

    def fixup(self, text: str) -> str:
        clamped = self._clamped(text)
        return clamped if clamped is not None else super().fixup(text)


class FloatSpinBox(_RangeNotices, QDoubleSpinBox):
    """Shows 5e-04 and 0.05 rather than 0.000500 and 0.050000, and accepts either when typed."""

    range_notice = Signal(str)

    def __init__(self, label: str = "Value", parent: Optional[QWidget] = None):
        super().__init__(parent)
        self._init_notices(label)
        # Qt rounds every value to this many decimals: at 10, a weight decay of 1e-11 came back 0 and 1/30 came back
        # 0.0333333333. 323, Qt's largest, keeps every double a setting holds; the text is formatted by textFromValue.
        self.setDecimals(323)
        self.setStepType(QDoubleSpinBox.StepType.AdaptiveDecimalStepType)

    def stepBy(self, steps: int) -> None:
        """An arrow's step lands on the number its digits say: 0.05 + 0.001 is 0.051, not 0.051000000000000004."""
        before = self.value()
        with QSignalBlocker(self):
            super().stepBy(steps)
            stepped = self.value()
            self.setValue(before)
        self.setValue(float(f"{stepped:.15g}"))

    def textFromValue(self, value: float) -> str:
        return f"{value:.6g}"

    def valueFromText(self, text: str) -> float:
        try:
            return float(text)
        except ValueError:
            return self.value()

    def _parse(self, text: str) -> Optional[float]:
        try:
            return float(text)
        except ValueError:
            return None

    def _format(self, value: Number) -> str:
        return f"{value:g}"

    def validate(self, text: str, position: int) -> object:
        typed = self._parse(text)
        if typed is None:
            return QValidator.State.Intermediate, text, position
        return self._checked(QValidator.State.Acceptable, text), text, position

    def fixup(self, text: str) -> str:
        clamped = self._clamped(text)
        return clamped if clamped is not None else text
