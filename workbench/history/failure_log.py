"""failures.log in the workbench home: the whole traceback of every run that failed unexpectedly.

The run history keeps the traceback too (runs.traceback); the log is for reading with any editor
and for attaching to a bug report. Appending never raises: a log that cannot be written must not
stop a failure from being recorded. Past MAX_BYTES the file moves to failures.log.1 (one old file).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from workbench.history.metrics import iso_utc

LOG_FOLDER = "logs"
LOG_NAME = "failures.log"
MAX_BYTES = 5 * 2**20


def failure_log_path(home: Optional[Path] = None) -> Path:
    if home is None:
        from workbench.paths import workbench_home

        home = workbench_home()
    return Path(home) / LOG_FOLDER / LOG_NAME


def log_failure(
    reason: str,
    traceback: str,
    *,
    kind: Optional[str] = None,
    run_id: Optional[int] = None,
    source: Optional[str] = None,
    settings: Optional[dict[str, Any]] = None,
    at: Optional[float] = None,
    home: Optional[Path] = None,
) -> Optional[Path]:
    """Append one failure; returns the log's path, or None when it could not be written."""
    import time

    path = failure_log_path(home)
    run = f"run #{run_id}" if run_id is not None else "a run not in the history"
    lines = [
        f"=== {iso_utc(at if at is not None else time.time())} {run}" + (f" ({source})" if source else "")
        + " failed" + (f" [{kind}]" if kind else "") + f": {reason}",
    ]
    if settings is not None:
        lines.append("settings: " + json.dumps(settings, sort_keys=True))
    lines.append(traceback.rstrip("\n"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > MAX_BYTES:
            os.replace(path, path.with_name(LOG_NAME + ".1"))
        with open(path, "a", encoding="utf-8") as file:
            file.write("\n".join(lines) + "\n\n")
    except OSError:
        return None
    return path
