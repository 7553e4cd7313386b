"""The run's data, whatever its source: decoded arrays (synthetic, npz, CIFAR) or an image folder's files."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Union

import torch

from workbench.config import RunConfig
from workbench.engine.augment import random_crop_flip
from workbench.engine.data import DataError, ImageArrays, SampleBatch, load_arrays
from workbench.engine.data import preview_batch as preview_arrays
from workbench.engine.folder_data import Transforms, decode
from workbench.folder_layout import FolderLayout, FolderLayoutError, is_current, scan_folder
from workbench.image_check import check_images, folder_images, without_unreadable

TrainingData = Union[ImageArrays, FolderLayout]


def load_data(config: RunConfig) -> TrainingData:
    """Arrays for the sources held in memory; for dataset=folder, the folder scanned (decoded by the loader)."""
    if config.dataset == "folder":
        folder = _scanned(Path(config.data_path).expanduser().resolve(), config.seed)
        return without_bad_images(folder) if config.skip_bad_images else folder
    return load_arrays(config)


def without_bad_images(folder: FolderLayout) -> FolderLayout:
    """skip_bad_images: the folder without the files that cannot be read as images (image_check: cached, so after
    the CLI's or the window's check one stat per file), counted and named in the run's notes."""
    try:
        return without_unreadable(folder, check_images(folder_images(folder)).bad)
    except FolderLayoutError as error:
        raise DataError(str(error)) from None


_scans: dict[tuple[Path, int], FolderLayout] = {}
_scans_lock = threading.Lock()


def _scanned(root: Path, seed: int) -> FolderLayout:
    """The last scan of this folder while none of the directories it read has changed (a window's runs, a
    sweep's members scan once); a file added to or removed from a class folder changes that folder's time."""
    with _scans_lock:
        last = _scans.get((root, seed))
    if last is not None and is_current(last.directory_times):
        return last
    try:
        folder = scan_folder(root, seed)
    except FolderLayoutError as error:
        raise DataError(str(error)) from None
    with _scans_lock:
        _scans.clear()  # one folder's file list at a time: a million paths are ~100 MB
        _scans[(root, seed)] = folder
    return folder


def preview_batch(config: RunConfig, count: int = 32) -> SampleBatch:
    """The first ``count`` images an epoch would feed the model, after augmentation and before normalisation
    (uint8 (count, H, W, 3)), with their labels: the GUI's sample-batch view."""
    if config.dataset != "folder":
        return preview_arrays(config, count)
    folder = load_data(config)
    assert isinstance(folder, FolderLayout)
    generator = torch.Generator().manual_seed(config.seed)
    count = min(count, folder.train_size)
    index = torch.randperm(folder.train_size, generator=generator)[:count].tolist()
    transforms = Transforms(config.image_size, config.augment)
    images = torch.stack([transforms.train(decode(folder.train.paths[i], transforms.decode_size)) for i in index])
    if config.augment == "gpu":
        images = random_crop_flip(images, generator)
    labels = torch.tensor([folder.train.labels[i] for i in index])
    return SampleBatch(images.permute(0, 2, 3, 1).contiguous().numpy(), labels.numpy(), folder.class_names)
