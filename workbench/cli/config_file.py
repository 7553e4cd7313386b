"""--config FILE.json: a JSON object of settings, read without blocking and refused in one line otherwise."""

from __future__ import annotations

import codecs
import json
from typing import Any

from workbench.cli.parsing import UsageError
from workbench.regular_file import NotARegularFile, read_regular_file

CONFIG_FILE_MAX_BYTES = 1 << 20  # settings are a few hundred bytes; a larger --config is not one


class DuplicateKey(ValueError):
    """An object of the file names one key twice: which value was meant cannot be told."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def read_config_file(config_file: str, prog: str) -> dict[str, Any]:
    """--config's JSON object; UsageError (one line) for anything else: not a regular file (a FIFO would
    block the read), too large, not UTF-8, not JSON, a key given twice, nested past the parser's depth, not an
    object. A leading byte order mark (Windows Notepad writes one) is skipped."""
    try:
        data = read_regular_file(config_file, CONFIG_FILE_MAX_BYTES)
    except NotARegularFile as error:
        raise UsageError(f"{prog}: cannot read --config: {error}") from None
    skipped = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        loaded = json.loads(data[skipped:].decode("utf-8"), object_pairs_hook=_object_refusing_duplicates)
    except UnicodeDecodeError as error:
        raise UsageError(f"{prog}: --config {config_file} is not UTF-8 text ({error.reason} at byte "
                         f"{skipped + error.start})") from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{prog}: --config {config_file} is not valid JSON: {error}") from None
    except DuplicateKey as error:
        raise UsageError(f"{prog}: --config {config_file} gives the key {json.dumps(error.key, ensure_ascii=False)} "
                         "more than once in one object; keep one of its values") from None
    except RecursionError:
        raise UsageError(f"{prog}: --config {config_file} is nested too deeply to be settings") from None
    except ValueError:  # an integer past Python's 4,300 digits (the stdlib's limit on reading one)
        raise UsageError(f"{prog}: --config {config_file} holds a number of more than 4,300 digits, no "
                         "setting's") from None
    if not isinstance(loaded, dict):
        kind = "null" if loaded is None else {list: "an array", str: "a string", bool: "a boolean"}.get(
            type(loaded), "a number")
        raise UsageError(f"{prog}: --config {config_file} holds {kind}; it must hold a JSON object of settings "
                         '(like {"batch_size": 256})')
    return loaded


def _object_refusing_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object_pairs_hook: the object, or DuplicateKey (json.loads would keep the last value, silently)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(key)
        found[key] = value
    return found
