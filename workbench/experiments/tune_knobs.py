"""What the search for faster settings may try: the speed knobs, in the order a pass tries them, and each knob's
changes worth trying from given settings on a given device (none where the knob has no effect there)."""

from __future__ import annotations

import os
from typing import Any, Optional

from workbench.config import SETTINGS, RunConfig, cuda_graphs_problem
from workbench.device_info import DeviceInfo


# The knobs are declared on the settings (config.SETTINGS[name].tune), each with its place in a search pass; a
# knob of several settings (placement: pipeline and augment together) is tried once.
_TUNED = sorted((declared.tune.order, name, declared.tune) for name, declared in SETTINGS.items()
                if declared.tune is not None)
KNOBS: tuple[str, ...] = tuple(dict.fromkeys(tune.knob or name for _, name, tune in _TUNED if not tune.if_allowed))
# Settings that change what is learned: searched only when the user allows them. lr is not a knob of its own;
# allowed, it follows the batch size (the linear scaling rule).
OPTIONAL_KNOBS: tuple[str, ...] = tuple(dict.fromkeys(tune.knob or name for _, name, tune in _TUNED if tune.if_allowed))
ALLOWABLE: tuple[str, ...] = tuple(name for _, name, tune in _TUNED if tune.if_allowed)

PREFETCH_VALUES = (2, 4, 8)
ACCUMULATION_VALUES = (1, 2, 4)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def candidates(knob: str, config: RunConfig, device: DeviceInfo, allow: frozenset[str] = frozenset(),
               cores: Optional[int] = None) -> list[dict[str, Any]]:
    """The changes worth trying for ``knob`` from ``config`` on this device (none where it has no effect)."""
    on_cuda = device.type == "cuda"
    loader = config.pipeline == "dataloader"
    workers = loader and config.num_workers > 0
    options: list[dict[str, Any]]
    if knob == "placement":
        if config.augment == "none":  # no augmentation to place: only where batches come from
            options = [{"pipeline": "dataloader"}, {"pipeline": "gpu-resident"}]
        else:  # the same crop + flip, per image in the workers or batched on the device
            options = [
                {"pipeline": "dataloader", "augment": "cpu"},
                {"pipeline": "dataloader", "augment": "gpu"},
                {"pipeline": "gpu-resident", "augment": "gpu"},
            ]
    elif knob == "num_workers":
        if not loader:
            return []
        cores = cores or usable_cores()
        values = {value for value in (0, 1, 2, 4, 8, 16, 32, 64) if value <= cores} | {min(cores, 64)}
        options = [{"num_workers": value} for value in sorted(values)]
    elif knob in ("pin_memory", "non_blocking"):
        if not (loader and on_cuda):  # both act on the host → device copy
            return []
        options = [{knob: not getattr(config, knob)}]
    elif knob == "persistent_workers":
        options = [{knob: not config.persistent_workers}] if workers else []
    elif knob == "prefetch_factor":
        options = [{knob: value} for value in PREFETCH_VALUES] if workers else []
    elif knob == "precision":
        options = [{knob: value} for value in ("fp32", "fp16", "bf16")] if on_cuda else []
    elif knob == "channels_last":
        options = [{knob: not config.channels_last}]
    elif knob == "fused_optimizer":
        options = [{knob: not config.fused_optimizer}] if on_cuda else []  # the fused kernels are CUDA's
    elif knob == "compile":
        # max-autotune is left out: it compiles for minutes, more than a trial's budget; CUDA graphs need CUDA.
        modes = ("off", "default", "reduce-overhead") if on_cuda else ("off", "default")
        options = [{knob: mode} for mode in modes]
    elif knob == "batch_size":
        options = []
        for size in (config.batch_size // 2, config.batch_size * 2, config.batch_size * 4):
            if size >= 1:
                change: dict[str, Any] = {"batch_size": size}
                if "lr" in allow:
                    change["lr"] = config.lr * size / config.batch_size
                options.append(change)
    elif knob == "accumulation_steps":
        options = [{knob: value} for value in ACCUMULATION_VALUES]
    else:
        raise ValueError(f"unknown knob {knob!r}")
    # Only real changes, and only settings this machine can run: CUDA graphs never with accumulation (the rule
    # validation refuses with its reason, so the tune never proposes what a run would refuse).
    return [change for change in options if config.replace(**change) != config
            and cuda_graphs_problem(config.replace(**change)) is None]
