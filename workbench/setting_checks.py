"""Checks of single settings' values that their type and range cannot tell: the model spec and its keyword
arguments read as text, and the files and folders a run reads (data_path) or writes (save_model), asked with
os.stat only.

RunConfig.validate (config.py) calls them; a few are called directly too (the engine builds the model with
model_kwargs_of, the form offers BUILTIN_MODELS).
They take plain values, not a RunConfig, so this module never needs config.py. Importing it must stay cheap (no
torch): config.py imports it, and the GUI builds its form from config.py before the first paint.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Optional

from workbench.paths import default_datasets_dir, workbench_home
from workbench.regular_file import folder_problem, invalid_path_problem, new_file_problem, regular_file_problem
from workbench.replaced_file import name_length_problem
from workbench.user_modules import module_import_files, standard_library_problem

# The models built in (engine/models.py). ``model`` also takes any torchvision classification model by name,
# or "package.module:function" for the user's own (imported from the working directory or PYTHONPATH).
BUILTIN_MODELS: tuple[str, ...] = ("small-cnn", "small-cnn-gn", "resnet18", "mobilenet_v3_small")
# "package.module:function", the form Python entry points, uvicorn and gunicorn use.
MODEL_FUNCTION = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
TORCHVISION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# Keyword arguments nest a few levels at most; json.loads raises RecursionError past about 1,000 and json.dumps,
# repr and the user's function would recurse as deep, so deeper text is refused before it is parsed.
MODEL_KWARGS_MAX_DEPTH = 32
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')

WEIGHTS_SUFFIXES = (".pt", ".pth")  # the names weights may take in the workbench home


# -- the model spec ------------------------------------------------------------
def json_nesting_depth(text: str) -> int:
    """How deep ``text``'s arrays and objects nest (brackets inside JSON strings do not count)."""
    depth = deepest = 0
    for char in _JSON_STRING.sub('""', text):
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def model_kwargs_of(text: str) -> dict[str, Any]:
    """``model_kwargs`` as a dict ({} for ""); ValueError with the reason when it is not a JSON object."""
    if not text.strip():
        return {}
    depth = json_nesting_depth(text)
    if depth > MODEL_KWARGS_MAX_DEPTH:
        raise ValueError(f"model_kwargs nest {depth:,} levels deep; at most {MODEL_KWARGS_MAX_DEPTH} are read")
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"model_kwargs is not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise ValueError(f"model_kwargs must be a JSON object such as {{\"width\": 64}}, not {type(value).__name__}")
    return value


def model_problems(model: str, model_kwargs: str) -> list[str]:
    """What is wrong with a model spec that can be told without importing anything (the engine's model check,
    engine/models.py, builds it and runs a dummy batch before a run starts)."""
    problems = []
    if model not in BUILTIN_MODELS and not MODEL_FUNCTION.match(model) and not TORCHVISION_NAME.match(model):
        problems.append(f"model {model!r} is not a built-in ({', '.join(BUILTIN_MODELS)}), a torchvision model name "
                        "or package.module:function")
    else:
        stdlib = standard_library_problem(model)
        if stdlib is not None:
            problems.append(stdlib)
    try:
        model_kwargs_of(model_kwargs)
    except ValueError as error:
        problems.append(str(error))
    else:
        if model_kwargs.strip() and model in BUILTIN_MODELS:
            problems.append(f"model_kwargs apply to a torchvision model or your own function, not to the built-in "
                            f"{model}")
    return problems


# -- the files a run reads and writes ------------------------------------------
def make_npz_command(folder: str) -> str:
    """The command that makes a dataset file of an image folder: `workbench make-npz pets --out pets.npz`."""
    source = folder.rstrip("/\\") or folder
    return shlex.join(["workbench", "make-npz", source, "--out", f"{source}.npz"])


def cifar_folder_problem(data_path: str) -> Optional[str]:
    """Why CIFAR cannot be kept in ``data_path`` (or the home's datasets folder where it is empty): it is there and
    no folder (a file, a FIFO, a symlink loop); None when it is a folder, or absent (the download makes it)."""
    folder = data_path or str(default_datasets_dir())
    problem = folder_problem(folder)
    if problem is None or problem == "does not exist":
        return None
    named = f"data_path {data_path!r}" if data_path else f"the datasets folder {folder}"
    return f"{named} {problem}: CIFAR is kept (and downloaded) in a folder"


def data_path_problems(dataset: str, data_path: str) -> list[str]:
    """What is wrong with ``data_path`` for ``dataset`` (os.stat only: a FIFO must not block, nothing is opened)."""
    problems = []
    if dataset == "folder":
        if not data_path:
            problems.append("dataset=folder needs data_path: a folder with one sub-folder of images per class")
        else:
            problem = folder_problem(data_path)
            if problem is not None:
                problems.append(f"data_path {data_path!r} {problem}: dataset=folder needs a folder with one "
                                "sub-folder of images per class")
    if dataset in ("cifar10", "cifar100"):
        problem = cifar_folder_problem(data_path)
        if problem is not None:
            problems.append(problem)
    if dataset == "npz":
        if not data_path:
            problems.append("dataset=npz needs data_path: the .npz file to train on")
        elif folder_problem(data_path) is None:
            problems.append(f"data_path {data_path!r} is a folder: dataset=npz trains on an .npz file; "
                            "choose dataset=folder to train on its images directly, or make an .npz from it "
                            f"with `{make_npz_command(data_path)}`")
        else:
            problem = regular_file_problem(data_path)
            if problem is not None:
                problems.append(f"data_path {data_path!r} {problem}: dataset=npz needs an .npz file")
    return problems


def save_model_problem(path: str, dataset: str = "", data_path: str = "", model: str = "") -> Optional[str]:
    """Why the trained model cannot be saved at ``path`` (os.stat only: nothing is opened), or None. ``dataset``,
    ``data_path`` and ``model`` are the run's: the weights must not replace what it reads."""
    invalid = invalid_path_problem(path)
    if invalid is not None:
        return invalid
    target = Path(os.path.expanduser(path))
    # The weights replace the file: in the home, that could be the run history (every run gone) or the settings.
    home = Path(os.path.realpath(workbench_home()))
    written = Path(os.path.realpath(target))  # a link's target is what would be replaced
    if data_path and invalid_path_problem(data_path) is None:
        data = Path(os.path.realpath(os.path.expanduser(data_path)))
        if written == data:
            return f"is the run's data_path ({data}): the weights would replace the data"
        if dataset == "folder" and data in written.parents:
            return (f"is inside the run's image folder ({data}): the weights would be among its images; give a "
                    "file outside it")
    for read, what in module_import_files(model):  # the source, its cached .pyc, a .so, a zip archive: links followed
        if written == Path(os.path.realpath(read)):
            return f"is {what} ({read}): the weights would replace your code"
    if (written == home or home in written.parents) and written.suffix.lower() not in WEIGHTS_SUFFIXES:
        return (f"is in the workbench home ({home}), which holds the run history and what the workbench makes: give "
                f"a name ending in {' or '.join(WEIGHTS_SUFFIXES)}, or a file outside it")
    if os.path.lexists(target):
        problem = regular_file_problem(target)
        return None if problem is None else f"{problem}: the weights are written to a regular file"
    parent = folder_problem(target.parent) or new_file_problem(target.parent)
    if parent is not None:
        return f"cannot be written: its folder {target.parent} {parent}"
    too_long = name_length_problem(target)  # refused now, not once the run has trained
    return None if too_long is None else f"cannot be written: {too_long}"
