"""The user's own modules (a model given as ``package.module:function``), without torch: importable from the
working directory, imported afresh once edited, and told apart by their source.

Importing a user's module runs its code, as running their own training script would (README).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import os
import sys
from typing import Any, Iterator, Optional

# The source (mtime, size) of each user module as this process last imported it. The window trains in its own
# process run after run: a module edited since (the fix for a refused spec) is imported again, not served stale
# from sys.modules; one imported before the workbench first asked for it (torchvision's, say) is left alone.
_USER_SOURCES: dict[str, tuple[int, int]] = {}


@contextlib.contextmanager
def working_directory_importable() -> Iterator[None]:
    """The working directory on sys.path while the user's module is imported (``python -m`` puts it there,
    the ``workbench`` script does not)."""
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        yield
    finally:
        if added:
            with contextlib.suppress(ValueError):
                sys.path.remove(here)


def standard_library_problem(spec: str) -> Optional[str]:
    """Why a ``module:function`` spec names no model because its module is Python's own (``os:system``,
    ``subprocess:run``): asked before anything is imported, since calling such a function with a setting file's
    model_kwargs runs whatever they say. None for any other spec."""
    if ":" not in spec:
        return None
    top = spec.partition(":")[0].partition(".")[0]
    if top not in sys.stdlib_module_names and top != "builtins":
        return None
    own = _own_file_named(top)
    if own is not None:  # the user's own code.py: refused all the same, with what to do about it
        return (f"model {spec!r}: your {own} is named like Python's own module {top}; the import may give Python's "
                f"instead, and yours hides Python's from every library that imports it: rename it (say my_{top}) "
                f"and give my_{top}:{spec.partition(':')[2]}")
    return (f"model {spec!r} names a function of Python's standard library ({top}), where no model lives: give "
            "package.module:function of your own module")


def _own_file_named(top: str) -> Optional[str]:
    """The module or package of this name in the working directory, where the user's own modules are imported
    from (``working_directory_importable``); None where there is none."""
    for candidate in (f"{top}.py", os.path.join(top, "__init__.py")):
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    return None


def module_source_file(spec: str) -> Optional[str]:
    """The source file a ``module:function`` spec would import, found without importing anything (the module as
    already imported, else ``module.py`` or ``module/__init__.py`` under the working directory or a sys.path folder);
    None for any other spec, or where no such file is found."""
    if ":" not in spec:
        return None
    name = spec.partition(":")[0]
    imported = getattr(sys.modules.get(name), "__file__", None)
    if imported:
        return imported
    parts = name.split(".")
    for folder in [os.getcwd(), *sys.path]:
        if not isinstance(folder, str) or not os.path.isdir(folder or "."):
            continue  # a zip file on sys.path: nothing there is overwritten by a save
        base = os.path.join(folder or ".", *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def import_fresh(name: str) -> Any:
    """``importlib.import_module(name)``, reloading a module this process imported for a model spec when its source
    file has changed since."""
    importlib.invalidate_caches()  # a module (or package) written after this process started is found
    module = sys.modules.get(name)
    if module is None:
        module = importlib.import_module(name)
    elif name in _USER_SOURCES and _source_of(module) != _USER_SOURCES[name]:
        module = importlib.reload(module)
    elif name not in _USER_SOURCES:
        return module  # imported before the workbench asked for it: not the user's to reload
    signature = _source_of(module)
    if signature is not None:
        _USER_SOURCES[name] = signature
    return module


def _source_of(module: Any) -> Optional[tuple[int, int]]:
    try:
        status = os.stat(module.__file__)
    except (TypeError, OSError):  # a namespace package, a module without a file, or one gone since
        return None
    return status.st_mtime_ns, status.st_size


def source_digest(spec: str) -> Optional[str]:
    """A digest of the file that defines a ``module:function`` model (None for a built-in or torchvision name, or
    where the file cannot be found or read): a measurement kept for a model is not one of the model once edited.
    Only that file: an edit to a module it imports goes unseen. Finding a dotted module imports its packages
    (their ``__init__``), as the run that builds the model would."""
    if ":" not in spec:
        return None
    name = spec.partition(":")[0]
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None)
    if path is None:
        try:
            with working_directory_importable():
                importlib.invalidate_caches()
                found = importlib.util.find_spec(name)
        except (Exception, SystemExit):  # a package whose __init__ fails or exits, a bad name: the run says so
            return None
        path = found.origin if found is not None else None
    if path is None:
        return None
    try:
        with open(path, "rb") as source:
            return hashlib.sha256(source.read()).hexdigest()[:16]
    except OSError:
        return None
