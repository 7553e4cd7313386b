"""What the settings form shows besides the values, worked out without Qt (testable without a window).

Labels and tooltips per RunConfig field, the groups they sit in, the facts derived from a config
(effective batch, dataset size, steps), which fields do nothing with the other settings, which
choices this machine cannot run, and which fields a validation problem is about.
"""

from __future__ import annotations

import functools
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from workbench.config import CHOICES, FIELD_NAMES, RunConfig
from workbench.device_info import DeviceInfo


@dataclass(frozen=True)
class FieldSpec:
    label: str
    tooltip: str


# Groups in the order the form shows them; every RunConfig field sits in exactly one.
GROUPS: dict[str, tuple[str, ...]] = {
    "Data": ("dataset", "data_path", "synthetic_size"),
    "Loader": (
        "pipeline", "augment", "num_workers", "pin_memory", "non_blocking", "persistent_workers",
        "prefetch_factor", "worker_start_method",
    ),
    "Model & optimiser": ("model", "optimizer", "lr", "weight_decay", "label_smoothing"),
    "Precision": ("precision", "channels_last", "compile"),
    "Run": ("epochs", "max_steps", "batch_size", "accumulation_steps", "seed", "device", "log_every"),
}

SPECS: dict[str, FieldSpec] = {
    "dataset": FieldSpec(
        "Dataset",
        "Where the training images come from.\n"
        "• synthetic: CIFAR-shaped images made in memory (learnable colour templates plus noise): fast, "
        "offline, good for measuring the pipeline.\n"
        "• npz: a .npz file with train_images, train_labels, test_images, test_labels (uint8, N×32×32×3).\n"
        "• cifar10 / cifar100: the torchvision datasets, from the data folder.",
    ),
    "data_path": FieldSpec(
        "Data file / folder",
        "npz: the .npz file to train on.\n"
        "cifar10 / cifar100: the folder holding the torchvision download (empty = the datasets folder in "
        "the workbench home).",
    ),
    "synthetic_size": FieldSpec(
        "Synthetic images",
        "How many synthetic training images to make; the test split is a fifth of this.",
    ),
    "pipeline": FieldSpec(
        "Pipeline",
        "How batches reach the model.\n"
        "• dataloader: a torch DataLoader prepares batches on the host (in worker processes when "
        "num_workers > 0) and each batch is copied to the device. The usual setup.\n"
        "• gpu-resident: the whole dataset is copied to the device once and batches are sliced there: no "
        "workers, no per-step copies. The fastest choice when the dataset fits in device memory.",
    ),
    "augment": FieldSpec(
        "Augmentation",
        "Random crop (4-pixel padding) and horizontal flip, two ways that do the same thing:\n"
        "• cpu: per image in the DataLoader workers. Costs CPU time for every image and can leave a fast "
        "GPU waiting for data.\n"
        "• gpu: on whole batches on the device after the copy. Frees the CPU; usually far cheaper.\n"
        "• none: no augmentation, the baseline that shows what augmentation costs.\n"
        "The Sample batch tab shows what the model sees.",
    ),
    "num_workers": FieldSpec(
        "Loader workers",
        "DataLoader worker processes preparing batches while the model trains.\n"
        "0 loads in the training thread: simple, but the device waits for every batch. More workers help "
        "until the CPU cores are busy; beyond the core count they only compete with each other.\n"
        "If the data-wait plot is high, add workers or move augmentation to the GPU.",
    ),
    "pin_memory": FieldSpec(
        "Pin memory",
        "Put batches in page-locked (pinned) host memory. Copies from pinned memory to a CUDA GPU are "
        "faster and can run asynchronously (see non_blocking). No effect without a CUDA GPU.",
    ),
    "non_blocking": FieldSpec(
        "Non-blocking copies",
        "Copy batches to the GPU with non_blocking=True: from pinned memory the copy overlaps with compute "
        "instead of stalling the host. Needs pin_memory to help; no effect without a CUDA GPU.",
    ),
    "persistent_workers": FieldSpec(
        "Persistent workers",
        "Keep the DataLoader workers alive between epochs instead of starting new ones each epoch "
        "(starting them costs seconds with big datasets or the spawn start method). Needs num_workers ≥ 1.",
    ),
    "prefetch_factor": FieldSpec(
        "Prefetch per worker",
        "Batches each worker prepares ahead. Higher values smooth out uneven loading at the cost of host "
        "memory. Needs num_workers ≥ 1.",
    ),
    "worker_start_method": FieldSpec(
        "Worker start method",
        "How worker processes start.\n"
        "• fork: fastest to start; the worker is a copy of this process (Linux).\n"
        "• spawn / forkserver: a fresh interpreter per worker: slower to start, safe with threads and CUDA. "
        "Matters most when persistent_workers is off.",
    ),
    "model": FieldSpec(
        "Model",
        "• small-cnn: a few convolution layers; quick, so the input pipeline shows clearly.\n"
        "• resnet18 (CIFAR stem): a real workload of about 11 M parameters.\n"
        "• mobilenet_v3_small: light, many small kernels: often limited by launch overhead, not compute.",
    ),
    "optimizer": FieldSpec(
        "Optimiser",
        "• sgd: SGD with Nesterov momentum 0.9, the classic CIFAR recipe.\n"
        "• adamw: Adam with decoupled weight decay; usually wants a smaller learning rate (about 1e-3).",
    ),
    "lr": FieldSpec(
        "Learning rate",
        "Peak learning rate: it warms up linearly over the first tenth of the optimiser steps, then decays "
        "linearly to 0. About 0.05–0.1 suits sgd, 1e-3 adamw; scale it with the effective batch.",
    ),
    "weight_decay": FieldSpec(
        "Weight decay",
        "Pulls weights towards zero each step (decoupled from the gradient for adamw). 5e-4 is typical for "
        "CIFAR with sgd; 0 turns it off.",
    ),
    "label_smoothing": FieldSpec(
        "Label smoothing",
        "Spreads this share of each target's probability over the other classes: mild regularisation "
        "(0.1 is common). 0 turns it off. Test loss is always plain cross-entropy.",
    ),
    "precision": FieldSpec(
        "Precision",
        "• fp32: full precision everywhere.\n"
        "• fp16: mixed precision (autocast) with a gradient scaler: on tensor-core GPUs often 2–3× faster "
        "with about half the activation memory.\n"
        "• bf16: mixed precision with fp32's range, so no scaler; needs native support (compute "
        "capability 8.0+, Ampere or newer).\n"
        "fp16 and bf16 need a CUDA GPU.",
    ),
    "channels_last": FieldSpec(
        "Channels last",
        "Store images and activations as NHWC. Tensor cores prefer it for fp16/bf16 convolutions (often "
        "10–30 % faster); little effect in fp32 or on a CPU.",
    ),
    "compile": FieldSpec(
        "torch.compile",
        "Compile the model into fused kernels. The first steps are slow (compiling takes tens of seconds), "
        "later ones faster: worth it for long runs, not for quick experiments.",
    ),
    "epochs": FieldSpec(
        "Epochs",
        "Passes over the training set. Each epoch ends with an evaluation on the test split: the circles "
        "on the loss plot.",
    ),
    "max_steps": FieldSpec(
        "Max steps",
        "Stop after this many steps (micro-batches) whatever the epochs say; 'no limit' runs every epoch. "
        "Handy for short timing runs.",
    ),
    "batch_size": FieldSpec(
        "Batch size",
        "Images per step (per micro-batch). Bigger batches keep a GPU busier until memory runs out; the "
        "learning rate usually scales with the batch.",
    ),
    "accumulation_steps": FieldSpec(
        "Accumulation steps",
        "Add up the gradients of this many micro-batches before each optimiser step: the effective batch "
        "is batch size × accumulation steps. Trades time for memory: the optimisation of a large batch "
        "with the memory of a small one, but no faster.",
    ),
    "seed": FieldSpec(
        "Seed",
        "Seeds the weights, the data order, augmentation and synthetic data: the same seed makes runs "
        "comparable, so a change of one setting shows its own effect.",
    ),
    "device": FieldSpec(
        "Device",
        "• auto: the CUDA GPU if there is one, else the CPU.\n"
        "• cuda: the GPU, or fail.\n"
        "• cpu: the CPU even when a GPU is present (to compare).",
    ),
    "log_every": FieldSpec(
        "Measure every",
        "Report every this many steps: one point on the plots. Reading the loss waits for the GPU to "
        "finish, so very small values slow a fast GPU down.",
    ),
}

# Fields whose choices depend on the hardware (their reasons come from RunConfig.hardware_problems).
HARDWARE_FIELDS = ("device", "precision")
KNOWN_DATASET_SIZES = {"cifar10": 50_000, "cifar100": 50_000}


@dataclass(frozen=True)
class DerivedFacts:
    effective_batch_size: int
    train_size: Optional[int]  # None when it cannot be known without loading the data
    steps_per_epoch: Optional[int]
    total_steps: Optional[int]

    def describe(self, config: RunConfig) -> str:
        batch = f"Effective batch {self.effective_batch_size:,}"
        if config.accumulation_steps > 1:
            batch += f" ({config.batch_size:,} × {config.accumulation_steps} accumulated)"
        parts = [batch]
        if self.train_size is None:
            parts.append("dataset size known once the data loads")
        else:
            parts.append(f"{self.train_size:,} training images")
            parts.append(f"{self.steps_per_epoch:,} steps per epoch")
            parts.append(f"{self.total_steps:,} steps in all")
        return " · ".join(parts)


def derive(config: RunConfig) -> DerivedFacts:
    train_size = dataset_size(config)
    steps_per_epoch = total_steps = None
    if train_size is not None:
        steps_per_epoch = train_size // config.batch_size  # the engine drops the last partial batch
        total_steps = config.epochs * steps_per_epoch
        if config.max_steps is not None:
            total_steps = min(total_steps, config.max_steps)
    return DerivedFacts(config.effective_batch_size, train_size, steps_per_epoch, total_steps)


def dataset_size(config: RunConfig) -> Optional[int]:
    """Training images, known without loading the data (an .npz header is read, not its arrays)."""
    if config.dataset == "synthetic":
        return config.synthetic_size
    if config.dataset == "npz":
        path = Path(config.data_path).expanduser()
        try:
            return _npz_train_size(path.resolve(), path.stat().st_mtime_ns)
        except OSError:
            return None
    return KNOWN_DATASET_SIZES.get(config.dataset)


@functools.lru_cache(maxsize=8)
def _npz_train_size(path: Path, _mtime_ns: int) -> Optional[int]:
    try:
        with zipfile.ZipFile(path) as archive, archive.open("train_images.npy") as member:
            version = np.lib.format.read_magic(member)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else (
                np.lib.format.read_array_header_2_0)
            shape, _, _ = read_header(member)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None  # the run itself reports what is wrong with the file
    return int(shape[0]) if shape else None


def problems(config: RunConfig, device: Optional[DeviceInfo]) -> list[str]:
    """Everything that would stop this config from running, in words: RunConfig's own checks plus
    the ones the form can make cheaply (a batch larger than the training set)."""
    found = config.validate(device)
    train_size = dataset_size(config)
    if train_size is not None and train_size < config.batch_size:
        found.append(f"batch_size {config.batch_size:,} is larger than the training set ({train_size:,} images)")
    return found


def fields_named_in(problem: str, config: RunConfig, device: Optional[DeviceInfo]) -> set[str]:
    """The RunConfig fields a problem sentence is about, to mark those widgets: the ones it names,
    and a hardware field whose chosen value it names when this machine cannot run that value
    ("fp16 needs a CUDA GPU" is about precision)."""
    words = set(re.findall(r"[a-z0-9_]+", problem))
    named = {name for name in FIELD_NAMES if name in words}
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
    inactive: dict[str, str] = {}
    if config.dataset == "synthetic":
        inactive["data_path"] = "only used with dataset=npz, cifar10 or cifar100"
    else:
        inactive["synthetic_size"] = "only used with dataset=synthetic"
    if config.pipeline == "gpu-resident":
        for name in ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "worker_start_method"):
            inactive[name] = "pipeline=gpu-resident uses no DataLoader"
    elif config.num_workers == 0:
        for name in ("persistent_workers", "prefetch_factor", "worker_start_method"):
            inactive[name] = "needs num_workers ≥ 1 (batches load in the training thread)"
    on_cpu = device is not None and (not device.cuda_available or config.device == "cpu")
    if on_cpu:
        for name in ("pin_memory", "non_blocking"):
            inactive.setdefault(name, "no effect without a CUDA GPU")
    return inactive
