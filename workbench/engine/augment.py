"""The same augmentation two ways: per sample in DataLoader workers (CPU) or batched on the device.

Both are random-crop(the image's size, padding 4, zero fill) + horizontal flip, on uint8 CHW images, so a
user switching augment=cpu ↔ augment=gpu changes where the work runs, not what it does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from torchvision.transforms import v2

PADDING = 4


def per_sample_transform(size: int = 32) -> v2.Compose:
    """torchvision's classic CIFAR augmentation for size × size images, run in the workers one image at a time."""
    # Imported on use: torchvision doubles a process's start-up time (every distributed rank pays it).
    from torchvision.transforms import v2

    return v2.Compose([v2.RandomCrop(size, padding=PADDING), v2.RandomHorizontalFlip()])


def random_crop_flip(images: torch.Tensor, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Batched crop + flip of uint8 images (B, C, H, W) wherever they live, one gather for the batch."""
    batch, channels, height, width = images.shape
    device = images.device
    padded = F.pad(images, (PADDING, PADDING, PADDING, PADDING))
    padded_width = width + 2 * PADDING
    shifts = torch.randint(0, 2 * PADDING + 1, (2, batch), device=device, generator=generator)
    flips = torch.rand(batch, device=device, generator=generator) < 0.5
    rows = shifts[0, :, None] + torch.arange(height, device=device)  # (B, H)
    cols = shifts[1, :, None] + torch.arange(width, device=device)  # (B, W)
    # Flipping is reading the crop's columns back to front.
    cols = torch.where(flips[:, None], cols.flip(1), cols)
    # One gather along each image's flattened pixels: on a CPU several times faster than indexing
    # with four broadcast index tensors, which computes every element's offset from all four.
    pixels = (rows[:, :, None] * padded_width + cols[:, None, :]).view(batch, 1, height * width)
    return padded.flatten(2).gather(2, pixels.expand(batch, channels, height * width)).view(
        batch, channels, height, width
    )
