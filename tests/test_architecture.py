"""The package's shape, checked: no import cycles inside workbench/ (lazy imports in functions count too: they
run, and a cycle through them is a module that needs itself half-imported), and no lazy import that dodges one
(the module it imports names the importer for its types: the two depend on each other all the same)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"


def module_paths(package: Path = PACKAGE) -> dict[str, Path]:
    modules = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imports(module: str, path: Path, modules: dict[str, Path], kinds: frozenset[str] = frozenset({"top", "lazy"})
            ) -> set[str]:
    """The workbench modules ``module`` imports where ``kinds`` says: "top" (module level), "lazy" (in a function),
    "types" (under ``if TYPE_CHECKING``). By default everything that runs."""
    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found: set[str | None] = set()
    for kind, node in import_statements(path.read_text(encoding="utf-8")):
        if kind not in kinds:
            continue
        if isinstance(node, ast.Import):
            found.update(known(alias.name) for alias in node.names if alias.name.startswith("workbench"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            if base.startswith("workbench"):
                found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base)
                             for alias in node.names)
    return {name for name in found if name is not None and name != module}


@functools.lru_cache(maxsize=None)
def import_statements(source: str) -> tuple[tuple[str, ast.Import | ast.ImportFrom], ...]:
    """Each import statement of ``source`` with its kind: "types" anywhere under an ``if TYPE_CHECKING`` (its
    else too), else "lazy" anywhere in a function, else "top". One walk that carries where it is (a walk of each
    function's and each branch's nodes took seconds); cached, as each check reads every module again."""
    found = []
    todo: list[tuple[ast.AST, bool, bool]] = [(ast.parse(source), False, False)]
    while todo:
        node, types, lazy = todo.pop()
        types = types or (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
        lazy = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(("types" if types else "lazy" if lazy else "top", node))
        todo.extend((child, types, lazy) for child in ast.iter_child_nodes(node))
    return tuple(found)


def import_cycles(package: Path = PACKAGE) -> list[list[str]]:
    """Each group of modules that import one another round a loop (Tarjan's strongly connected components)."""
    modules = module_paths(package)
    graph = {module: imports(module, path, modules) for module, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycles_in_the_package():
    assert import_cycles() == []


def test_the_cycle_check_finds_a_cycle_through_a_lazy_import(tmp_path):
    package = tmp_path / "workbench"
    (package / "engine").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "engine" / "__init__.py").write_text("")
    (package / "engine" / "trainer.py").write_text("from workbench.engine.launcher import spawn\n")
    (package / "engine" / "launcher.py").write_text("def spawn():\n    from workbench.engine import trainer\n")
    (package / "engine" / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from workbench.engine import trainer\n")
    assert import_cycles(package) == [["workbench.engine.launcher", "workbench.engine.trainer"]]


def lazy_imports_closing_a_loop(package: Path = PACKAGE) -> list[tuple[str, str]]:
    """(importer, imported) for each lazy import whose target reaches back to the importer by any import, type-only
    ones included: a lazy import made so that two modules that need each other can load."""
    modules = module_paths(package)
    everything = frozenset({"top", "lazy", "types"})
    graph = {module: imports(module, path, modules, everything) for module, path in modules.items()}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            module = todo.pop()
            if module == goal:
                return True
            if module not in seen:
                seen.add(module)
                todo.extend(graph.get(module, ()))
        return False

    return sorted((module, imported) for module, path in modules.items()
                  for imported in imports(module, path, modules, frozenset({"lazy"})) if reaches(imported, module))


def test_no_lazy_import_dodges_a_cycle():
    assert lazy_imports_closing_a_loop() == []


def test_the_check_finds_a_lazy_import_whose_target_names_the_importer_for_types(tmp_path):
    """The shape history/store.py and history/recorder.py had: the store imported the recorder in start_run, and
    the recorder named the store for its types (and called its private writes)."""
    package = tmp_path / "workbench"
    (package / "history").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "history" / "__init__.py").write_text("")
    (package / "history" / "store.py").write_text(
        "class HistoryStore:\n    def start_run(self):\n        from workbench.history.recorder import RunRecorder\n")
    (package / "history" / "recorder.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from workbench.history.store import HistoryStore\n")
    (package / "history" / "naming.py").write_text("def name():\n    from workbench.history import recorder\n")
    assert import_cycles(package) == []  # no cycle that runs: the first check alone missed it
    assert lazy_imports_closing_a_loop(package) == [("workbench.history.store", "workbench.history.recorder")]


# Private names of other libraries the workbench calls on purpose, each with its reason at the call.
FOREIGN_PRIVATE_CALLS = {"os._exit", "np.lib.format._read_array_header", "signal_handling._remove_worker_pids"}


def private_calls_on_others(package: Path = PACKAGE) -> list[str]:
    """"path:line receiver._name" for each call of a private method on anything but self, cls or super(): one
    module reaching into another's object (the recorder called the store's ``_write_progress``)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name, receiver = node.func.attr, node.func.value
            if not name.startswith("_") or name.startswith("__") or ast.unparse(node.func) in FOREIGN_PRIVATE_CALLS:
                continue
            if (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")) or (
                    isinstance(receiver, ast.Call) and ast.unparse(receiver.func) == "super"):
                continue
            found.append(f"{path.relative_to(package.parent)}:{node.lineno} {ast.unparse(node.func)}")
    return found


def test_no_module_calls_another_objects_private_methods():
    assert private_calls_on_others() == []


def importers_of(top_level: str, package: Path = PACKAGE) -> list[str]:
    """The package's modules that import ``top_level`` (or a submodule of it) anywhere in their code."""
    found = []
    for module, path in sorted(module_paths(package).items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(name == top_level or name.startswith(top_level + ".") for name in names):
                found.append(module)
                break
    return found


def test_only_the_nvml_wrapper_imports_pynvml():
    """One door to NVML: its init/shutdown count and its reasons stay in one place (engine/nvml.py)."""
    assert importers_of("pynvml") == ["workbench.engine.nvml"]


TESTS = Path(__file__).resolve().parent


def leaks_between_test_modules(tests: Path = TESTS) -> list[str]:
    """"path:line what" for each test module (tests/**/test_*.py) that imports from another test module or edits
    ``sys.path``: what two test modules share belongs in tests/builders.py (or a helper module not named test_*),
    which pytest's import mode already puts on the path."""
    leaks = []
    for path in sorted(tests.rglob("test_*.py")):
        where, found = path.relative_to(tests), []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{where}:{node.lineno} imports {name}" for name in names
                      if any(part.startswith("test_") for part in name.split("."))]
            if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(
                    alias.name == "path" for alias in node.names):
                found.append(f"{where}:{node.lineno} imports sys.path")
            if isinstance(node, ast.Attribute) and (
                    (node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys")
                    or node.attr == "syspath_prepend"):
                found.append(f"{where}:{node.lineno} uses {ast.unparse(node)}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("importlib.import_module", "__import__") \
                    and node.args and isinstance(node.args[0], ast.Constant) \
                    and str(node.args[0].value).startswith("test_"):
                found.append(f"{where}:{node.lineno} imports {node.args[0].value}")
        leaks += sorted(found, key=lambda leak: int(leak.split(":")[1].split()[0]))
    return leaks


def test_no_test_module_imports_another_or_edits_sys_path():
    assert leaks_between_test_modules() == []


def test_the_leak_check_finds_an_import_of_a_test_module_and_a_sys_path_edit(tmp_path):
    (tmp_path / "gui").mkdir()
    (tmp_path / "gui" / "test_first.py").write_text(
        "import sys\nfrom pathlib import Path\n\nsys.path.insert(0, str(Path(__file__).parent))\n"
        "from test_main import run_once\nimport test_other\n")
    (tmp_path / "gui" / "test_second.py").write_text(
        "import importlib\nfrom sys import path\n\n\ndef test_it(monkeypatch):\n"
        "    monkeypatch.syspath_prepend('..')\n    importlib.import_module('test_main')\n")
    (tmp_path / "gui" / "helpers.py").write_text("import sys\nsys.path.append('.')\n")  # not a test module
    (tmp_path / "test_fine.py").write_text("from builders import CPU\nimport sys\n\nARGS = sys.argv\n")
    assert leaks_between_test_modules(tmp_path) == [
        "gui/test_first.py:4 uses sys.path",
        "gui/test_first.py:5 imports test_main",
        "gui/test_first.py:6 imports test_other",
        "gui/test_second.py:2 imports sys.path",
        "gui/test_second.py:6 uses monkeypatch.syspath_prepend",
        "gui/test_second.py:7 imports test_main",
    ]
