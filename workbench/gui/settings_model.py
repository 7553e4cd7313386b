"""What the settings form shows besides the values, worked out without Qt (testable without a window).

Labels and tooltips per RunConfig field, the groups they sit in, the facts derived from a config
(effective batch, dataset size, steps), which fields do nothing with the other settings, which
choices this machine cannot run, and which fields a validation problem is about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from workbench import data_check, settings_help
from workbench.config import CHOICES, FIELD_NAMES, RunConfig
from workbench.device_info import DeviceInfo
from workbench.settings_help import SPECS, FieldSpec  # noqa: F401 (the form reads them from here)

# Groups in the order the form shows them, the most-used settings first (what a user changes between
# two runs sits above the fold); every RunConfig field sits in exactly one.
GROUPS: dict[str, tuple[str, ...]] = {
    "Run": ("epochs", "batch_size", "device", "devices", "max_steps", "accumulation_steps", "seed", "log_every",
            "evaluate"),
    "Data": ("dataset", "data_path", "image_size", "synthetic_size", "decode",
             "skip_bad_images"),  # image_size: what the data becomes
    "Loader": (
        "pipeline", "augment", "num_workers", "pin_memory", "non_blocking", "persistent_workers",
        "prefetch_factor", "worker_start_method",
    ),
    "Precision & kernels": ("precision", "channels_last", "compile", "fused_optimizer", "cudnn_benchmark"),
    "Model & optimiser": ("model", "model_kwargs", "optimizer", "lr", "weight_decay", "label_smoothing",
                          "max_grad_norm"),
    "Measurement": ("profile", "profile_every"),
}

# Fields whose choices depend on the hardware (their reasons come from RunConfig.hardware_problems).
HARDWARE_FIELDS = ("device", "precision")


@dataclass(frozen=True)
class DerivedFacts:
    effective_batch_size: Optional[int]  # None with devices=0: it depends on the GPUs the run finds
    train_size: Optional[int]  # None when it cannot be known without loading the data
    steps_per_epoch: Optional[int]
    total_steps: Optional[int]

    def describe(self, config: RunConfig, counting: bool = False) -> str:
        """``counting``: a folder's images are being counted off the GUI thread."""
        factors = [f"{config.batch_size:,}"]
        if config.devices != 1:
            factors.append(f"{config.devices} devices" if config.devices else "every visible GPU")
        if config.accumulation_steps > 1:
            factors.append(f"{config.accumulation_steps} accumulated")
        if self.effective_batch_size is None:
            batch = "Effective batch " + " × ".join(factors)
        else:
            batch = f"Effective batch {self.effective_batch_size:,}"
            if len(factors) > 1:
                batch += f" ({' × '.join(factors)})"
        parts = [batch]
        if self.train_size is None:
            parts.append("counting the folder's images…" if counting else "dataset size known once the data loads")
        else:
            parts.append(f"{self.train_size:,} training images")
            if self.steps_per_epoch is not None and self.total_steps is not None:
                parts.append(f"{self.steps_per_epoch:,} steps per epoch")
                parts.append(f"{self.total_steps:,} steps in all")
        return " · ".join(parts)


def derive(config: RunConfig, folder_images: Optional[int] = None) -> DerivedFacts:
    """``folder_images``: the training images of ``config``'s folder, counted off the GUI thread (None: not yet)."""
    train_size = folder_images if config.dataset == "folder" else dataset_size(config)
    steps_per_epoch = total_steps = None
    if train_size is not None and config.devices >= 1:  # devices=0: each GPU's share is known at run time
        # Each process takes its share of the data; the engine drops the last partial batch.
        steps_per_epoch = train_size // config.devices // config.batch_size
        total_steps = config.max_steps if config.max_steps is not None else config.epochs * steps_per_epoch
    return DerivedFacts(config.effective_batch_size, train_size, steps_per_epoch, total_steps)


def dataset_size(config: RunConfig) -> Optional[int]:
    """Training images, known without loading the data (an .npz header is read, not its arrays)."""
    return data_check.train_size(config)


def problems(config: RunConfig, device: Optional[DeviceInfo]) -> list[str]:
    """Everything that would stop this config from running, in words: RunConfig's own checks plus
    the data checks that are cheap (the .npz headers, a batch larger than the training set)."""
    return config.validate(device) + data_check.data_problems(config)


def fields_named_in(problem: str, config: RunConfig, device: Optional[DeviceInfo]) -> set[str]:
    """The RunConfig fields a problem sentence is about, to mark those widgets: the ones it names,
    and a hardware field whose chosen value it names when this machine cannot run that value
    ("fp16 needs a CUDA GPU" is about precision)."""
    words = set(re.findall(r"[a-z0-9_]+", problem))
    named = {name for name in FIELD_NAMES if name in words}
    if config.data_path and (config.data_path in problem or str(Path(config.data_path).expanduser()) in problem):
        named.add("data_path")  # a problem with the file ("… is not a valid npz archive") names its path
    for name, reasons in unavailable_choices(device).items():
        value = getattr(config, name)
        if value in reasons and value in words:
            named.add(name)
    return named


def unavailable_choices(device: Optional[DeviceInfo]) -> dict[str, dict[str, str]]:
    """field → {choice: why this machine cannot run it}; empty until the device is known."""
    if device is None:
        return {}
    result: dict[str, dict[str, str]] = {}
    for name in HARDWARE_FIELDS:
        for choice in CHOICES[name]:
            reasons = RunConfig(**{name: choice}).hardware_problems(device)
            if reasons:
                result.setdefault(name, {})[choice] = "; ".join(reasons)
    return result


def inactive_fields(config: RunConfig, device: Optional[DeviceInfo]) -> dict[str, str]:
    """field → why it has no effect with the other settings (the form greys it out, the value is kept)."""
    return settings_help.inactive_fields(config, on_cpu=on_cpu(config, device))


def device_notes(config: RunConfig, device: Optional[DeviceInfo]) -> dict[str, str]:
    """field → what it does on this machine, where that differs from what its name says (a CPU run)."""
    if not on_cpu(config, device):
        return {}
    return {"augment": "no CUDA GPU here: augment=gpu runs the same random crop + flip on whole batches on the CPU, "
                       "in the training thread after each batch is loaded; augment=cpu does it per image in the "
                       "loader workers, alongside training"}


# What an inactive switch says beside its box (the tooltip says why); on a CPU, the GPU copy's two switches.
CPU_SWITCH_TEXT = "does nothing on the CPU"
INACTIVE_SWITCH_TEXT = "not used"
AUGMENT_ON_CPU_TEXT = "gpu (on the CPU here)"


def on_cpu(config: RunConfig, device: Optional[DeviceInfo]) -> bool:
    """Whether a run of ``config`` trains on the CPU here (unknown until the device is: False)."""
    return device is not None and (not device.cuda_available or config.device == "cpu")
