"""A deleted run's profiler traces go with it: only files the profiler wrote, and their folder if left empty."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Sequence

TRACE_SUFFIX = ".trace.json.gz"


def delete_traces(paths: Sequence[str]) -> None:
    """Remove ``*.trace.json.gz`` files in a run's folder under a ``traces`` folder, then that folder if it is
    left empty. A trace already gone, or one that cannot be removed, does not stop the run's deletion."""
    folders = set()
    for text in paths:
        path = Path(text)
        if not path.name.endswith(TRACE_SUFFIX) or path.parent.parent.name != "traces":
            continue
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        folders.add(path.parent)
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty: another run's traces never share it, but be safe
