"""The user's own modules (a model given as ``package.module:function``), without torch: importable from the
working directory, imported afresh once edited, and told apart by their source.

Importing a user's module runs its code, as running their own training script would (README).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
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


def module_import_files(spec: str) -> list[tuple[str, str]]:
    """The files the import of a ``module:function`` spec's module reads, each with what it is in words, found
    without running any code of the user's: the module as already imported, else as the import system would find it
    (its packages' ``__init__`` are not run). A source module gives its .py and its cached .pyc; a sourceless .pyc or
    an extension module (.so, .pyd) itself; a module inside a zip file on sys.path the archive. [] for any other
    spec, or where the module is not found."""
    if ":" not in spec:
        return []
    name = spec.partition(":")[0]
    try:
        with working_directory_importable():
            importlib.invalidate_caches()  # a module written after this process started is found
            found = _spec_without_running(name)
    except Exception:  # a finder that fails on this name: the run's import says why
        return []
    if found is None:
        return []
    files = []
    archive = getattr(found.loader, "archive", None)  # zipimport's: the module lives inside this file
    if isinstance(archive, str):
        files.append((archive, "the zip archive the model's module is imported from"))
    elif found.has_location and isinstance(found.origin, str):
        compiled = not isinstance(found.loader, importlib.machinery.SourceFileLoader)  # a .pyc alone, a .so, a .pyd
        files.append((found.origin, "the compiled file the model's module is imported from" if compiled
                      else "the source of the model's module"))
        if isinstance(found.cached, str) and not compiled:
            files.append((found.cached, "the cached bytecode of the model's module"))
    return files


def _spec_without_running(name: str) -> Optional[importlib.machinery.ModuleSpec]:
    """The spec the import of ``name`` would use, its packages found as the import finds them but none run (as
    ``importlib.util.find_spec`` would run them); None where a part of the name is not found."""
    imported = sys.modules.get(name)
    if imported is not None:  # (os.path: a module imported under a name no package of it gives)
        return getattr(imported, "__spec__", None)
    found: Optional[importlib.machinery.ModuleSpec] = None
    search: Optional[list[str]] = None  # sys.path for the top-level name, then the package's folders
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        full = ".".join(parts[:depth])
        module = sys.modules.get(full)
        if module is not None:
            found = getattr(module, "__spec__", None)
            folders = getattr(module, "__path__", None)
        else:
            found = next((spec for spec in (finder.find_spec(full, search) for finder in sys.meta_path
                                            if hasattr(finder, "find_spec")) if spec is not None), None)
            folders = None if found is None else found.submodule_search_locations
        if found is None or (depth < len(parts) and folders is None):
            return None
        search = list(folders) if folders is not None else None
    return found


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
