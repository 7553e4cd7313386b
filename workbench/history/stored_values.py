"""A stored value read as the field it belongs to holds it.

SQLite keeps whatever a hand-edited or damaged file put in a column: text in a figure, a blob in a name, 1e300 for
a time. A value that cannot be read as its field's type is unknown (None); where the field takes no None, its
default, and where it has none either, the row cannot be read (``Unreadable``). No Qt, no torch.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Optional, get_args

LATEST_TIME = 253402300799.0  # 9999-12-31 23:59:59 UTC: the last second a date can name; past it, no time


class Unreadable(ValueError):
    """A value a field needs (it takes no None and has no default) cannot be read."""


def text(value: Any) -> Optional[str]:
    """A text column's value: a number or a blob where text belongs reads as text; None stays None."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def number(value: Any) -> Optional[float]:
    """A real number (int or float), else None: text or a blob in a figure is no figure."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def integer(value: Any) -> Optional[int]:
    found = number(value)
    if isinstance(found, float):
        return int(found) if found.is_integer() else None
    return found


def unix_time(value: Any, unknown: Optional[float] = None) -> Optional[float]:
    """Unix seconds that name a date (0 to the year 9999); ``unknown`` for anything else."""
    found = number(value)
    return float(found) if found is not None and 0 <= found <= LATEST_TIME else unknown


def json_list(value: Any) -> list[Any]:
    """A JSON list column's items; [] for what is no JSON list (a blob, garbage, nesting past Python's limit)."""
    try:
        found = json.loads(text(value) or "[]")
    except (ValueError, RecursionError):
        return []
    return found if isinstance(found, list) else []


def field_reader(item: dataclasses.Field, hint: Any) -> Callable[[Any], Any]:
    """A stored value → as the dataclass field ``item`` (of type ``hint``) holds it; Unreadable where it cannot be.
    One reader a field, its type looked at once: a history of thousands of rows reads each of them."""
    kinds = set(get_args(hint)) or {hint}
    convert: Callable[[Any], Any]
    if str in kinds:
        convert = text
    elif bool in kinds:
        convert = _boolean
    elif int in kinds:
        convert = integer
    elif float in kinds:
        convert = _real
    else:
        return lambda value: value
    if type(None) in kinds:
        return convert

    def required(value: Any) -> Any:
        read = convert(value)
        if read is not None:
            return read
        if item.default is not dataclasses.MISSING:
            return item.default
        if item.default_factory is not dataclasses.MISSING:
            return item.default_factory()
        raise Unreadable(f"{item.name} holds {value!r:.40}")

    return required


def _boolean(value: Any) -> Optional[bool]:
    return bool(value) if isinstance(value, int) else None


def _real(value: Any) -> Optional[float]:
    found = number(value)
    return None if found is None else float(found)
