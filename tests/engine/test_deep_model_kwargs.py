"""model_kwargs nested deeper than any keyword arguments are refused with one line wherever they come from (issue 28
item 4): json.loads raised RecursionError, a traceback at every check of the settings."""

import json

import pytest

from workbench.cli import main
from workbench.config import RunConfig
from workbench.setting_checks import MODEL_KWARGS_MAX_DEPTH, json_nesting_depth, model_kwargs_of

DEEP = {
    "arrays": "[" * 5000 + "]" * 5000,
    "objects": '{"a": ' * 5000 + "1" + "}" * 5000,
    "inside-an-object": '{"width": ' + "[" * 100_000 + "]" * 100_000 + "}",
}
TINY = ["run", "--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "32", "--max-steps", "3",
        "--device", "cpu", "--num-workers", "0", "--no-history", "--model", "mymodels:tiny_net"]


@pytest.mark.parametrize("case", list(DEEP))
def test_deep_model_kwargs_are_a_problem_of_the_settings_not_a_recursion_error(case):
    problems = RunConfig(model="mymodels:tiny_net", model_kwargs=DEEP[case]).validate()
    assert [problem for problem in problems if "nest" in problem] == [
        f"model_kwargs nest {json_nesting_depth(DEEP[case]):,} levels deep; at most {MODEL_KWARGS_MAX_DEPTH} are read"]


def test_the_depth_counts_brackets_outside_strings_only():
    assert json_nesting_depth('{"a": [1, {"b": "[[[[\\"{{"}]}') == 3
    kwargs = '{"a": ' * MODEL_KWARGS_MAX_DEPTH + "1" + "}" * MODEL_KWARGS_MAX_DEPTH
    assert isinstance(model_kwargs_of(kwargs), dict)  # the limit itself is read
    with pytest.raises(ValueError, match="nest 33 levels deep"):
        model_kwargs_of('{"a": ' + kwargs + "}")


@pytest.mark.parametrize("case", ["arrays", "inside-an-object"])
def test_deep_model_kwargs_on_the_command_line_are_one_line_exit_2(capsys, case):
    code = main([*TINY, "--model-kwargs", DEEP[case]])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "levels deep" in err and "Traceback" not in err, err


def test_deep_model_kwargs_in_a_config_file_are_one_line_exit_2(capsys, tmp_path):
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"model": "mymodels:tiny_net", "model_kwargs": DEEP["arrays"]}))
    code = main([*TINY, "--config", str(config)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "levels deep" in err and "Traceback" not in err, err
