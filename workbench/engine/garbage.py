"""Where the engine's explicit cyclic-garbage collections run (no torch, no Qt).

The engine collects before it frees CUDA memory (a failed run's tracebacks hold tensors in cycles).
``gc.collect()`` on a training thread also destroys any other garbage that happens to be waiting,
Qt objects of a GUI included, off their thread, which can deadlock Qt against the GIL. So a GUI
installs its own collector (it collects on its GUI thread); the CLI keeps ``gc.collect``.
"""

from __future__ import annotations

import gc
from typing import Callable, Optional

_collector: Callable[[], object] = gc.collect


def collect_garbage() -> None:
    _collector()


def set_collector(collector: Optional[Callable[[], object]]) -> None:
    """Install ``collector`` for every later collection (None: plain ``gc.collect`` again)."""
    global _collector
    _collector = collector if collector is not None else gc.collect
