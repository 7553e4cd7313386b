"""The core never imports Qt; the cheap modules never import torch."""

import subprocess
import sys

import pytest


def imported_after(code: str) -> set[str]:
    script = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(result.stdout.split())


@pytest.mark.parametrize(
    "code",
    [
        "import workbench.engine.trainer, workbench.engine.data, workbench.engine.memory",
        "from workbench.cli import main, run_command",
        "import workbench.history",
        "import workbench.experiments.sweep, workbench.experiments.tune, workbench.experiments.max_batch",
        "import workbench.controller.lifecycle, workbench.controller.jobs, workbench.controller.messages",
    ],
)
def test_core_imports_no_qt(code):
    modules = imported_after(code)
    assert not {name for name in modules if name.startswith(("PySide6", "pyqtgraph", "shiboken6"))}


def test_config_and_events_do_not_import_torch():
    # The GUI builds its form from these before its first paint; torch would cost a second or more.
    assert "torch" not in imported_after("import workbench.config, workbench.engine.events, workbench.engine")


def test_the_timeline_analysis_findings_and_ceiling_cache_need_no_torch_or_pandas():
    # The breakdown is plain Python over activity records: the history and the GUI read it without torch.
    modules = imported_after(
        "import workbench.engine.timeline, workbench.engine.kineto, workbench.engine.findings, workbench.engine.run_facts, "
        "workbench.engine.finding_measurements, "
        "workbench.engine.summary, workbench.engine.ceiling_cache, workbench.engine.requests"
    )
    assert not {name for name in modules if name.split(".")[0] in ("torch", "pandas", "numpy")}


def test_reading_another_programs_trace_needs_no_torch_qt_or_pandas():
    # A folder's rank files are read in fresh processes, each a quarter of a second to start (rank_pool.py);
    # torch would add a second or more to each, and to every `workbench trace`.
    modules = imported_after(
        "import workbench.trace_analysis, workbench.trace_analysis.rank_worker, workbench.trace_analysis.comparing, "
        "workbench.trace_analysis.report_text, workbench.trace_analysis.report_json")
    assert not {name for name in modules if name.split(".")[0] in ("torch", "PySide6", "pandas", "numpy")}


def test_sequences_import_torch_only_when_they_run():
    # A GUI validates a sweep's values while the user types them: the plans and their checks stay cheap.
    assert "torch" not in imported_after(
        "import workbench.experiments.sweep, workbench.experiments.tune, workbench.experiments.max_batch, "
        "workbench.experiments.recording")



@pytest.mark.parametrize("module", ["config", "device_info"])
def test_settings_depend_on_nothing_in_the_engine(module):
    # Settings are plain data: what validate() needs about the device lives beside the config.
    # Read the source, not sys.modules, so an import under TYPE_CHECKING counts too.
    import ast
    from pathlib import Path

    import workbench

    tree = ast.parse((Path(workbench.__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {name for name in imported if name.startswith("workbench.engine")}


def test_the_training_engine_imports_torchvision_only_on_use():
    # Every distributed rank is a fresh process: torchvision's import doubled each one's start-up.
    modules = imported_after(
        "from workbench.engine.trainer import run\nfrom workbench.engine.device import probe_device\n"
        "assert probe_device('cpu').torchvision_version"
    )
    assert "torch" in modules and "torchvision" not in modules


def test_the_probed_torchvision_version_is_the_installed_one():
    import torchvision

    from workbench.engine.device import _torchvision_version

    assert _torchvision_version() == torchvision.__version__


def test_a_torchvision_another_thread_is_still_importing_does_not_fail_the_probe(monkeypatch):
    """While a thread imports torchvision (the window's sample preview), sys.modules holds it without __version__
    yet: a probe on another thread read that, and raised AttributeError ("partially initialized module")."""
    import types

    import torchvision

    from workbench.engine.device import _torchvision_version

    importing = types.ModuleType("torchvision")
    importing.__spec__ = torchvision.__spec__  # as the import machinery sets it before running the package
    monkeypatch.setitem(sys.modules, "torchvision", importing)
    assert _torchvision_version() == torchvision.__version__
