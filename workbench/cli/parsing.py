"""The command line's parser: bad input becomes one readable line (UsageError, exit code 2), with the nearest
flag or choice suggested where there is one. Every command's parser is a ``Parser``."""

from __future__ import annotations

import argparse
import difflib
import re
from typing import Optional, Sequence


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one readable line instead of usage + message
        raise UsageError(f"{self.prog}: {_with_suggestion(message)}")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # argparse reports unknown flags from the top parser ("workbench: unrecognized arguments");
        # find the subcommand they were meant for, so the message can name it and suggest its nearest flag.
        parsed, extras = self.parse_known_args(args, namespace)
        # A list of paths may have options among them (`workbench trace A --json B`): argparse ends a "+" list at
        # the first option and leaves the paths after it over; a command that names its list takes them back.
        anywhere = getattr(parsed, "positionals_anywhere", None)
        if extras and anywhere and not any(extra.startswith("-") for extra in extras):
            getattr(parsed, anywhere).extend(extras)
            extras = []
        if extras:
            command = self.subcommand(getattr(parsed, "command", None))
            raise UsageError(unknown_arguments_message(command or self, extras))
        return parsed

    def subcommand(self, name: Optional[str]) -> Optional[argparse.ArgumentParser]:
        """The parser of the subcommand ``name`` (None for no such one)."""
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


LARGEST_INT = 2**63 - 1  # SQLite's largest integer: a run id past it raised OverflowError from sqlite3


def positive_int(text: str) -> int:
    """An argparse type: a whole number from 1 to LARGEST_INT (a run id, a count: none is larger)."""
    return whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number from 0 to LARGEST_INT (a rank)."""
    return whole_number(text, 0)


def whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number from {minimum} up, got {value}")
    if value > LARGEST_INT:
        raise argparse.ArgumentTypeError(f"expected a number up to {LARGEST_INT:,} (2^63-1), got {text}")
    return value


def not_utf8_flags(args: argparse.Namespace, parser: Optional[argparse.ArgumentParser] = None) -> list[str]:
    """The arguments whose text is not UTF-8 (the bytes Python keeps as lone surrogates: a --name or --data-path of
    Latin-1 bytes), which the history, JSON and CSV cannot hold, named as ``parser`` (the command's) shows them:
    "--data-path", or a positional's "FILE"."""
    names = argument_names(parser) if parser is not None else {}
    found = []
    for name, value in vars(args).items():
        if name in getattr(args, "any_bytes", ()):  # a command that keeps nothing of it says so
            continue
        texts = value if isinstance(value, (list, tuple)) else [value]
        if any(isinstance(text, str) and not _is_utf8(text) for text in texts):
            found.append(names.get(name, "--" + name.replace("_", "-")))
    return found


def argument_names(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each argument's name as the user gives it, by its dest: a flag's long option ("--out"; the first of
    several, as --compile's before --no-compile), a positional's metavar ("FILE")."""
    names: dict[str, str] = {}
    for action in parser._actions:
        if action.option_strings:
            long = next((option for option in action.option_strings if option.startswith("--")),
                        action.option_strings[0])
            names.setdefault(action.dest, long)
        elif action.dest != argparse.SUPPRESS:
            metavar = action.metavar if isinstance(action.metavar, str) else None
            names.setdefault(action.dest, metavar or action.dest.upper())
    return names


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
