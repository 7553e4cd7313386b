"""`workbench` command line: no arguments opens the desktop app; subcommands run headless.

Each subcommand lives in its own module with ``register(subparsers)``; nothing here imports
Qt or torch until a command needs it.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import Optional, Sequence


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one readable line instead of usage + message
        raise UsageError(f"{self.prog}: {_with_suggestion(message)}")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse reports unknown flags from the top parser ("workbench: unrecognized arguments");
        # find the subcommand they were meant for, so the message can name it and suggest its nearest flag.
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._subcommand(getattr(parsed, "command", None))
            raise UsageError(unknown_arguments_message(command or self, extras))
        return parsed

    def _subcommand(self, name: Optional[str]) -> Optional[argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                return action.choices[name]
        return None


def unknown_arguments_message(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """One line for arguments the parser does not know: the first unknown flag and its nearest known flag."""
    flags = [option for action in parser._actions for option in action.option_strings if option.startswith("--")]
    unknown = next((extra for extra in extras if extra.startswith("-")), None)
    if unknown is None:
        return f"{parser.prog}: unexpected argument{'s' if len(extras) > 1 else ''} {' '.join(extras)}"
    name = unknown.split("=", 1)[0]
    # Match on the words, not the dashes every flag shares ("--colour" is not near "--lr").
    nearest = difflib.get_close_matches(name.lstrip("-"), [flag[2:] for flag in flags], n=1, cutoff=0.6)
    hint = f"did you mean --{nearest[0]}?" if nearest else f"see `{parser.prog} --help`"
    return f"{parser.prog}: unknown flag {name} ({hint})"


def _with_suggestion(message: str) -> str:
    """argparse's "invalid choice: 'rnu' (choose from ...)" plus the nearest choice, as Python 3.14 does."""
    match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if match:
        choices = re.findall(r"'([^']*)'", match.group(2)) or [c.strip() for c in match.group(2).split(",")]
        nearest = difflib.get_close_matches(match.group(1), choices, n=1, cutoff=0.6)
        if nearest:
            return f"{message}; did you mean {nearest[0]!r}?"
    return message


def build_parser() -> argparse.ArgumentParser:
    from workbench.cli import (
        ceiling_command,
        history_commands,
        max_batch_command,
        npz_command,
        run_command,
        sweep_command,
        tune_command,
    )

    parser = _Parser(prog="workbench", description="GPU training workbench: see why your GPU is idle. "
                     "`workbench` with no COMMAND opens the desktop app; the commands below run headless.")
    parser.add_argument("--home", help="workbench home folder (run history, datasets); default: $WORKBENCH_HOME "
                        "or the per-user data folder")
    subparsers = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    run_command.register(subparsers)
    ceiling_command.register(subparsers)
    history_commands.register(subparsers)
    npz_command.register(subparsers)
    sweep_command.register(subparsers)
    tune_command.register(subparsers)
    max_batch_command.register(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        if args.home:
            import os

            os.environ["WORKBENCH_HOME"] = args.home
        if args.command is None:
            return launch_gui()
        return args.handler(args)
    except UsageError as error:
        print(str(error), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130


def launch_gui() -> int:
    from workbench.gui.platform_check import platform_problem

    problem = platform_problem()  # before Qt, whose answer to a missing platform is an abort (exit 134)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    try:
        from workbench.gui.app import main as gui_main
    except ImportError as error:
        print(f"workbench: the desktop app cannot start ({error}); `workbench run --help` runs headless",
              file=sys.stderr)
        return 2
    return gui_main()
