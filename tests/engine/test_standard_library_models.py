"""A model spec naming a function of Python's standard library (a --config's "os:system" with model_kwargs
{"command": ...}) ran the shell command before the run was refused: refused before anything is imported or
called, in the CLI and the window (both check the settings with RunConfig.validate) and in the engine itself."""

from __future__ import annotations

import json

import pytest

from workbench.cli import main
from workbench.config import RunConfig
from workbench.engine.failures import ModelError
from workbench.engine.models import build_model


def test_a_config_naming_os_system_is_refused_and_runs_nothing(capsys, tmp_path):
    marker = tmp_path / "ran"
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "os:system", "model_kwargs": json.dumps({"command": f"echo > {marker}"}),
                                    "dataset": "synthetic", "max_steps": 1, "device": "cpu"}))
    code = main(["run", "--config", str(settings), "--no-history"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "model 'os:system' names a function of Python's standard library (os), where no model lives" in err
    assert not marker.exists()


@pytest.mark.parametrize("spec", ["subprocess:run", "os.path:exists", "builtins:exec"])
def test_the_settings_check_refuses_any_standard_library_module(spec):
    problems = RunConfig(model=spec).validate()
    assert any(f"model {spec!r} names a function of Python's standard library" in problem for problem in problems)


def test_the_engine_refuses_it_without_calling_it(tmp_path):
    marker = tmp_path / "ran"
    with pytest.raises(ModelError, match="standard library"):
        build_model("os:system", 10, model_kwargs=json.dumps({"command": f"echo > {marker}"}))
    assert not marker.exists()


def test_a_users_own_module_named_like_pythons_is_told_to_be_renamed(tmp_path, monkeypatch):
    """A user's code.py in the working directory (a common name for a first script) was refused as "a function of
    Python's standard library, where no model lives", which is false of their file and says nothing of what to do.
    It is still refused (the import may give Python's code module, and the file hides it from every library),
    with its path and the rename that makes it work."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "code.py").write_text("def model(num_classes):\n    raise AssertionError('never imported')\n")
    (problem,) = RunConfig(model="code:model").validate()
    assert problem == (f"model 'code:model': your {tmp_path / 'code.py'} is named like Python's own module code; the "
                       "import may give Python's instead, and yours hides Python's from every library that imports "
                       "it: rename it (say my_code) and give my_code:model")
    with pytest.raises(ModelError, match="rename it"):
        build_model("code:model", 10)
