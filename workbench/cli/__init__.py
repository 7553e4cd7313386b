"""`workbench` command line: no arguments opens the desktop app; subcommands run headless.

Each subcommand lives in its own module with ``register(subparsers)``; nothing here imports
Qt or torch until a command needs it.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from workbench.cli.parsing import Parser, UsageError, not_utf8_flags
from workbench.formatting import printable
from workbench.history.errors import HistoryError

# The commands that record runs: where the history cannot take them, they can train without it.
RECORDING_COMMANDS = ("run", "sweep", "tune", "max-batch")


def build_parser() -> Parser:
    from workbench.cli import (
        ceiling_command,
        history_commands,
        max_batch_command,
        models_command,
        npz_command,
        run_command,
        sweep_command,
        trace_command,
        tune_command,
        verify_command,
    )

    parser = Parser(prog="workbench", description="GPU training workbench: see why your GPU is idle. "
                     "`workbench` with no COMMAND opens the desktop app; the commands below run headless.")
    parser.add_argument("--home", help="workbench home folder (run history, datasets); default: $WORKBENCH_HOME "
                        "or the per-user data folder")
    subparsers = parser.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")
    run_command.register(subparsers)
    ceiling_command.register(subparsers)
    history_commands.register(subparsers)
    npz_command.register(subparsers)
    sweep_command.register(subparsers)
    tune_command.register(subparsers)
    verify_command.register(subparsers)
    max_batch_command.register(subparsers)
    models_command.register(subparsers)
    trace_command.register(subparsers)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        not_text = not_utf8_flags(args, parser.subcommand(args.command))
        if not_text:
            prog = f"workbench {args.command}" if args.command else "workbench"
            raise UsageError(f"{prog}: {' and '.join(not_text)} {'holds' if len(not_text) == 1 else 'hold'} bytes "
                             "that are not UTF-8 text, which the history cannot keep: rename the file or folder, or "
                             "give another name")
        if args.home:
            import os

            os.environ["WORKBENCH_HOME"] = args.home
        if args.command is None:
            return launch_gui()
        return args.handler(args)
    except UsageError as error:
        # Some list a line per item (every unreadable image): within each, nothing a name holds drives the terminal.
        print("\n".join(printable(line) for line in str(error).split("\n")), file=sys.stderr)
        return 2
    except HistoryError as error:
        # Damaged, from a newer workbench, or not writable here: one line with what to do, and nothing started.
        command = getattr(args, "command", None)
        hint = ", or --no-history to train without recording" if command in RECORDING_COMMANDS else ""
        print(printable(f"workbench {command}: {error}{hint}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("workbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return reader_gone()


def program(argv: Optional[Sequence[str]] = None) -> int:
    """The `workbench` program (its console script and ``python -m workbench``): ``main``, then the process's end,
    at once where work a stop abandoned still runs (see program_exit.py). In-process callers use ``main``."""
    from workbench.cli.program_exit import end_program

    return end_program(main(argv))


def reader_gone() -> int:
    """The reader of our output went away (`workbench runs | head`): end quietly as other Unix tools do, with
    the shell's code for a death by SIGPIPE. Python flushes stdout once more at exit, which would raise again
    and print a traceback: stdout points to /dev/null from here on."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # SIGPIPE


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
