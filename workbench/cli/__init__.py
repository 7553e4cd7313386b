"""`workbench` command line: no arguments opens the desktop app; subcommands run headless.

Each subcommand lives in its own module with ``register(subparsers)``; nothing here imports
Qt or torch until a command needs it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one readable line instead of usage + message
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    from workbench.cli import history_commands, run_command

    parser = _Parser(prog="workbench", description="GPU training workbench: see why your GPU is idle.")
    parser.add_argument("--home", help="workbench home folder (run history, datasets); default: $WORKBENCH_HOME "
                        "or the per-user data folder")
    subparsers = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    run_command.register(subparsers)
    history_commands.register(subparsers)
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
    try:
        from workbench.gui.app import main as gui_main
    except ImportError as error:
        print(f"workbench: the desktop app cannot start ({error}); `workbench run --help` runs headless",
              file=sys.stderr)
        return 2
    return gui_main()
