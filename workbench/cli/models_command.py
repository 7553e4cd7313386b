"""`workbench models`: the model names `--model` takes (the built-ins and torchvision's classification models)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from workbench.setting_checks import BUILTIN_MODELS


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list the model names --model takes",
        description="The built-in models and every torchvision classification model, by the name --model takes "
        "(no weights are downloaded: runs train from scratch). Your own model is --model package.module:function, "
        "a function returning a torch.nn.Module, importable from the working directory or PYTHONPATH.",
    )
    parser.add_argument("--json", action="store_true", help="print {\"builtin\": [...], \"torchvision\": [...]}")
    parser.set_defaults(handler=models_command)


def models_command(args: argparse.Namespace) -> int:
    from torchvision import models as tv_models

    torchvision_names = tv_models.list_models(module=tv_models)
    if args.json:
        print(json.dumps(models_json(torchvision_names)))
        return 0
    print("built-in:    " + ", ".join(BUILTIN_MODELS))
    print("torchvision: " + ", ".join(torchvision_names))
    print("your own:    package.module:function (returns a torch.nn.Module; gets num_classes if it takes it, "
          "and --model-kwargs)")
    return 0


def models_json(torchvision_names: list[str]) -> dict[str, list[str]]:
    return {"builtin": list(BUILTIN_MODELS), "torchvision": torchvision_names}
