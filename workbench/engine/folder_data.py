"""dataset=folder: the user's own images, read from disk and decoded in the DataLoader workers.

The layout (classes, splits, files) is folder_layout's, read without torch. Images are decoded at their native
size with Pillow (libjpeg-turbo, libpng) and brought to ``image_size`` with torchvision's transforms:

- augment=cpu: the workers decode, crop and flip: a random resized crop + flip, or, for images already at
  image_size, CIFAR's pad-and-crop + flip;
- augment=gpu: the workers decode and resize to a fixed image_size square (uint8); the batch is cropped and
  flipped on the device (augment.random_crop_flip, as for CIFAR);
- decode=gpu: the workers only read the files' bytes; the training thread decodes the batch's JPEGs on the GPU
  (torchvision.io.decode_jpeg on a list of byte tensors), then resizes there.

Evaluation resizes and centre-crops (the shorter side to image_size / 0.875, as ImageNet evaluation does). A file
that cannot be decoded stops the run with its path (DataError): not a bare PIL or libjpeg traceback.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, BinaryIO, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from workbench.engine.augment import PADDING
from workbench.engine.data import DataError
from workbench.folder_layout import FolderLayout, FolderSplit
from workbench.formatting import format_bytes
from workbench.image_pixels import UNIDENTIFIED_WORDS, error_words, upright_rgb
from workbench.regular_file import NotARegularFile, open_regular_file, read_regular_file

EVAL_RESIZE_RATIO = 0.875  # resize the shorter side to image_size / 0.875, then centre-crop (ImageNet's habit)
MAX_FILE_BYTES = 256 * 2**20  # a file past this is not an image a training step can use: refused, named


def read_bytes(path: str) -> torch.Tensor:
    """A file's bytes as a uint8 tensor; DataError naming the file when it cannot be read as one (a FIFO, a link
    to /dev/zero: checked on the opened descriptor, so one swapped in since the folder was scanned is refused too)."""
    try:
        data = read_regular_file(path, MAX_FILE_BYTES)
    except NotARegularFile as error:
        raise DataError(f"cannot read {error}: remove it from the folder") from None
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _opened(path: str) -> BinaryIO:
    """The image file, opened only if it is a regular file of at most MAX_FILE_BYTES; DataError naming it else."""
    try:
        stream = open_regular_file(path)
    except NotARegularFile as error:
        raise DataError(f"cannot read {error}: remove it from the folder") from None
    size = os.fstat(stream.fileno()).st_size
    if size > MAX_FILE_BYTES:
        stream.close()
        raise DataError(f"{path} is {size / 2**20:,.0f} MiB: larger than any image a step can use "
                        f"({MAX_FILE_BYTES // 2**20} MiB at most); remove it from the folder")
    return stream


def decode(path: str, size_hint: Optional[int] = None) -> torch.Tensor:
    """uint8 RGB (3, H, W) from an image file, with Pillow (libjpeg-turbo, libpng: torchvision's own decoders are
    deprecated from 0.29 on); DataError naming the file when it is not a readable image. ``size_hint``: a JPEG much
    larger than that is decoded at a reduced scale (its DCT does the shrinking, several times faster).

    Upright as its EXIF orientation says (as a photo viewer shows it); 16-bit grey scaled to 8 bits (Pillow's own
    conversion clips it: almost all white); refused past Pillow's MAX_IMAGE_PIXELS (89,478,485, about 9459²), as
    make-npz refuses it."""
    from PIL import Image, UnidentifiedImageError

    with _opened(path) as stream:
        try:
            with warnings.catch_warnings():
                # Pillow warns past its MAX_IMAGE_PIXELS and raises past twice that: refuse both, in one line.
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(stream) as image:
                    if size_hint is not None:
                        image.draft("RGB", (size_hint, size_hint))  # JPEG only; keeps at least size_hint per side
                    pixels = np.asarray(upright_rgb(image))
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise DataError(f"{path} has more than {Image.MAX_IMAGE_PIXELS:,} pixels: too large to decode safely (as "
                            "make-npz refuses it); scale it down, or remove it from the folder") from None
        except UnidentifiedImageError:
            raise DataError(f"cannot decode {path} as an image ({UNIDENTIFIED_WORDS}): remove or replace the "
                            "file") from None
        except Exception as error:  # OSError, SyntaxError, ...: and whatever else a plug-in of Pillow's raises
            raise DataError(f"cannot decode {path} as an image ({error_words(error)}): remove or replace the "
                            "file") from None
    return torch.from_numpy(pixels.copy()).permute(2, 0, 1)


class Transforms:
    """What the workers (or the device, for decode=gpu) do to one decoded image, per split and placement."""

    def __init__(self, image_size: int, augment: str):
        from torchvision.transforms import v2

        self.size = image_size
        self.augment = augment
        # Decode JPEGs no smaller than this: room for the random resized crop's scale and evaluation's resize.
        self.decode_size = round(image_size / EVAL_RESIZE_RATIO)
        self.random_resized = v2.Compose([v2.RandomResizedCrop(image_size, antialias=True), v2.RandomHorizontalFlip()])
        self.pad_crop = v2.Compose([v2.RandomCrop(image_size, padding=PADDING), v2.RandomHorizontalFlip()])
        self.fixed = v2.Compose([v2.Resize(image_size, antialias=True), v2.CenterCrop(image_size)])
        self.evaluation = v2.Compose([v2.Resize(round(image_size / EVAL_RESIZE_RATIO), antialias=True),
                                      v2.CenterCrop(image_size)])

    def train(self, image: torch.Tensor) -> torch.Tensor:
        at_size = image.shape[-2:] == (self.size, self.size)
        if self.augment == "cpu":
            return self.pad_crop(image) if at_size else self.random_resized(image)
        return image if at_size else self.fixed(image)  # augment=gpu crops and flips the batch on the device

    def test(self, image: torch.Tensor) -> torch.Tensor:
        return image if image.shape[-2:] == (self.size, self.size) else self.evaluation(image)


class FolderImages(Dataset):
    """One split of an image folder: (uint8 (3, image_size, image_size), label) per index, decoded on access;
    with ``bytes_only``, (the file's bytes, label): decode=gpu decodes them on the device."""

    def __init__(self, split: FolderSplit, transforms: Transforms, train: bool, bytes_only: bool = False):
        self.split, self.transforms, self.is_train, self.bytes_only = split, transforms, train, bytes_only

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, label = self.split.paths[index], self.split.labels[index]
        if self.bytes_only:
            return read_bytes(path), label
        image = decode(path, size_hint=self.transforms.decode_size)
        image = self.transforms.train(image) if self.is_train else self.transforms.test(image)
        return image.contiguous(), label


def collate_bytes(items: Sequence[tuple[torch.Tensor, int]]) -> tuple[list[torch.Tensor], torch.Tensor]:
    """decode=gpu: a batch of encoded files stays a list (their lengths differ), with the labels as one tensor."""
    return [data for data, _ in items], torch.tensor([label for _, label in items], dtype=torch.int64)


def decode_on_device(batch: list[torch.Tensor], size: int, device: torch.device) -> torch.Tensor:
    """decode=gpu: the batch's JPEGs decoded by nvJPEG on ``device``, each resized to size × size (uint8)."""
    from torchvision.io import ImageReadMode, decode_jpeg
    from torchvision.transforms.v2 import functional as TF

    if device.type == "cuda":
        # torchvision's batched decode_jpeg(device="cuda") writes its outputs on nvJPEG's own stream, which does not
        # wait for ours (pytorch/vision PR #9606, closed unmerged): memory freed by the previous step's kernels
        # still queued here could be handed to the decoder while they run. Waiting for our stream first costs
        # the host's lead over the GPU at each batch; a wrong batch would cost more.
        torch.cuda.current_stream(device).synchronize()
    try:
        with warnings.catch_warnings():
            # torchvision 0.29 deprecates its codecs for TorchCodec, which has no batched nvJPEG decode of images
            # yet: this is still the one on a GPU. (Files are decoded with Pillow everywhere else.)
            warnings.filterwarnings("ignore", "The image decoding and encoding capabilities", DeprecationWarning)
            images = decode_jpeg(batch, mode=ImageReadMode.RGB, device=device)
    except RuntimeError as error:
        raise DataError(f"a JPEG of the batch could not be decoded on the GPU ({str(error).splitlines()[0]}): "
                        "decode=cpu names the file") from None
    return torch.stack([TF.center_crop(TF.resize(image, size, antialias=True), [size, size]) for image in images])


def resident_share_problem(folder: FolderLayout, image_size: int, free_bytes: Optional[int], share: float) -> Optional[str]:
    """pipeline=gpu-resident holds the decoded training set on the device: refused, with the sizes, when it
    would need more than ``share`` of the free memory (None when it fits)."""
    needed = folder.train_size * 3 * image_size * image_size
    if free_bytes is None:
        return None
    if needed > share * free_bytes:
        return (f"pipeline=gpu-resident would hold {folder.train_size:,} decoded images of 3×{image_size}×{image_size}: "
                f"{format_bytes(needed)}, more than {share:.0%} of the {format_bytes(free_bytes)} free; use "
                "pipeline=dataloader (the workers decode each batch), or a smaller image_size")
    return None


def describe(folder: FolderLayout) -> dict[str, Any]:
    """For the run's notes: how many images and classes, and how the test split was made."""
    return {"train": folder.train_size, "test": folder.test_size, "classes": folder.num_classes,
            "split": folder.split_note}
