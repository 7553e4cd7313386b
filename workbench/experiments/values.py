"""Settings values written as text ("0,1,2,4", "fp32,bf16", "on,off"), read by the field's type.

The CLI's ``--values`` and the GUI's value box both go through here, so both accept the same text
and refuse it in the same words.
"""

from __future__ import annotations

import difflib
from typing import Any, get_args

from workbench.config import CHOICES, FIELD_NAMES, FIELD_TYPES, OPTIONAL_FIELDS

_TRUE = ("true", "on", "yes", "1")
_FALSE = ("false", "off", "no", "0")


def field_problem(name: str) -> str | None:
    """Why ``name`` is not a setting that can be varied (None when it is one)."""
    if name in FIELD_NAMES:
        return None
    nearest = difflib.get_close_matches(name.replace("-", "_"), FIELD_NAMES, n=1, cutoff=0.6)
    hint = f"did you mean {nearest[0]}?" if nearest else "see `workbench run --help` for the settings"
    return f"{name} is not a setting ({hint})"


def parse_value(name: str, text: str) -> Any:
    """One value of setting ``name`` from text; ValueError with the reason in words."""
    text = text.strip()
    hint = FIELD_TYPES[name]
    if name in OPTIONAL_FIELDS:
        if text.lower() in ("none", ""):
            return None
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
    if hint is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"{name} takes on or off (got {text!r})")
    if hint is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{name} takes whole numbers (got {text!r})") from None
    if hint is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"{name} takes numbers (got {text!r})") from None
    if name in CHOICES and text not in CHOICES[name]:
        raise ValueError(f"{name} must be one of {', '.join(CHOICES[name])} (got {text!r})")
    return text


def parse_values(name: str, text: str) -> tuple[tuple[Any, ...], list[str]]:
    """The comma-separated values of ``name``, and every problem with them."""
    problem = field_problem(name)
    if problem:
        return (), [problem]
    values, problems = [], []
    items = [item for item in text.split(",")]
    if not text.strip():
        return (), [f"{name}: no values given"]
    for item in items:
        try:
            values.append(parse_value(name, item))
        except ValueError as error:
            problems.append(str(error))
    return tuple(values), problems
