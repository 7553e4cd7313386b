"""Measured compute ceilings, kept in the workbench home (no torch: a run only looks one up).

One JSON file, ``ceilings.json``: each entry is keyed by everything that sets how fast the model itself can train
(the device, the classes, torch's version, every setting declared to act on the kernels a step runs; a user's model
module by its content), so a ceiling is only ever compared with runs it describes.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from workbench.config import KERNEL_SETTINGS, RunConfig, inactive_settings
from workbench.device_info import DeviceInfo
from workbench.regular_file import read_regular_file
from workbench.setting_checks import model_kwargs_of
from workbench.user_modules import source_digest

FILE_NAME = "ceilings.json"
FORMAT = 1
# A measured rate is steady when at least this many timed chunks in a row lie within this spread of each
# other (max − min ≤ 3 % of max) over at least this much timed work.
STEADY_CHUNKS = 3
STEADY_TOLERANCE = 0.03
STEADY_MIN_SECONDS = 2.0


@dataclass(frozen=True)
class Ceiling:
    """What the model alone can do on this device: images/sec on a batch already on the device."""

    images_per_sec: float
    steady: bool  # the last timed chunks agreed (engine.ceiling.steady_chunks); False when the budget ran out first
    timed_steps: int
    timed_seconds: float
    key: dict[str, Any]
    measured_at: float  # unix seconds
    cached: bool = False  # read from the cache rather than measured now
    not_kept: str = ""  # why it could not be kept in the cache for later runs (a read-only or full home); "" if kept


class CeilingNotKept(Exception):
    """The ceiling was measured but could not be written to the cache; the message says where and why."""


class ProbeStopped(Exception):
    """The user stopped the ceiling probe: no ceiling, and nothing went wrong; the message says how far it got."""


def num_classes_of(config: RunConfig) -> Optional[int]:
    """Classes the model is built for, where the settings alone say (None: the data must be read)."""
    if config.dataset == "cifar100":
        return 100
    if config.dataset in ("cifar10", "synthetic"):
        return 10
    return None


def ceiling_key(config: RunConfig, device: DeviceInfo, num_classes: int) -> dict[str, Any]:
    """Every setting that decides which kernels a step runs (declared so on its field: config.KERNEL_SETTINGS) and
    the device, classes and torch they ran on. A setting that does nothing on this device (fused_optimizer on a
    CPU) is keyed as None, so both of its values share one ceiling."""
    inactive = inactive_settings(config, on_cpu=device.type != "cuda")
    key: dict[str, Any] = {
        "device_name": device.name,  # "device" until issue 29: a cache entry of then is measured again
        "device_type": device.type,
        "num_classes": num_classes,
        "torch_version": device.torch_version,
    }
    for name in KERNEL_SETTINGS:
        key[name] = None if name in inactive else getattr(config, name)
    key["model_kwargs"] = _kwargs_key(config.model_kwargs)
    source = source_digest(config.model)
    if source is not None:  # the user's module, by content: edited, it is another model (built-ins keep their key)
        key["model_source"] = source
    return key


def _kwargs_key(text: str) -> Any:
    """model_kwargs as a dict, so '{"width":4}' and '{"width": 4}' are one ceiling (the text where it is no
    JSON object: such settings never reach a probe)."""
    try:
        return model_kwargs_of(text)
    except ValueError:
        return text


MAX_CACHE_BYTES = 16 * 1024**2  # some 500 bytes an entry: tens of thousands of settings measured


def _key_text(key: dict[str, Any]) -> str:
    return json.dumps(key, sort_keys=True)


def cache_path(home: Optional[Path] = None) -> Path:
    if home is None:
        from workbench.paths import workbench_home

        home = workbench_home()
    return Path(home) / FILE_NAME


def _entries(path: Path) -> dict[str, dict[str, Any]]:
    # Read as any file the user's home holds: a FIFO there blocked every run before its first step (its stop
    # unheard), and JSON nested 100,000 deep failed each run with a RecursionError.
    try:
        data = json.loads(read_regular_file(path, MAX_CACHE_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # NotARegularFile and UnicodeDecodeError are ValueErrors
        return {}  # none yet, or unreadable: a ceiling is an extra, never a reason to fail
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def cached_ceiling(config: RunConfig, device: DeviceInfo, num_classes: int, home: Optional[Path] = None) -> Optional[Ceiling]:
    key = ceiling_key(config, device, num_classes)
    entry = _entries(cache_path(home)).get(_key_text(key))
    if not isinstance(entry, dict):
        return None
    try:
        return Ceiling(
            images_per_sec=float(entry["images_per_sec"]),
            steady=bool(entry["steady"]),
            timed_steps=int(entry["timed_steps"]),
            timed_seconds=float(entry["timed_seconds"]),
            key=key,
            measured_at=float(entry["measured_at"]),
            cached=True,
        )
    except (KeyError, TypeError, ValueError):
        return None


def store_ceiling(ceiling: Ceiling, home: Optional[Path] = None) -> Path:
    """Add or replace this ceiling's entry; written to a temporary file and renamed over the old one."""
    path = cache_path(home)
    entries = _entries(path)
    record = asdict(ceiling)
    for name in ("key", "cached", "not_kept"):
        record.pop(name)
    entries[_key_text(ceiling.key)] = record
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(json.dumps({"format": FORMAT, "entries": entries}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as error:  # a read-only or full home: the measurement stands, the cache does not take it
        raise CeilingNotKept(f"not kept in {path}: {(error.strerror or str(error)).lower()}") from None
    finally:
        with contextlib.suppress(OSError):  # on a read-only file system the unlink fails too
            temporary.unlink(missing_ok=True)
    return path


def steady_chunks(chunks: Sequence[tuple[int, float]]) -> Optional[list[tuple[int, float]]]:
    """The last chunks ((images, seconds) each) when they show a settled rate: ``STEADY_CHUNKS`` or more in a
    row within ``STEADY_TOLERANCE`` of each other over ``STEADY_MIN_SECONDS`` or more; else None."""
    window: list[tuple[int, float]] = []
    for images, seconds in reversed(chunks):
        rates = [i / s for i, s in window] + [images / seconds]
        if max(rates) - min(rates) > STEADY_TOLERANCE * max(rates):
            break
        window.append((images, seconds))
    if len(window) >= STEADY_CHUNKS and sum(seconds for _, seconds in window) >= STEADY_MIN_SECONDS:
        return window[::-1]
    return None
