"""Run names that say what distinguishes a run: its data, and the settings that changed against the run before.

"synthetic: num_workers=0, epochs=6" tells an experiment apart in a legend, a table or a CSV where
"small-cnn bs128 fp32 #7" does not. The run's number is not part of its name: views show it once,
as "#7 <name>" (RunRecord.label). Two runs never share a name: a name already taken gets what tells
the new run from that one (``distinct_name``). No Qt, no torch.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Callable, Optional

from workbench.config import FIELD_NAMES, RunConfig
from workbench.setting_checks import model_kwargs_of
from workbench.formatting import format_setting

MAX_CHANGES_IN_NAME = 3
# The name starts with the data; these are said there, not again as changes.
_DATA_FIELDS = ("dataset", "data_path")


def dataset_label(config: RunConfig) -> str:
    """"synthetic", "cifar10", an .npz file's stem ("cifar10-subset") or an image folder's name ("pets")."""
    if config.dataset == "npz" and config.data_path:
        return PurePath(config.data_path).stem or "npz"
    if config.dataset == "folder" and config.data_path:
        return PurePath(config.data_path).name or "folder"
    return config.dataset


def model_label(config: RunConfig) -> str:
    """The model spec, with its kwargs when it has any: 'mymodels:tiny_net {"width":4}'."""
    if not config.model_kwargs.strip():
        return config.model
    try:
        kwargs = json.dumps(model_kwargs_of(config.model_kwargs), separators=(",", ":"))
    except ValueError:  # an older record's text that is no JSON object: shown as it was given
        kwargs = config.model_kwargs.strip()
    return f"{config.model} {kwargs}"


def run_name(config: RunConfig, previous: Optional[RunConfig] = None) -> str:
    """The run's data, then what changed against ``previous`` (the run before it), or its main settings."""
    data = dataset_label(config)
    changes = changed_settings(config, previous) if previous is not None else None
    if not changes:
        if previous is not None and dataset_label(previous) == data:
            return f"{data}: same settings"
        devices = "" if config.devices == 1 else f" × {config.devices or 'every GPU'}"
        return f"{data}: {model_label(config)}, batch {config.batch_size}{devices}, {config.precision}"
    shown = ", ".join(changes[:MAX_CHANGES_IN_NAME])
    more = len(changes) - MAX_CHANGES_IN_NAME
    return f"{data}: {shown}" + (f" (+{more} more)" if more > 0 else "")


def changed_settings(config: RunConfig, previous: RunConfig) -> list[str]:
    """"name=value" for each setting (other than the data) that differs from ``previous``, in field order."""
    return [
        f"{name}={format_setting(getattr(config, name))}"
        for name in FIELD_NAMES
        if name not in _DATA_FIELDS and getattr(config, name) != getattr(previous, name)
        and not (name == "epochs" and config.max_steps is not None)  # max_steps sets the length: epochs do nothing
    ]


# (its settings, its sequence's name) of the run that has a name already; None while the name is free
NameOwner = Callable[[str], Optional[tuple[RunConfig, Optional[str]]]]


def distinct_name(name: str, config: RunConfig, sequence_name: Optional[str], owner: NameOwner) -> str:
    """``name``, or where another run has it already, the name with what tells this run from that one: its
    sequence's name, the settings that differ ("cifar10-subset: num_workers=0 (max_steps=60)"), or a count."""
    taken = owner(name)
    if taken is None:
        return name
    other_config, other_sequence = taken
    candidates = []
    if sequence_name and sequence_name != other_sequence:
        candidates.append(f"{name} ({sequence_name})")
    changes = changed_settings(config, other_config)
    if changes:
        candidates.append(f"{name} ({', '.join(changes[:MAX_CHANGES_IN_NAME])})")
    for candidate in candidates:
        if owner(candidate) is None:
            return candidate
    repeat = 2
    while owner(f"{name} (repeat {repeat})") is not None:
        repeat += 1
    return f"{name} (repeat {repeat})"
