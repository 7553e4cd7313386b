"""A run's trained weights written to the file its ``save_model`` names (torch.save of the state_dict).

The module saved is the user's own: DistributedDataParallel's ``.module`` and torch.compile's ``_orig_mod`` are
unwrapped, so the file loads into the model spec it was trained from (``model.load_state_dict(torch.load(path))``).
Written beside the target and renamed over it: a full disk or a crash leaves the old file whole, never half a file.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch
from torch import nn


def save_weights(model: nn.Module, path: str) -> Path:
    """Write ``model``'s state_dict to ``path`` (``~`` expanded); the path written. OSError when it cannot be."""
    module = getattr(model, "module", model)  # DistributedDataParallel
    module = getattr(module, "_orig_mod", module)  # torch.compile's wrapper
    target = Path(os.path.expanduser(path))
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        torch.save(module.state_dict(), partial)
        os.replace(partial, target)
    finally:
        with contextlib.suppress(OSError):  # a read-only file system refuses this too: the first error says why
            partial.unlink(missing_ok=True)
    return target
