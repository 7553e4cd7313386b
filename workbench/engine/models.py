"""The model a run trains: a built-in, any torchvision classification model by name, or the user's own
``package.module:function``, each taking 3×image_size×image_size images and returning class logits.

Importing the user's module runs its code, as running their training script would: with the stop signals
unblocked (the helper thread that builds the model blocks them for DataLoader workers; a process the user's code
starts would inherit the mask and ignore ``kill``), and a sys.exit there (argparse at import) is a ModelError,
not the end of the training thread. A spec that cannot give a
model (no such module or function, a function that raises or returns no nn.Module, logits of the wrong shape)
is a ModelError: bad input, refused before the run starts (``check_model``).
"""

from __future__ import annotations

import difflib
import inspect
import os
from typing import Any, Optional

import torch
from torch import nn

from workbench.engine.failures import ModelError, is_out_of_memory, user_exit_words
from workbench.engine.worker_lifetime import stop_signals_unblocked
from workbench.setting_checks import BUILTIN_MODELS, model_kwargs_of
from workbench.user_modules import import_fresh, standard_library_problem, working_directory_importable


def small_cnn(num_classes: int, norm: str = "batch") -> nn.Module:
    """A few conv-norm-ReLU-pool blocks: fast enough to learn CIFAR on a laptop CPU.

    ``norm="group"`` uses GroupNorm (8 groups), which normalises each image on its own: the result does
    not depend on the batch, so a batch split over N data-parallel devices trains exactly as the whole
    batch on one device (BatchNorm computes its statistics over each device's slice).
    """

    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(cin, cout, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(cout) if norm == "batch" else nn.GroupNorm(8, cout),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )

    return nn.Sequential(
        block(3, 32),  # 16×16
        block(32, 64),  # 8×8
        block(64, 128),  # 4×4
        block(128, 256),  # 2×2
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(256, num_classes),
    )


def resnet18_cifar(num_classes: int, image_size: int = 32) -> nn.Module:
    """torchvision's resnet18; at 32×32 with the CIFAR stem (a 3×3 stride-1 first conv and no max-pool), so
    CIFAR's images are not shrunk to 8×8 before the first residual block. Larger images keep ImageNet's stem."""
    from torchvision import models as tv_models  # imported on use: it doubles a process's start-up time

    model = tv_models.resnet18(weights=None, num_classes=num_classes)
    if image_size == 32:
        model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    return model


def mobilenet_v3_small(num_classes: int, image_size: int = 32) -> nn.Module:
    from torchvision import models as tv_models

    return tv_models.mobilenet_v3_small(weights=None, num_classes=num_classes)


BUILDERS = {
    "small-cnn": lambda num_classes, image_size: small_cnn(num_classes),
    "small-cnn-gn": lambda num_classes, image_size: small_cnn(num_classes, norm="group"),
    "resnet18": resnet18_cifar,
    "mobilenet_v3_small": mobilenet_v3_small,
}
assert tuple(BUILDERS) == BUILTIN_MODELS  # setting_checks.py lists them for the form and the checks


# torchvision's classification models with auxiliary classifier heads (their aux_logits argument).
AUX_HEAD_MODELS = ("googlenet", "inception_v3")


def has_unused_parameters(model: nn.Module) -> bool:
    """Whether some of the model's parameters get no gradient from the loss: auxiliary heads kept by
    model_kwargs (aux_logits=True), whose outputs main_output() leaves out."""
    return bool(getattr(model, "aux_logits", False))


def build_model(spec: str, num_classes: int, image_size: int = 32, model_kwargs: str = "") -> nn.Module:
    """The model ``spec`` names (RunConfig.model), for ``num_classes`` classes; ModelError when it cannot."""
    if spec in BUILDERS:
        return BUILDERS[spec](num_classes, image_size)
    try:
        kwargs = model_kwargs_of(model_kwargs)
    except ValueError as error:
        raise ModelError(str(error)) from None
    if ":" in spec:
        return _user_model(spec, num_classes, kwargs)
    from torchvision import models as tv_models

    names = tv_models.list_models(module=tv_models)  # classification models only
    if spec not in names:
        known = list(dict.fromkeys([*BUILTIN_MODELS, *names]))  # resnet18 is both: suggested once
        nearest = difflib.get_close_matches(spec, known, n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(nearest)}?" if nearest else "`workbench models` lists them"
        raise ModelError(f"model {spec!r} is neither a built-in ({', '.join(BUILTIN_MODELS)}) nor a torchvision "
                         f"classification model nor package.module:function ({hint})")
    if spec in AUX_HEAD_MODELS:
        # Their auxiliary heads' outputs are left out of the loss (main_output): the heads would cost time, get no
        # gradient, and stop DistributedDataParallel at step 2 ("Expected to have finished reduction"). Built
        # without them unless model_kwargs ask; init_weights=True is what their None does, without its warning.
        kwargs = {"aux_logits": False, "init_weights": True, **kwargs}
    try:
        return tv_models.get_model(spec, weights=None, num_classes=num_classes, **kwargs)
    except Exception as error:
        raise ModelError(f"torchvision's {spec} with model_kwargs {kwargs} raised {type(error).__name__}: "
                         f"{error}") from None


def _user_model(spec: str, num_classes: int, kwargs: dict[str, Any]) -> nn.Module:
    module_name, _, function_name = spec.partition(":")
    problem = standard_library_problem(spec)  # whatever checked the settings before, nothing of Python's is called
    if problem is not None:
        raise ModelError(problem)
    try:
        with working_directory_importable(), stop_signals_unblocked():
            module = import_fresh(module_name)
    except ModuleNotFoundError as error:
        raise ModelError(f"model {spec}: no module named {error.name!r} (it must be importable from the working "
                         f"directory {os.getcwd()} or PYTHONPATH)") from None
    except (SystemExit, KeyboardInterrupt) as error:  # argparse at import calls sys.exit(2)
        raise ModelError(f"model {spec}: your module {module_name} {user_exit_words(error)} while being "
                         "imported") from None
    except BaseException as error:  # their module's own code failed as it was imported (or raised its own
        # BaseException, asyncio's CancelledError, a library's: as much theirs as a ValueError)
        raise ModelError(f"model {spec}: importing {module_name} raised {type(error).__name__}: {error}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        functions = [name for name, value in vars(module).items() if callable(value) and not name.startswith("_")]
        nearest = difflib.get_close_matches(function_name, functions, n=3, cutoff=0.6)
        hint = f" (did you mean {' or '.join(f'{module_name}:{name}' for name in nearest)}?)" if nearest else ""
        raise ModelError(f"model {spec}: {module_name} has no function {function_name}{hint}")
    if _takes(function, "num_classes") and "num_classes" not in kwargs:
        kwargs = {**kwargs, "num_classes": num_classes}
    try:
        with stop_signals_unblocked():
            model = function(**kwargs)
    except (SystemExit, KeyboardInterrupt) as error:
        raise ModelError(f"model {spec}: {function_name}({_call_text(kwargs)}) {user_exit_words(error)}") from None
    except BaseException as error:  # (a BaseException of theirs too: see the import's)
        raise ModelError(f"model {spec}: {function_name}({_call_text(kwargs)}) raised {type(error).__name__}: "
                         f"{error}") from None
    if not isinstance(model, nn.Module):
        raise ModelError(f"model {spec}: {function_name} returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def check_model(model: nn.Module, num_classes: int, image_size: int, device: torch.device,
                spec: str = "the model") -> None:
    """Run two images of the run's size through ``model`` (eval mode, no gradients); ModelError unless it gives
    logits of shape (2, num_classes)."""
    if not any(parameter.requires_grad for parameter in model.parameters()):
        raise ModelError(f"model {spec} has no trainable parameters: there is nothing for the optimizer to train")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), stop_signals_unblocked():
            output = main_output(model(torch.zeros(2, 3, image_size, image_size, device=device)))
    except (SystemExit, KeyboardInterrupt) as error:
        raise ModelError(f"model {spec} {user_exit_words(error)} on a batch of 2 images") from None
    except BaseException as error:  # (a BaseException of theirs too: see the import's)
        if is_out_of_memory(error):
            raise  # the device is full, the model may be fine: the run's failure says so
        raise ModelError(f"model {spec} failed on a batch of 2 images of 3×{image_size}×{image_size}: "
                         f"{type(error).__name__}: {error}") from None
    finally:
        model.train(was_training)
    if not isinstance(output, torch.Tensor) or tuple(output.shape) != (2, num_classes):
        got = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output).__name__
        raise ModelError(f"model {spec} gives logits of shape {got} for 2 images of 3×{image_size}×{image_size}; "
                         f"the run needs (2, {num_classes}): one logit per class for each image")
    if not output.is_floating_point():
        raise ModelError(f"model {spec} gives logits of type {output.dtype}; the loss needs floating-point logits")


def check_batch_logits(logits: Any, images: torch.Tensor, num_classes: Optional[int] = None) -> None:
    """ModelError unless ``logits`` has one row of floating-point logits per image (and ``num_classes`` columns,
    where given): a model that passed the dummy-batch check can still answer a real batch with another shape (a
    fixed batch size inside it; another head in training mode, the check being made in evaluation mode)."""
    if (isinstance(logits, torch.Tensor) and logits.ndim == 2 and logits.shape[0] == images.shape[0]
            and logits.is_floating_point() and num_classes in (None, logits.shape[1])):
        return
    got = (f"logits of shape {tuple(logits.shape)} and type {logits.dtype}" if isinstance(logits, torch.Tensor)
           else f"a {type(logits).__name__}")
    classes = "classes" if num_classes is None else f"{num_classes}"
    when = " in training" if torch.is_grad_enabled() else ""
    raise ModelError(f"the model gave {got} for a batch of {images.shape[0]} images{when}; the run needs "
                     f"({images.shape[0]}, {classes}) floating-point logits: one row per image, one logit per class")


def main_output(output: Any) -> Any:
    """The logits of a model's output: itself, the first of a tuple (torchvision's GoogLeNet and Inception give
    (logits, aux logits) in training: the aux heads are not trained here), or an output object's ``logits``."""
    if isinstance(output, (tuple, list)) and output:
        return output[0]
    logits = getattr(output, "logits", None)
    return logits if isinstance(logits, torch.Tensor) else output


def _takes(function: Any, name: str) -> bool:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def _call_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in kwargs.items())


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def to_memory_format(model: nn.Module, channels_last: bool) -> nn.Module:
    return model.to(memory_format=torch.channels_last) if channels_last else model
