"""A user's own images and their own model module, as the tests of dataset=folder and --model make them."""

from __future__ import annotations

import struct
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

CLASSES = ("cat", "dog", "fox")
SIZES = ((40, 50), (70, 70), (64, 64), (90, 60))  # mixed, one already at the 64×64 target


def make_folder(root: Path, per_class: int = 12, layout: str = "flat") -> Path:
    """A folder of PNG and JPEG images of mixed sizes whose classes differ in colour (so a model can learn them)."""
    generator = np.random.default_rng(0)
    for label, name in enumerate(CLASSES):
        for index in range(per_class):
            split = ("val" if index % 4 == 0 else "train") if layout == "split" else ""
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            width, height = SIZES[index % len(SIZES)]
            pixels = generator.integers(0, 60, (height, width, 3), dtype=np.uint8)
            pixels[..., label] += 180  # each class leans to one colour channel
            suffix = ".png" if index % 2 else ".jpg"
            Image.fromarray(pixels).save(folder / f"{name}{index}{suffix}")
    return root


def damaged_inside(path: Path) -> None:
    """A JPEG at ``path`` whose header and end marker are intact but whose scan data is broken: the check before a
    run passes it, the run's decode fails (Pillow: "broken data stream when reading image file")."""
    pixels = np.random.default_rng(0).integers(0, 255, (96, 96, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, "JPEG", quality=90)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2  # inside the scan: noise at quality 90 is ~9 KB of it
    data[middle:middle + 200] = b"\xff" * 200
    path.write_bytes(bytes(data))


def malformed_exif(path: Path) -> None:
    """A JPEG at ``path`` whose EXIF block says "rotate" but stores ResolutionUnit (a number) as text: Pillow's
    ImageOps.exif_transpose raises struct.error rewriting it."""
    entries = [(0x0112, 3, 1, struct.pack(">HH", 6, 0)), (0x0128, 2, 4, b"Cam\x00")]
    directory = struct.pack(">H", len(entries)) + b"".join(
        struct.pack(">HHI", tag, kind, count) + value for tag, kind, count, value in entries) + b"\0" * 4
    Image.new("RGB", (40, 36), (200, 10, 10)).save(path, exif=b"Exif\0\0MM\0*" + struct.pack(">I", 8) + directory)


USER_MODELS = '''
import torch
from torch import nn


def tiny_net(num_classes, width=8):
    return nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(width, num_classes))


def no_classes(width=8):  # does not take num_classes: gets only its kwargs
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, 10))


def raises(num_classes):
    raise ValueError("width must be even")


def not_a_module(num_classes):
    return "a string"


def wrong_logits(num_classes):
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, num_classes + 1))


def exits(num_classes):  # a factory that parses its own command line, say
    raise SystemExit(3)


class _Cast(nn.Module):
    def forward(self, x):
        return x.long()


def int_logits(num_classes):
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(3, num_classes), _Cast())


class _Zeros(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.num_classes = num_classes

    def forward(self, x):
        return torch.zeros(x.shape[0], self.num_classes)


def no_parameters(num_classes):
    return _Zeros(num_classes)


class _FirstTwo(nn.Module):
    """Right on the check's batch of 2, wrong on every larger batch (a batch size fixed inside the model)."""

    def __init__(self, num_classes):
        super().__init__()
        self.linear = nn.Linear(3, num_classes)

    def forward(self, x):
        return self.linear(x.mean(dim=(2, 3)))[:2]


def first_two_only(num_classes):
    return _FirstTwo(num_classes)


class _OtherHeadInTraining(nn.Module):
    """Right in evaluation mode, where the check's batch runs; five logits in training mode."""

    def __init__(self, num_classes):
        super().__init__()
        self.head, self.training_head = nn.Linear(3, num_classes), nn.Linear(3, 5)

    def forward(self, x):
        features = x.mean(dim=(2, 3))
        return self.training_head(features) if self.training else self.head(features)


def other_head_in_training(num_classes):
    return _OtherHeadInTraining(num_classes)
'''


def write_user_models(folder: Path) -> Path:
    """mymodels.py in ``folder`` (tiny_net(num_classes, width=8) and the wrong specs' functions)."""
    path = folder / "mymodels.py"
    path.write_text(textwrap.dedent(USER_MODELS))
    return path


def zip_of_user_models(folder: Path, module: str, monkeypatch: Any) -> Path:
    """models.zip in ``folder`` holding USER_MODELS as ``module``.py, put on the import path as a user's PYTHONPATH
    puts it (zipimport); monkeypatch takes it off at the test's end."""
    archive = folder / "models.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr(f"{module}.py", textwrap.dedent(USER_MODELS))
    monkeypatch.syspath_prepend(str(archive))
    return archive
