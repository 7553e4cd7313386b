"""The package's shape, checked: no import cycles inside workbench/ (lazy imports in functions count too: they
run, and a cycle through them is a module that needs itself half-imported)."""

from __future__ import annotations

import ast
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


def imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The workbench modules ``module`` imports anywhere in its code, but under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only = {id(node) for branch in ast.walk(tree) if isinstance(branch, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(branch.test) for node in ast.walk(branch)}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found: set[str | None] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
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
