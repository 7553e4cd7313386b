"""The run's data, whatever its source: decoded arrays (synthetic, npz, CIFAR) or an image folder's files."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Union

import torch

from workbench.config import RunConfig
from workbench.engine.augment import random_crop_flip
from workbench.engine.data import ImageArrays, SampleBatch, load_arrays
from workbench.engine.data import preview_batch as preview_arrays
from workbench.engine.folder_data import ImageFolder, Transforms, decode, scan_folder

TrainingData = Union[ImageArrays, ImageFolder]


def load_data(config: RunConfig) -> TrainingData:
    """Arrays for the sources held in memory; for dataset=folder, the folder scanned (decoded by the loader)."""
    if config.dataset == "folder":
        root = Path(config.data_path).expanduser().resolve()
        return _scanned(root, config.seed, root.stat().st_mtime_ns)
    return load_arrays(config)


@functools.lru_cache(maxsize=2)
def _scanned(root: Path, seed: int, _mtime_ns: int) -> ImageFolder:
    return scan_folder(root, seed)


def preview_batch(config: RunConfig, count: int = 32) -> SampleBatch:
    """The first ``count`` images an epoch would feed the model, after augmentation and before normalisation
    (uint8 (count, H, W, 3)), with their labels: the GUI's sample-batch view."""
    if config.dataset != "folder":
        return preview_arrays(config, count)
    folder = load_data(config)
    assert isinstance(folder, ImageFolder)
    generator = torch.Generator().manual_seed(config.seed)
    count = min(count, folder.train_size)
    index = torch.randperm(folder.train_size, generator=generator)[:count].tolist()
    transforms = Transforms(config.image_size, config.augment)
    images = torch.stack([transforms.train(decode(folder.train.paths[i], transforms.decode_size)) for i in index])
    if config.augment == "gpu":
        images = random_crop_flip(images, generator)
    labels = torch.tensor([folder.train.labels[i] for i in index])
    return SampleBatch(images.permute(0, 2, 3, 1).contiguous().numpy(), labels.numpy(), folder.class_names)
