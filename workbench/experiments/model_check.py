"""A sequence's model specs checked before it is recorded: a spec that gives no model (no such module or function, a
function that raises or returns no nn.Module, logits of the wrong shape) refuses the sequence as `workbench run`
refuses such a run (the CLI: one line, exit 2; the window: the reason), nothing recorded; not a sequence recorded
with every member failed. ``open_sequence`` asks, so every sequence, from the CLI or the window, is checked."""

from __future__ import annotations

from typing import Iterable, Optional

from workbench.config import RunConfig
from workbench.setting_checks import BUILTIN_MODELS


def model_build_problems(configs: Iterable[RunConfig]) -> list[str]:
    """What the engine would refuse each distinct model of ``configs`` with (built-ins are not built), each once."""
    problems: list[str] = []
    seen: set[tuple[str, str, int, str, str]] = set()
    for config in configs:
        key = (config.model, config.model_kwargs, config.image_size, config.dataset, config.data_path)
        if config.model in BUILTIN_MODELS or key in seen:
            continue
        seen.add(key)
        problem = spec_problem(config)
        if problem is not None and problem not in problems:
            problems.append(problem)
    return problems


def spec_problem(config: RunConfig) -> Optional[str]:
    """What a run of ``config`` would be refused with for its model, built and checked on the CPU as the run builds
    and checks it; None when the model is fine, or when the data must first say what is wrong with it."""
    import torch  # imported only now: the commands' own checks run without it

    from workbench.engine.ceiling_cache import num_classes_of
    from workbench.engine.data import DataError
    from workbench.engine.failures import ModelError
    from workbench.engine.models import build_model, check_model

    num_classes = num_classes_of(config)
    if num_classes is None:
        from workbench.engine.datasets import load_data

        try:
            num_classes = load_data(config).num_classes
        except DataError:
            return None  # the sequence refuses the data in its own words
    try:
        model = build_model(config.model, num_classes, config.image_size, config.model_kwargs)
        check_model(model, num_classes, config.image_size, torch.device("cpu"), config.model)
    except ModelError as error:
        return str(error)
    return None
