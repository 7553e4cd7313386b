"""Every RunConfig field as a --kebab-case flag, --config FILE.json as their base, and the settings they give:
shared by run, sweep, tune, max-batch and ceiling."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Optional, get_args

from workbench.cli.config_file import read_config_file
from workbench.cli.parsing import UsageError
from workbench.config import (
    CHOICES,
    FIELD_NAMES,
    FIELD_TYPES,
    OPTIONAL_FIELDS,
    SWITCHES_BECAME_CHOICES,
    ConfigError,
    SETTINGS,
    RunConfig,
)
from workbench.formatting import printable
from workbench.regular_file import folder_problem


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """--config FILE.json and one --kebab-case flag per RunConfig field (the parser must use
    ``argument_default=argparse.SUPPRESS``, so only flags given override --config and the defaults)."""
    parser.add_argument("--config", metavar="FILE.json", help="settings as a JSON object (RunConfig fields)")
    defaults = RunConfig()
    for name in FIELD_NAMES:
        flag = "--" + name.replace("_", "-")
        hint = FIELD_TYPES[name]
        help_text = cli_help(name, getattr(defaults, name))  # the form's tooltip starts with the same line
        if hint is bool:
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, help=help_text)
        elif name in SWITCHES_BECAME_CHOICES:  # --compile alone still means what it meant; --no-compile too
            modes = SWITCHES_BECAME_CHOICES[name]
            parser.add_argument(flag, dest=name, nargs="?", const=modes[True],
                                metavar="{" + ",".join(CHOICES[name]) + "}", help=help_text)
            parser.add_argument("--no-" + flag[2:], dest=name, action="store_const", const=modes[False],
                                help=f"the same as {flag} {modes[False]}")
        elif name in CHOICES:
            # Choices are checked by RunConfig.validate so the message matches the GUI's.
            parser.add_argument(flag, dest=name, metavar="{" + ",".join(CHOICES[name]) + "}", help=help_text)
        else:
            if name in OPTIONAL_FIELDS:  # Optional[int] / Optional[float]: the flag takes the inner type
                hint = next(arg for arg in get_args(hint) if arg is not type(None))
            base = int if hint is int else float if hint is float else str
            parser.add_argument(flag, dest=name, type=base, metavar=name.upper(), help=help_text)


def config_from_args(args: argparse.Namespace, prog: str = "workbench run") -> RunConfig:
    """The settings the flags and --config give; UsageError (one line, starting with ``prog``) when they cannot."""
    values: dict[str, Any] = {}
    config_file: Optional[str] = getattr(args, "config", None)
    if config_file:
        values.update(read_config_file(config_file, prog))
    values.update({name: getattr(args, name) for name in FIELD_NAMES if hasattr(args, name)})
    _dataset_for_data_path(args, values, prog)
    try:
        return RunConfig.from_dict(values)
    except ConfigError as error:
        raise UsageError(f"{prog}: {error}") from None


def _dataset_for_data_path(args: argparse.Namespace, values: dict[str, Any], prog: str) -> None:
    """--data-path without --dataset would train on synthetic data and ignore the file: infer npz from the
    suffix, or folder from a folder of class folders (and say so), or refuse, naming what to add."""
    path = getattr(args, "data_path", None)
    if not path or values.get("dataset", "synthetic") != "synthetic":
        return
    if hasattr(args, "dataset"):
        raise UsageError(
            f"{prog}: --data-path is not used with --dataset synthetic: drop it, or choose "
            "--dataset npz (an .npz file), folder (a folder of class folders) or cifar10/cifar100 (a CIFAR folder)"
        )
    if str(path).lower().endswith(".npz"):
        values["dataset"] = "npz"
        # Said once the settings pass their checks (bad input gets one line).
        args.notes = [*getattr(args, "notes", []), f"{path} is an .npz file: training on it (--dataset npz)"]
        return
    if folder_problem(path) is None:  # os.stat only: a FIFO answers without blocking
        folder = Path(path).expanduser()
        if any((folder / name).exists() for name in CIFAR_FOLDER_MARKS):
            raise UsageError(f"{prog}: --data-path {path} is a CIFAR folder: add --dataset cifar10 or cifar100")
        values["dataset"] = "folder"
        args.notes = [*getattr(args, "notes", []),
                      f"{path} is a folder: training on its images, one sub-folder per class (--dataset folder)"]
        return
    raise UsageError(
        f"{prog}: --data-path needs --dataset: npz for an .npz file, folder for a folder of class folders, "
        "cifar10 or cifar100 for a CIFAR folder"
    )


# What torchvision's CIFAR download leaves in its folder.
CIFAR_FOLDER_MARKS = ("cifar-10-batches-py", "cifar-100-python", "cifar-10-python.tar.gz", "cifar-100-python.tar.gz")


def print_notes(args: argparse.Namespace, prog: str) -> None:
    """What the flags implied (said once the settings pass their checks)."""
    for note in getattr(args, "notes", []):
        print(printable(f"{prog}: {note}"), file=sys.stderr)


def cli_help(name: str, default: object) -> str:
    """The flag's help in `workbench run --help`: the setting's one line (the form's tooltip starts with it) and its
    default."""
    return f"{SETTINGS[name].help} (default: {_default_text(default)})".replace("%", "%%")  # argparse formats help with %


def _default_text(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if value == "":
        return "empty"
    return str(value)
