"""A run's input pipeline for its data: the training batches and the test set, for arrays or an image folder.

Arrays (synthetic, npz, CIFAR) train through data.LoaderBatches or data.ResidentBatches and are evaluated from
the device; an image folder trains through the same DataLoader with workers that decode its files
(folder_data.FolderImages), or, gpu-resident, decoded once into device memory when that fits, and is evaluated
through a loader of its test files.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Union

import torch
from torch.utils.data import DataLoader

from workbench.config import RunConfig
from workbench.engine.data import (
    DataError,
    ImageArrays,
    LoaderBatches,
    ResidentBatches,
    Shard,
)
from workbench.engine.datasets import TrainingData
from workbench.engine.folder_data import (
    FolderImages,
    Transforms,
    collate_bytes,
    decode,
    resident_share_problem,
)
from workbench.engine.worker_lifetime import worker_init_for_this_run
from workbench.folder_layout import FolderLayout

Batches = Union[LoaderBatches, ResidentBatches]
# pipeline=gpu-resident holds a decoded folder in at most this share of the device's free memory (on a CPU, of the
# free RAM): the model, its activations and the allocator's slack need the rest.
RESIDENT_SHARE = 0.5


class ArraysTestSet:
    """The test split on the device, in slices."""

    def __init__(self, arrays: ImageArrays, device: torch.device):
        labels = arrays.test_labels.to(device)
        # None once closed: the device memory goes with them.
        self.images: Optional[torch.Tensor] = arrays.test_images.to(device)
        self.labels: Optional[torch.Tensor] = labels
        self.size = len(labels)

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        images, labels = self.images, self.labels
        if images is None or labels is None:
            raise RuntimeError("the test set was closed")
        for begin in range(0, self.size, batch_size):
            yield images[begin : begin + batch_size], labels[begin : begin + batch_size]

    def close(self) -> None:
        self.images = self.labels = None


class FolderTestSet:
    """The test files of an image folder, decoded, resized and centre-cropped by the run's loader workers."""

    def __init__(self, folder: FolderLayout, config: RunConfig, pin_memory: bool):
        self.dataset = FolderImages(folder.test, Transforms(config.image_size, config.augment), train=False)
        self.size = len(folder.test)
        self.workers = config.num_workers if config.pipeline == "dataloader" else 0
        self.start_method = config.worker_start_method
        self.pin_memory = pin_memory

    def batches(self, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        options: dict[str, Any] = (
            {"multiprocessing_context": self.start_method, "worker_init_fn": worker_init_for_this_run()}
            if self.workers else {})
        loader = DataLoader(self.dataset, batch_size=batch_size, num_workers=self.workers,
                            pin_memory=self.pin_memory, **options)
        yield from loader

    def close(self) -> None:
        pass


TestSet = Union[ArraysTestSet, FolderTestSet]


def build_pipeline(data: TrainingData, config: RunConfig, device: torch.device, shard: Optional[Shard],
                   notes: list[str]) -> tuple[Batches, TestSet]:
    """The training batches and the test set for ``data`` (notes gain what the run should say about them)."""
    pin_memory = config.pin_memory and device.type == "cuda"
    if isinstance(data, ImageArrays):
        if config.pipeline == "gpu-resident":
            return ResidentBatches(data, config, device, shard), ArraysTestSet(data, device)
        return LoaderBatches(data, config, pin_memory=pin_memory, shard=shard), ArraysTestSet(data, device)
    notes.append(f"{data.train_size:,} training and {data.test_size:,} test images in {data.num_classes} classes: "
                 f"{data.split_note}; decoded at their own size and brought to {config.image_size}×{config.image_size}")
    test_set = FolderTestSet(data, config, pin_memory)
    if config.pipeline == "gpu-resident":
        return ResidentBatches(decoded_once(data, config, device), config, device, shard), test_set
    transforms = Transforms(config.image_size, config.augment)
    on_gpu = config.decode == "gpu"
    if on_gpu:
        others = data.non_jpeg_count()
        if others:
            raise DataError(f"decode=gpu decodes JPEGs only, and {data.root} holds {others:,} other images: use "
                            "decode=cpu, or convert them to JPEG")
        notes.append("decode=gpu: the workers read the files, nvJPEG decodes each batch on the GPU")
    dataset = FolderImages(data.train, transforms, train=True, bytes_only=on_gpu)
    return (LoaderBatches(None, config, pin_memory=pin_memory and not on_gpu, shard=shard, dataset=dataset,
                          collate_fn=collate_bytes if on_gpu else None), test_set)


def decoded_once(folder: FolderLayout, config: RunConfig, device: torch.device) -> ImageArrays:
    """pipeline=gpu-resident on a folder: every training image decoded and resized to image_size once, held as
    uint8 arrays (then moved to the device by ResidentBatches); refused with the sizes when they do not fit."""
    problem = resident_share_problem(folder, config.image_size, free_memory(device), RESIDENT_SHARE)
    if problem:
        raise DataError(problem)
    transforms = Transforms(config.image_size, "gpu")  # decode + resize only: the device crops and flips
    images = torch.empty((folder.train_size, 3, config.image_size, config.image_size), dtype=torch.uint8)
    for index, path in enumerate(folder.train.paths):
        images[index] = transforms.train(decode(path))
    labels = torch.tensor(folder.train.labels, dtype=torch.int64)
    empty = torch.empty((0, 3, config.image_size, config.image_size), dtype=torch.uint8)
    return ImageArrays(folder.name, images, labels, empty, torch.empty(0, dtype=torch.int64), folder.num_classes,
                       folder.class_names)


def free_memory(device: torch.device) -> Optional[int]:
    """Free bytes where the decoded set would live: the GPU's (torch.cuda.mem_get_info), else the host's."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
