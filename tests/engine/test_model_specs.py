"""--model takes the built-ins, torchvision's classification models by name, and the user's own
package.module:function (with model_kwargs); a spec that cannot give a model is refused with one line, nothing
recorded (issue 21 §2)."""

from __future__ import annotations

import json

import pytest
import torch

from workbench.cli import main
from workbench.engine.failures import ModelError
from workbench.engine.models import build_model, check_model
from workbench.history.store import HistoryStore

TINY = ["run", "--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "16", "--max-steps", "4",
        "--log-every", "2", "--num-workers", "0", "--device", "cpu"]




def test_the_users_own_model_with_kwargs_trains_and_is_recorded_with_them(user_module, capsys):
    home = user_module / "home"
    assert main(["--home", str(home), *TINY, "--model", "mymodels:tiny_net", "--model-kwargs", '{"width": 4}',
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["status"] == "finished" and data["steps"] == 4
    with HistoryStore.open(home) as store:
        (record,) = store.list_runs()
    assert (record.config.model, record.config.model_kwargs) == ("mymodels:tiny_net", '{"width": 4}')
    assert "mymodels:tiny_net" in record.name


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "squeezenet1_1", "shufflenet_v2_x0_5"])
def test_torchvision_models_by_name_build_and_run_a_forward_pass_on_two_images(name):
    model = build_model(name, 7, image_size=64)  # torchvision's own (ImageNet stem at 64: no weights downloaded)
    check_model(model, 7, 64, torch.device("cpu"), name)


def test_the_cifar_stem_stays_for_the_built_in_resnet18_at_32_only():
    assert build_model("resnet18", 10, image_size=32).conv1.kernel_size == (3, 3)
    assert build_model("resnet18", 10, image_size=64).conv1.kernel_size == (7, 7)


@pytest.mark.parametrize("spec, kwargs, words", [
    ("nosuchmodule:net", "", "model nosuchmodule:net: no module named 'nosuchmodule'"),
    ("mymodels:missing", "", "model mymodels:missing: mymodels has no function missing"),
    ("mymodels:tiny_ne", "", "model mymodels:tiny_ne: mymodels has no function tiny_ne (did you mean "
                             "mymodels:tiny_net?)"),  # issue 30 §8: a typo got no suggestion
    ("mymodels:raises", "", "model mymodels:raises: raises(num_classes=10) raised ValueError: width must be even"),
    ("mymodels:not_a_module", "", "model mymodels:not_a_module: not_a_module returned a str, not a torch.nn.Module"),
    ("mymodels:wrong_logits", "", "model mymodels:wrong_logits gives logits of shape (2, 11) for 2 images of "
                                  "3×32×32; the run needs (2, 10)"),
    ("resnet_18", "", "model 'resnet_18' is neither a built-in"),
    ("mymodels:tiny_net", '{"depth": 3}', "raised TypeError"),
    ("mymodels:tiny_net", "[1, 2]", "model_kwargs must be a JSON object"),
    ("mymodels:int_logits", "", "model mymodels:int_logits gives logits of type torch.int64; the loss needs "
                                "floating-point logits"),
    ("mymodels:no_parameters", "", "model mymodels:no_parameters has no trainable parameters"),
])
def test_a_model_spec_that_cannot_give_a_model_is_one_line_exit_2_and_records_nothing(user_module, capsys, spec,
                                                                                       kwargs, words):
    home = user_module / "home"
    code = main(["--home", str(home), *TINY, "--model", spec, "--model-kwargs", kwargs])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0], err
    assert "Traceback" not in err[0]
    if (home / "history.sqlite3").exists():
        with HistoryStore.open(home) as store:
            assert store.list_runs() == []


@pytest.mark.parametrize("spec, logits", [
    # Before: a RuntimeError from cross_entropy, its traceback in failures.log, exit 1.
    ("mymodels:first_two_only", "(2, 10)"),
    # Before: "IndexError: Target 6 is out of bounds" from the loss, a traceback, exit 1 (the check's batch runs in
    # evaluation mode, where the model is right).
    ("mymodels:other_head_in_training", "(16, 5)"),
])
def test_a_model_whose_logits_are_wrong_only_on_real_batches_fails_the_run_in_one_line(user_module, capsys, spec,
                                                                                      logits):
    home = user_module / "home"
    code = main(["--home", str(home), *TINY, "--model", spec])
    err = capsys.readouterr().err
    assert code == 2, err
    assert (f"workbench run: the model gave logits of shape {logits} and type torch.float32 for a batch of 16 images "
            "in training; the run needs (16, 10) floating-point logits: one row per image, one logit per class"
            ) in err.splitlines(), err
    assert "Traceback" not in err and "failures.log" not in err
    with HistoryStore.open(home) as store:
        (record,) = store.list_runs()
    assert (record.status, record.failure_kind) == ("failed", "config")


def test_a_function_without_num_classes_gets_only_its_kwargs(user_module):
    model = build_model("mymodels:no_classes", 10, model_kwargs='{"width": 3}')
    check_model(model, 10, 32, torch.device("cpu"))


def test_errors_name_what_went_wrong_without_a_traceback():
    with pytest.raises(ModelError, match="did you mean"):
        build_model("resnet", 10)


def test_a_near_miss_suggests_each_name_once():
    # resnet18 is a built-in (the CIFAR stem) and a torchvision name: one suggestion, not two.
    with pytest.raises(ModelError) as refused:
        build_model("resnet_18", 10)
    suggested = str(refused.value).partition("did you mean ")[2].rstrip("?)").split(" or ")
    assert "resnet18" in suggested and len(suggested) == len(set(suggested))


def test_a_module_fixed_after_its_spec_was_refused_is_read_again_in_the_same_process(user_module):
    # The window trains run after run in one process: the fix a refused spec asks for (in the user's own file)
    # must reach the next run, not the module as sys.modules first kept it.
    import sys

    module = user_module / "mymodels.py"
    module.write_text(module.read_text() + "\n\ndef later(num_classes):\n    raise ValueError('not yet')\n")
    with pytest.raises(ModelError, match="not yet"):
        build_model("mymodels:later", 10)
    first = sys.modules["mymodels"]
    assert build_model("mymodels:tiny_net", 10) is not None and sys.modules["mymodels"] is first  # unchanged: kept
    module.write_text(module.read_text().replace("raise ValueError('not yet')", "return tiny_net(num_classes)"))
    check_model(build_model("mymodels:later", 10), 10, 32, torch.device("cpu"))


def test_a_module_the_process_imported_before_is_not_reloaded(monkeypatch):
    import importlib

    def no_reload(module):
        raise AssertionError(f"{module.__name__} reloaded")

    monkeypatch.setattr(importlib, "reload", no_reload)
    assert build_model("torchvision.models:squeezenet1_1", 10) is not None
    assert build_model("torchvision.models:squeezenet1_1", 10) is not None
