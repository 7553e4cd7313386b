"""The training engine: pure Python + torch, never Qt.

``run(config, stop)`` is a generator of the frozen events in ``workbench.engine.events``.
Names are imported lazily so that importing the package (or its events) does not import torch.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "run": "workbench.engine.trainer",
    "release_cached_memory": "workbench.engine.memory",
    "probe_device": "workbench.engine.device",
    "preview_batch": "workbench.engine.datasets",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'workbench.engine' has no attribute {name!r}")
