"""What the benchmark scripts share: the machine's description, a time bound, and writing results."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any, Optional

RESULTS = Path(__file__).parent / "results"


def machine(device: Any) -> dict[str, Any]:
    """The machine a figure came from (quote it with the figure)."""
    return {
        "device": device.name,
        "type": device.type,
        "cpu_count": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch": device.torch_version,
        "cuda": device.cuda_version,
        "driver": device.driver_version,
        "python": platform.python_version(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


class Deadline:
    """Unattended runs stop starting new work once the budget is spent (what ran is still written)."""

    def __init__(self, seconds: Optional[float]):
        self.seconds = seconds
        self.began = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def passed(self) -> bool:
        return self.seconds is not None and self.elapsed > self.seconds


def write_results(path: Path, payload: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, default=str))
    return path
