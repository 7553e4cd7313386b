"""What the run will train on: the GPU's facts, or a banner that says this is CPU mode and why.

While the device is being probed (importing torch takes seconds on a cold start) the panel says so,
with a busy bar and the seconds so far, so a user sees the app working; the form is usable meanwhile.
"""

from __future__ import annotations

import time
from typing import Optional

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QVBoxLayout, QWidget

from workbench.device_info import DeviceInfo
from workbench.formatting import format_bytes

PROBING_DETAILS = "Importing PyTorch and looking for a CUDA GPU (a few seconds on the first start). " \
                  "You can set up the run meanwhile."


class DevicePanel(QFrame):
    """States (the ``state`` property, for the stylesheet): probing, gpu, cpu, error."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setObjectName("devicePanel")
        self.title = QLabel()
        self.title.setObjectName("deviceTitle")
        self.details = QLabel()
        self.details.setObjectName("deviceDetails")
        self.details.setWordWrap(True)
        # NVML's telemetry during a run (workbench.telemetry_text.live_line); hidden without one.
        self.live = QLabel()
        self.live.setObjectName("deviceLive")
        self.live.setWordWrap(True)
        self.live.setVisible(False)
        self.busy = QProgressBar()
        self.busy.setObjectName("deviceProbeBusy")
        self.busy.setRange(0, 0)  # indeterminate: torch's import reports no progress
        self.busy.setTextVisible(False)
        self.busy.setMaximumHeight(6)
        self._text = QVBoxLayout()
        self._text.setSpacing(2)
        self._text.addWidget(self.title)
        self._text.addWidget(self.details)
        self._text.addWidget(self.live)
        self._text.addWidget(self.busy)
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(12, 6, 12, 6)
        self._layout.addLayout(self._text, 1)
        self._probe_started = time.monotonic()
        self._elapsed_timer = QTimer(self)
        self._elapsed_timer.setInterval(1000)
        self._elapsed_timer.timeout.connect(self._show_elapsed)
        self.show_probing()

    def add_side_widget(self, widget: QWidget) -> None:
        """A widget at the panel's right (the release-memory control: it belongs with the device)."""
        self._layout.addWidget(widget)

    def show_probing(self) -> None:
        self._probe_started = time.monotonic()
        self._set("probing", "Checking the device…", PROBING_DETAILS)
        self._elapsed_timer.start()

    def _show_elapsed(self) -> None:
        seconds = int(time.monotonic() - self._probe_started)
        self.details.setText(f"{PROBING_DETAILS} ({seconds} s)")

    def show_device(self, device: DeviceInfo) -> None:
        versions = f"torch {device.torch_version}"
        if device.cuda_version:
            versions += f" (CUDA {device.cuda_version})"
        versions += f" · Python {device.python_version}"
        if device.type == "cuda":
            facts = [f"compute capability {device.compute_capability}",
                     f"{format_bytes(device.total_memory_bytes)} VRAM",
                     f"driver {device.driver_version or 'unknown'}",
                     versions,
                     "bf16 native" if device.bf16_supported else "no native bf16"]
            self._set("gpu", f"GPU: {device.name}", " · ".join(facts))
        else:
            title = "CPU mode: no CUDA GPU found" if not device.cuda_available else "CPU mode: device=cpu"
            # The reason often repeats the title ("no CUDA GPU found: …"); keep only what it adds.
            extra = (device.cpu_fallback_reason or "").removeprefix("no CUDA GPU found").lstrip(": ")
            self._set(
                "cpu",
                title,
                (f"{extra[0].upper()}{extra[1:]}. " if extra else "")
                + f"Training runs on {device.name}; the memory plot shows this process's resident memory and "
                f"fp16/bf16 are unavailable. {versions}",
            )

    def show_live(self, line: Optional[str]) -> None:
        """The latest log window's telemetry line; None hides it (a CPU run, or NVML read nothing)."""
        self.live.setText(line or "")
        self.live.setVisible(bool(line))

    def show_error(self, message: str) -> None:
        self._set("error", "Could not query the device", message)

    def _set(self, state: str, title: str, details: str) -> None:
        if state != "probing":
            self._elapsed_timer.stop()
        self.busy.setVisible(state == "probing")
        self.setProperty("state", state)
        self.style().unpolish(self)
        self.style().polish(self)
        self.title.setText(title)
        self.details.setText(details)
        self.setToolTip(f"{title}\n{details}")
