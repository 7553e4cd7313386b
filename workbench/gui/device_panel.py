"""What the run will train on: the GPU's facts, or a banner that says this is CPU mode and why."""

from __future__ import annotations

from typing import Optional

from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from workbench.device_info import DeviceInfo
from workbench.formatting import format_bytes


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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(2)
        layout.addWidget(self.title)
        layout.addWidget(self.details)
        self._set("probing", "Checking the device…", "Importing torch and looking for a CUDA GPU.")

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
                + f"Training runs on {device.name}; the GPU memory plot stays empty and fp16/bf16 are "
                f"unavailable. {versions}",
            )

    def show_error(self, message: str) -> None:
        self._set("error", "Could not query the device", message)

    def _set(self, state: str, title: str, details: str) -> None:
        self.setProperty("state", state)
        self.style().unpolish(self)
        self.style().polish(self)
        self.title.setText(title)
        self.details.setText(details)
        self.setToolTip(f"{title}\n{details}")
