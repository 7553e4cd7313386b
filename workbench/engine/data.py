"""Dataset sources → uint8 tensors, and the two pipelines that batch them.

Every source is loaded once into uint8 CHW tensors and cached in the process (airbench's
habit), so a rerun from the GUI does not re-read the files. Batches stay uint8 until they
reach the device: a quarter of the bytes of float32 cross the bus, and normalisation runs there.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import signal
import urllib.error
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sized, cast

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, DistributedSampler, RandomSampler

from workbench.config import RunConfig
from workbench.engine.augment import per_sample_transform, random_crop_flip
from workbench.engine.worker_lifetime import block_stop_signals, shut_down_workers, worker_init_for_this_run
from workbench.npz.header import CLASS_NAMES_KEY, DAMAGED_ARCHIVE_ERRORS, NPZ_KEYS, npz_problems
from workbench.npz.labels import check_labels
from workbench.paths import default_datasets_dir
from workbench.regular_file import regular_file_problem
from workbench.setting_checks import cifar_folder_problem

# CIFAR-10's per-channel mean and std on the training set (0..1 scale); close enough for CIFAR-100.
CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2470, 0.2435, 0.2616)


Shard = tuple[int, int]  # (rank, world_size): one data-parallel process's share of the training set


class DataError(ValueError):
    """The data cannot be had or is not what it should be; the message says what to do."""


@dataclass(frozen=True)
class ImageArrays:
    name: str
    train_images: torch.Tensor  # uint8 (N, 3, 32, 32), CPU
    train_labels: torch.Tensor  # int64 (N,)
    test_images: torch.Tensor
    test_labels: torch.Tensor
    num_classes: int
    class_names: tuple[str, ...] = ()  # by label, where the data names its classes (an .npz's, CIFAR's)
    notes: tuple[str, ...] = ()  # what the run should say about its data at the start (one class, ...)

    @property
    def train_size(self) -> int:
        return len(self.train_labels)

    @property
    def test_size(self) -> int:
        return len(self.test_labels)


@dataclass(frozen=True)
class SampleBatch:
    """What the sample-batch view shows: images as the model is fed them, and what each one is."""

    images: np.ndarray  # uint8 (N, image_size, image_size, 3), after augmentation, before normalisation
    labels: np.ndarray  # int64 (N,)
    class_names: tuple[str, ...] = ()  # by label; () where the data names no classes

    def names(self) -> list[str]:
        """Each image's class name, or its class index where the data has no name for it."""
        return [self.class_names[label] if 0 <= label < len(self.class_names) else str(label)
                for label in self.labels.tolist()]


def load_arrays(config: RunConfig) -> ImageArrays:
    """The run's dataset as uint8 tensors (cached per source)."""
    if config.dataset == "synthetic":
        return _synthetic(config.synthetic_size, config.seed, config.image_size)
    if config.dataset == "npz":
        path = Path(config.data_path).expanduser()
        problem = regular_file_problem(path)  # os.stat: a FIFO or a device is never opened, a loop never resolved
        if problem is not None:
            raise DataError(f"npz file {path} {problem}")
        return _npz(path.resolve(), path.stat().st_mtime_ns)
    problem = cifar_folder_problem(config.data_path)  # os.stat: a loop is never resolved (RuntimeError)
    if problem is not None:
        raise DataError(problem)
    root = Path(config.data_path).expanduser() if config.data_path else default_datasets_dir()
    return _cifar(config.dataset, root.resolve())


@functools.lru_cache(maxsize=2)
def _synthetic(size: int, seed: int, side: int = 32) -> ImageArrays:
    """CIFAR-like images of side × side with learnable labels: each class is a blocky colour template plus
    noise, so loss curves fall as they would on real data while the run stays offline."""
    generator = torch.Generator().manual_seed(seed)
    num_classes = 10
    templates = torch.randint(0, 256, (num_classes, 3, 4, 4), generator=generator, dtype=torch.uint8)
    templates = torch.nn.functional.interpolate(templates, size=(side, side), mode="nearest-exact")

    def split(count: int) -> tuple[torch.Tensor, torch.Tensor]:
        labels = torch.randint(0, num_classes, (count,), generator=generator)
        noise = torch.randint(0, 256, (count, 3, side, side), generator=generator, dtype=torch.uint8)
        images = (templates[labels].to(torch.int16) + noise.to(torch.int16)) // 2
        return images.to(torch.uint8), labels

    train_images, train_labels = split(size)
    test_images, test_labels = split(max(1, size // 5))
    return ImageArrays("synthetic", train_images, train_labels, test_images, test_labels, num_classes)


@functools.lru_cache(maxsize=2)
def _npz(path: Path, _mtime_ns: int) -> ImageArrays:
    problems = npz_problems(path)  # names, shapes and dtypes, from the headers: the same words the form shows
    if problems:
        raise DataError("; ".join(problems))
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in NPZ_KEYS}
            names = archive[CLASS_NAMES_KEY] if CLASS_NAMES_KEY in archive.files else None
    except DAMAGED_ARCHIVE_ERRORS as error:
        raise DataError(f"{path} is not a valid npz archive ({error})") from None
    labels = check_labels(path, arrays["train_labels"], arrays["test_labels"], names)  # the CLI's words
    if labels.problems:
        raise DataError("; ".join(labels.problems))
    # make-npz writes the class names; a file without them (or with something else there) is named by index.
    class_names = tuple(str(name) for name in names) if names is not None and names.dtype.kind == "U" else ()
    return ImageArrays(
        path.name,
        _hwc_to_chw(arrays["train_images"]),
        torch.from_numpy(arrays["train_labels"].astype(np.int64)),
        _hwc_to_chw(arrays["test_images"]),
        torch.from_numpy(arrays["test_labels"].astype(np.int64)),
        labels.num_classes,
        class_names if len(class_names) == labels.num_classes else (),
        tuple(labels.notes),
    )


@functools.lru_cache(maxsize=2)
def _cifar(name: str, root: Path) -> ImageArrays:
    """torchvision's CIFAR-10/100, downloaded into ``root`` when not there yet."""
    from torchvision import datasets

    dataset_class = datasets.CIFAR10 if name == "cifar10" else datasets.CIFAR100
    label = "CIFAR-10" if name == "cifar10" else "CIFAR-100"
    try:
        root.mkdir(parents=True, exist_ok=True)
        train = dataset_class(str(root), train=True, download=True)
        test = dataset_class(str(root), train=False, download=False)
    except (urllib.error.URLError, OSError, RuntimeError) as error:
        reason = getattr(error, "reason", None) or error
        raise DataError(
            f"{label} is not in {root} and could not be downloaded ({reason}). "
            f"Put {dataset_class.filename} in that folder, or choose dataset=synthetic"
        ) from None
    return ImageArrays(
        name,
        _hwc_to_chw(train.data),
        torch.tensor(train.targets, dtype=torch.int64),
        _hwc_to_chw(test.data),
        torch.tensor(test.targets, dtype=torch.int64),
        len(train.classes),
        tuple(train.classes),
    )


def _hwc_to_chw(images: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))


# -- pipelines -------------------------------------------------------------------------------


class UInt8ImageDataset(Dataset):
    """uint8 CHW images and their labels. Indexed by one index (the per-sample path DataLoader users
    know: one image through torchvision's transforms), or by a list of indices: a whole batch in one
    gather, the batched path's fetch (augmentation runs later on the batch)."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, augment: bool):
        self.images = images
        self.labels = labels
        self.transform = per_sample_transform(images.shape[-1]) if augment else None

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index):
        if isinstance(index, list):
            # One gather instead of a Python call and a collate stack per image: at batch 512 the
            # per-image path spent most of a worker's time there.
            rows = torch.as_tensor(index)
            return self.images[rows], self.labels[rows]
        image = self.images[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, self.labels[index]


# A forkserver worker is forked from a small server process that has imported these once, so each
# worker starts in milliseconds instead of importing torch itself (the server has no Qt, no CUDA and
# no threads of ours: forking it is safe).
FORKSERVER_PRELOAD = ["torch", "workbench.engine.data"]


class LoaderBatches:
    """pipeline=dataloader: torch's DataLoader with the user's worker settings; batches arrive on the host.

    ``shard=(rank, world_size)``: one data-parallel process's share, from torch's DistributedSampler.
    """

    def __init__(self, arrays: Optional[ImageArrays], config: RunConfig, pin_memory: bool,
                 shard: Optional[Shard] = None, dataset: Optional[Dataset] = None,
                 collate_fn: Optional[Callable] = None):
        """``dataset`` instead of the arrays' (an image folder's files, decoded one per __getitem__; ``arrays``
        None then), batched by ``collate_fn`` where its items are not same-sized tensors."""
        per_sample = config.augment == "cpu" or dataset is not None
        if dataset is None:
            if arrays is None:
                raise ValueError("LoaderBatches needs the arrays or a dataset")
            dataset = UInt8ImageDataset(arrays.train_images, arrays.train_labels, augment=config.augment == "cpu")
        rank = shard[0] if shard else 0
        generator = torch.Generator().manual_seed(config.seed + rank)  # per rank: workers' own augmentation
        self.sampler: Optional[DistributedSampler] = None
        if shard is not None:
            # The same seed on every rank: one permutation per epoch (set_epoch), each rank its strided share.
            self.sampler = DistributedSampler(
                dataset, num_replicas=shard[1], rank=rank, shuffle=True, seed=config.seed, drop_last=True
            )
        # A map-style dataset has a length; torch's Dataset type does not declare __len__ (its subclasses define it).
        order = self.sampler if self.sampler is not None else RandomSampler(cast(Sized, dataset), generator=generator)
        # drop_last: equal batches, so accumulation and batch-norm see the sizes the user chose.
        batches = BatchSampler(order, batch_size=config.batch_size, drop_last=True)
        options: dict = dict(num_workers=config.num_workers, pin_memory=pin_memory, generator=generator)
        if per_sample:
            options.update(batch_sampler=batches, collate_fn=collate_fn)  # one __getitem__ per image, then collate
        else:
            # The same batches as above, fetched whole (dataset[list]); batch_size=None: nothing to collate.
            options.update(sampler=batches, batch_size=None)
        self._epochs_started = 0
        if config.num_workers > 0:
            if config.worker_start_method == "forkserver":
                multiprocessing.set_forkserver_preload(FORKSERVER_PRELOAD)  # no effect once the server runs
            options.update(
                persistent_workers=config.persistent_workers,
                prefetch_factor=config.prefetch_factor,
                multiprocessing_context=config.worker_start_method,
                worker_init_fn=worker_init_for_this_run(),  # ignores Ctrl-C, SIGTERM, SIGHUP; ends with the run
            )
        self.loader = DataLoader(dataset, **options)
        self.steps_per_epoch = len(self.loader)
        self.starts_workers = config.num_workers > 0  # an epoch's first batch waits for worker start-up
        self._start_method = config.worker_start_method
        self._iterator: Optional[Iterator[Any]] = None

    def prepare_worker_start(self) -> None:
        """Call in the (helper) thread that will start the workers, with the stop signals blocked there.

        Workers inherit the starting thread's signal mask (across fork and exec), which keeps the stop
        signals away until they ignore them (worker_lifetime.py). But multiprocessing's resource tracker,
        started on first use by spawn and forkserver, unblocks SIGINT and SIGTERM in the thread that started
        it: start it now and block again.
        """
        if not hasattr(signal, "pthread_sigmask") or os.name != "posix" or self._start_method == "fork":
            return
        from multiprocessing import resource_tracker

        resource_tracker.ensure_running()
        block_stop_signals()

    def epoch(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """One epoch's batches; the workers start (``iter(loader)``) at the first ``next()``."""
        if self.sampler is not None:
            self.sampler.set_epoch(self._epochs_started)
        self._epochs_started += 1
        self._iterator = iter(self.loader)
        yield from self._iterator

    def close(self) -> None:
        """Shut the workers down now, persistent ones included, instead of at garbage collection (and without
        hanging where one of them was killed: worker_lifetime.shut_down_workers)."""
        for iterator in (self._iterator, getattr(self.loader, "_iterator", None)):
            if iterator is not None:
                shut_down_workers(iterator)
        self._iterator = None
        self.loader._iterator = None


class ResidentBatches:
    """pipeline=gpu-resident: the whole uint8 set on the device, shuffled there with randperm.

    No workers and no host round trip per batch; on a CPU device it is simply memory-resident.
    ``shard=(rank, world_size)``: each data-parallel rank holds the whole set and takes its share of
    every epoch's permutation exactly as DistributedSampler does (the same seed on every rank; rank r
    takes every world_size-th index from r), so the ranks' batches together are one process's batch
    of batch × world_size.
    """

    starts_workers = False

    def __init__(self, arrays: ImageArrays, config: RunConfig, device: torch.device, shard: Optional[Shard] = None):
        labels = arrays.train_labels.to(device)
        # None once closed: the device memory goes with them.
        self.images: Optional[torch.Tensor] = arrays.train_images.to(device)
        self.labels: Optional[torch.Tensor] = labels
        self.batch_size = config.batch_size
        self.shard = shard
        per_rank = len(labels) // shard[1] if shard else len(labels)
        self.steps_per_epoch = per_rank // config.batch_size
        self.generator = torch.Generator(device=device).manual_seed(config.seed)

    def prepare_worker_start(self) -> None:
        """No workers to start (LoaderBatches' counterpart)."""

    def epoch(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        images, labels = self.images, self.labels
        if images is None or labels is None:
            raise RuntimeError("the batches were closed")
        order = torch.randperm(len(labels), device=images.device, generator=self.generator)
        if self.shard is not None:
            rank, world_size = self.shard
            order = order[: len(order) // world_size * world_size][rank::world_size]
        for step in range(self.steps_per_epoch):
            index = order[step * self.batch_size : (step + 1) * self.batch_size]
            yield images[index], labels[index]

    def close(self) -> None:
        self.images = self.labels = None


class DevicePreparer:
    """Host or device uint8 batch → normalised float batch on the device (+ GPU augmentation)."""

    def __init__(self, config: RunConfig, device: torch.device, non_blocking: bool, rank: int = 0,
                 decode_batch: Optional[Callable[[list[torch.Tensor], int, torch.device], torch.Tensor]] = None):
        self.device = device
        self.non_blocking = non_blocking
        self.augment = config.augment == "gpu"
        self.memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
        self.mean = torch.tensor(CIFAR_MEAN, device=device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(CIFAR_STD, device=device).view(1, 3, 1, 1) * 255
        self.generator = torch.Generator(device=device).manual_seed(config.seed + 1 + rank)  # own crops per rank
        self.side = config.image_size
        self.decode_batch = decode_batch  # decode=gpu: encoded JPEGs → uint8 (B, 3, side, side) on the device

    def __call__(self, images: torch.Tensor | list[torch.Tensor], labels: torch.Tensor, train: bool = True):
        if isinstance(images, list):  # decode=gpu: a batch of encoded JPEGs, decoded and resized on the device
            assert self.decode_batch is not None, "a batch of encoded images needs a decoder"
            images = self.decode_batch(images, self.side, self.device)
        images = images.to(self.device, non_blocking=self.non_blocking)
        labels = labels.to(self.device, non_blocking=self.non_blocking)
        if train and self.augment:
            images = random_crop_flip(images, self.generator)
        return self.normalise(images), labels

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        # One new tensor, already in the model's memory format, normalised in place (no temporaries).
        images = images.to(dtype=torch.float32, memory_format=self.memory_format, copy=True)
        if images.shape[-1] != self.side or images.shape[-2] != self.side:  # 32×32 arrays for a larger model input
            images = torch.nn.functional.interpolate(images, size=(self.side, self.side), mode="bilinear",
                                                     antialias=images.shape[-1] > self.side)
        return images.sub_(self.mean).div_(self.std)


def preview_batch(config: RunConfig, count: int = 32) -> SampleBatch:
    """The first ``count`` images an epoch of this pipeline would feed the model, after augmentation
    and before normalisation (uint8 (count, 32, 32, 3)), with their labels: the GUI's sample-batch view."""
    arrays = load_arrays(config)
    generator = torch.Generator().manual_seed(config.seed)
    count = min(count, len(arrays.train_labels))
    index = torch.randperm(len(arrays.train_labels), generator=generator)[:count]
    images = arrays.train_images[index]
    if config.augment == "cpu":
        transform = per_sample_transform(images.shape[-1])
        images = torch.stack([transform(image) for image in images])
    elif config.augment == "gpu":
        images = random_crop_flip(images, generator)
    return SampleBatch(images.permute(0, 2, 3, 1).contiguous().numpy(), arrays.train_labels[index].numpy(),
                       arrays.class_names)

