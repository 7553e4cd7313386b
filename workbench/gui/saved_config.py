"""The last session's run settings, restored one setting at a time (no Qt: testable without a window).

Whatever the settings file holds (it is the user's, and may be damaged or hand-edited), the window
opens: each saved setting that cannot be used now is reset to its default, and the notes say which
and why. A saved data_path is checked with os.stat alone, never opened: a FIFO there would block the
form's header check on the GUI thread at every launch, a device would be read without end.
"""

from __future__ import annotations

import json
import os
from typing import Any

from workbench.config import FIELD_NAMES, ConfigError, RunConfig
from workbench.setting_checks import model_problems
from workbench.regular_file import regular_file_problem


def restore_config(stored: Any) -> tuple[RunConfig, list[str]]:
    """The saved settings as a RunConfig, and one note per setting reset to its default (or for them all)."""
    if stored is None or stored == "":
        return RunConfig(), []
    if not isinstance(stored, str):  # a hand-edited file may hold a number or a list there
        return RunConfig(), [f"the saved settings were not text (a {type(stored).__name__}): all reset to the defaults"]
    try:
        data = json.loads(stored)
    except (ValueError, RecursionError) as error:  # RecursionError: nesting deeper than the parser goes
        reason = "nested too deeply" if isinstance(error, RecursionError) else f"not valid JSON: {error}"
        return RunConfig(), [f"the saved settings could not be read ({reason}): all reset to the defaults"]
    if not isinstance(data, dict):
        return RunConfig(), [f"the saved settings were a JSON {type(data).__name__}, not an object: "
                             "all reset to the defaults"]
    notes = []
    unknown = sorted(str(name) for name in data if name not in FIELD_NAMES)
    if unknown:
        notes.append(f"saved setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                     f"{'are' if len(unknown) > 1 else 'is'} not a setting of this version: dropped")
    defaults = RunConfig()
    default_problems = set(defaults.validate())
    typed: dict[str, Any] = {}
    alone_problems: dict[str, str] = {}
    for name in FIELD_NAMES:
        if name not in data or name == "data_path":
            continue
        try:
            alone = RunConfig.from_dict({name: data[name]})
        except ConfigError as error:  # a wrong type
            notes.append(_reset(name, str(error)))
            continue
        typed[name] = getattr(alone, name)
        # Its own checks (a choice, a range, NaN), whose sentences start with its name; a clash between two
        # settings ("dataset=npz needs data_path") is left to the form to show.
        # model_kwargs' own check is its text's: beside the default built-in model, any would clash.
        own = alone.validate() if name != "model_kwargs" else model_problems("module:function", alone.model_kwargs)
        found = [problem for problem in own if problem.startswith(f"{name} ") and problem not in default_problems]
        if found:
            alone_problems[name] = found[0]  # NaN fails two checks: the first says it
    # A setting is reset only where it fails beside the other saved settings too: model_kwargs fail beside the
    # default model (small-cnn takes none), yet belong to the saved "mymodels:make" they were written for.
    together = _problems_beside(typed)
    values = dict(typed)
    for name, problem in alone_problems.items():
        if together is None or any(found.startswith(f"{name} ") and found not in default_problems
                                   for found in together):
            notes.append(_reset(name, problem))
            del values[name]
    if "data_path" in data:
        path = data["data_path"]
        problem = (f"data_path must be text (got {path!r})" if not isinstance(path, str)
                   else data_path_problem(path, values.get("dataset", defaults.dataset)))
        if problem is None:
            values["data_path"] = path
        else:
            notes.append(_reset("data_path", problem))
    return RunConfig(**values), notes


def _problems_beside(values: dict[str, Any]) -> list[str] | None:
    """The problems of the saved settings taken together (None where they cannot even be put together)."""
    try:
        return RunConfig(**values).validate()
    except (ConfigError, TypeError, ValueError, RecursionError):
        return None


def data_path_problem(path: str, dataset: str) -> str | None:
    """Why a saved data_path cannot be kept: for dataset=npz, anything but a regular file; for the others
    (a CIFAR folder, or unused), anything no dataset reads: a FIFO, a device, a symlink loop."""
    if not path:
        return None
    problem = regular_file_problem(path)
    if problem is None:
        return None
    expanded = os.path.expanduser(path)
    if dataset != "npz" and (os.path.isdir(expanded) or not os.path.lexists(expanded)):
        return None  # a CIFAR folder, or one it will be downloaded into
    return f"{path} {problem}" + (": dataset=npz needs an .npz file" if dataset == "npz" else "")


def _reset(name: str, why: str) -> str:
    return f"{name} reset to its default ({why})"


def describe_notes(notes: list[str]) -> str | None:
    """The status line's words for the notes; None without any."""
    if not notes:
        return None
    return "Saved settings: " + "; ".join(notes) + "."
