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

from workbench.replaced_file import keep_permissions, replaced_file, temporary_beside


def save_weights(model: nn.Module, path: str) -> Path:
    """Write ``model``'s state_dict to ``path`` (``~`` expanded); the path written. OSError when it cannot be."""
    module = getattr(model, "module", model)  # DistributedDataParallel
    module = getattr(module, "_orig_mod", module)  # torch.compile's wrapper
    target = Path(os.path.expanduser(path))
    written = replaced_file(target)  # a symlink's target: the link stays
    partial = temporary_beside(written, f"{os.getpid()}.partial")
    try:
        try:
            # opened here, not by torch: a failed open is an OSError whose errno says why
            with open(partial, "wb") as stream:
                torch.save(module.state_dict(), stream)
        except RuntimeError as error:  # torch's zip writer reports a failed write this way
            raise OSError(_torch_save_words(error)) from None
        keep_permissions(written, partial)
        os.replace(partial, written)
    finally:
        with contextlib.suppress(OSError):  # a read-only file system refuses this too: the first error says why
            partial.unlink(missing_ok=True)
    return target


def _torch_save_words(error: RuntimeError) -> str:
    """torch.save's RuntimeError as a reason: a write cut short says "unexpected pos 64 vs 0"."""
    text = str(error).strip()
    if "unexpected pos" in text:
        return f"the file could not be written whole, is the disk full? ({text})"
    return text.splitlines()[0] if text else type(error).__name__
