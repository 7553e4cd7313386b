"""Names the CSV and --json used before issue 29, read as today's names for one release (docs/cli.md lists them).

Each thing in the output has one name: ``sequence_id`` (a run's sweep, repeats, tune, verification or max-batch
search), ``device_type`` ("cuda" or "cpu"), ``nvml_device_used`` (NVML's "used" is the whole device's: every
process and CUDA context), and ``images_per_sec`` (one number: samples ÷ seconds over the steady windows). A file
written by an earlier version reads through ``current_json`` / ``read_runs_csv`` / ``read_steps_csv`` as if
written today. This module is the one place the old spellings live (tests/test_output_names.py checks).
No torch, no Qt.
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any

from workbench.regular_file import read_regular_file

# A runs CSV of 10,000 runs is about 20 MiB; a file past this is not one (read whole, so it is bounded).
CSV_MAX_BYTES = 1 << 30

# Old CSV column / --json key → today's. A key that is already today's is left as it is.
RENAMED: dict[str, str] = {
    "sweep_id": "sequence_id",
    "sweep_name": "sequence_name",
    "images_per_sec_mean": "images_per_sec",
    "peak_nvml_used_bytes": "peak_nvml_device_used_bytes",
    "rank_peak_nvml_used_bytes": "rank_peak_nvml_device_used_bytes",
    "nvml_used": "nvml_device_used",
}
# Old columns with no successor: a second throughput figure (the median window's rate); images_per_sec is the one.
DROPPED: frozenset[str] = frozenset({"images_per_sec_median"})
# The long step CSV names its metrics after the history's columns (per-epoch ones prefixed "epoch_").
RENAMED_METRICS: dict[str, str] = {"nvml_used": "nvml_device_used", "epoch_nvml_used": "epoch_nvml_device_used"}
# Objects that hold settings (RunConfig.to_dict()): their keys are setting names, never renamed ("device" is one).
SETTINGS_KEYS: frozenset[str] = frozenset({"config", "best_config", "values", "changes", "best_changes"})


def current_json(document: Any) -> Any:
    """A --json object of any command, old or new, in today's names (a new object; the argument is not changed).

    Besides the renamed keys: ``images_per_sec`` as an object ``{"mean", "median"}`` (one run's, before issue 30)
    reads as its mean, the steady-state figure; a run's ``device`` ("cuda"/"cpu" beside ``device_name``) reads as
    ``device_type``; verify's ``device`` object ``{"type", "name"}`` reads as ``device_type`` and ``device_name``.
    """
    if isinstance(document, list):
        return [current_json(item) for item in document]
    if not isinstance(document, dict):
        return document
    current: dict[str, Any] = {}
    for key, value in document.items():
        if key in SETTINGS_KEYS:
            current[key] = value
        elif key == "images_per_sec" and isinstance(value, dict):
            current[key] = value.get("mean")
        elif key == "device" and isinstance(value, dict):
            current["device_type"], current["device_name"] = value.get("type"), value.get("name")
        elif key == "device" and "device_name" in document:  # a summary's device type (a swept setting has no name)
            current["device_type"] = value
        elif key not in DROPPED:
            current[RENAMED.get(key, key)] = current_json(value)
    return current


def read_runs_csv(path: os.PathLike | str) -> list[dict[str, str]]:
    """The rows of a runs CSV (`workbench export`, any version) with today's column names. ValueError (one line)
    for what is not a readable CSV: not a regular file (a FIFO would block), too large, not UTF-8, malformed."""
    return [{RENAMED.get(name, name): value for name, value in row.items() if name not in DROPPED}
            for row in _csv_rows(path)]


def read_steps_csv(path: os.PathLike | str) -> list[dict[str, str]]:
    """The rows of a long step CSV (`workbench export --steps`, any version) with today's metric names."""
    return [{**row, "metric": RENAMED_METRICS.get(row.get("metric", ""), row.get("metric", ""))}
            for row in _csv_rows(path)]


def _csv_rows(path: os.PathLike | str) -> list[dict[str, str]]:
    data = read_regular_file(os.fspath(path), CSV_MAX_BYTES)  # NotARegularFile is a ValueError with the reason
    try:
        return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    except UnicodeDecodeError as error:
        raise ValueError(f"{os.fspath(path)} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except csv.Error as error:
        raise ValueError(f"{os.fspath(path)} is not a CSV the workbench wrote: {error}") from None
