"""Which colour is which run: one colour per run for as long as it is shown, and a legend beside the plots.

The legend is a strip above the plots, not a box inside one: it never covers a curve, it names each
run once for all four plots, and it folds away to one line when the runs are many.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Hashable, Optional, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget

# Matplotlib's "tab10" order: the first eight stay well apart (CIE76 ΔE ≥ 20) even as drawn for an
# earlier run (OVERLAY_ALPHA on white). At most nine runs are shown at once (MAX_OVERLAYS + the current).
RUN_COLOURS: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
)
OVERLAY_ALPHA = 215  # earlier runs: a little lighter and thinner than the current one, never washed out
LEGEND_LABEL_CHARS = 48  # longer names are cut with "…" in the strip (whole in its tooltip)


class ColourBook:
    """Gives each shown run the first palette colour no other shown run has, and keeps it while shown."""

    def __init__(self, palette: Sequence[str] = RUN_COLOURS):
        self._palette = tuple(palette)
        self._colours: dict[Hashable, str] = {}
        self._next_reuse = 0

    def colour(self, key: Hashable) -> str:
        if key not in self._colours:
            used = set(self._colours.values())
            free = [colour for colour in self._palette if colour not in used]
            if free:
                self._colours[key] = free[0]
            else:  # more runs than colours: reuse in turn rather than always the first
                self._colours[key] = self._palette[self._next_reuse % len(self._palette)]
                self._next_reuse += 1
        return self._colours[key]

    def release(self, key: Hashable) -> None:
        self._colours.pop(key, None)


@dataclass(frozen=True)
class LegendEntry:
    label: str
    colour: str
    current: bool = False  # the run training now (drawn bold)


class RunLegend(QWidget):
    """A wrapping line of "━ #3 synthetic: num_workers=0" entries, foldable with the arrow button."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("runLegend")
        self.toggle = QToolButton()
        self.toggle.setObjectName("runLegendToggle")
        self.toggle.setCheckable(True)
        self.toggle.setChecked(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.toggled.connect(self._apply_expanded)
        self.entries_label = QLabel()
        self.entries_label.setObjectName("runLegendEntries")
        self.entries_label.setWordWrap(True)
        self.entries_label.setTextFormat(Qt.TextFormat.RichText)
        self.entries_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.entries_label, 1)
        self._entries: list[LegendEntry] = []
        self._hint = ""
        self.set_entries([])

    def set_entries(self, entries: Sequence[LegendEntry], hint: str = "") -> None:
        self._entries, self._hint = list(entries), hint
        count = len(self._entries)
        self.toggle.setText(f"{count} run{'s' if count != 1 else ''}")
        self.toggle.setToolTip("Show or hide the names of the plotted runs")
        self.setVisible(count > 0)
        html = "&nbsp;&nbsp; ".join(self._entry_html(entry) for entry in self._entries)
        if hint:
            html += f"&nbsp;&nbsp; <span style='color:#707070'>{_unbreakable(hint)}</span>"
        self.entries_label.setText(html)
        self.entries_label.setToolTip("\n".join(entry.label for entry in self._entries))
        self._apply_expanded(self.toggle.isChecked())

    def labels(self) -> list[str]:
        return [entry.label for entry in self._entries]

    def entries(self) -> list[LegendEntry]:
        return list(self._entries)

    @property
    def expanded(self) -> bool:
        return self.toggle.isChecked()

    def _apply_expanded(self, expanded: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if expanded else Qt.ArrowType.RightArrow)
        self.entries_label.setVisible(expanded)

    @staticmethod
    def _entry_html(entry: LegendEntry) -> str:
        weight = "bold" if entry.current else "normal"
        swatch = f"<span style='color:{entry.colour}; font-weight:bold'>━━</span>"
        label = entry.label if len(entry.label) <= LEGEND_LABEL_CHARS else entry.label[: LEGEND_LABEL_CHARS - 1] + "…"
        return f"{swatch}&nbsp;<span style='font-weight:{weight}'>{_unbreakable(label)}</span>"


def _unbreakable(text: str) -> str:
    """Lines break between entries, never inside one: no-break spaces, and no-break hyphens (U+2011)
    for file names such as "cifar10-subset" (Qt's rich text ignores white-space: nowrap on a span)."""
    return html.escape(text).replace(" ", "&nbsp;").replace("-", "\u2011")

