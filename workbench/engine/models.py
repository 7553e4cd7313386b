"""The models a user can pick: all take 3×32×32 images and return class logits."""

from __future__ import annotations

import torch
from torch import nn


def small_cnn(num_classes: int, norm: str = "batch") -> nn.Module:
    """A few conv-norm-ReLU-pool blocks: fast enough to learn CIFAR on a laptop CPU.

    ``norm="group"`` uses GroupNorm (8 groups), which normalises each image on its own: the result does
    not depend on the batch, so a batch split over N data-parallel devices trains exactly as the whole
    batch on one device (BatchNorm computes its statistics over each device's slice).
    """

    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(cin, cout, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(cout) if norm == "batch" else nn.GroupNorm(8, cout),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )

    return nn.Sequential(
        block(3, 32),  # 16×16
        block(32, 64),  # 8×8
        block(64, 128),  # 4×4
        block(128, 256),  # 2×2
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(256, num_classes),
    )


def resnet18_cifar(num_classes: int) -> nn.Module:
    """torchvision's resnet18 with the CIFAR stem: a 3×3 stride-1 first conv and no max-pool,
    so 32×32 inputs are not shrunk to 8×8 before the first residual block."""
    from torchvision import models as tv_models  # imported on use: it doubles a process's start-up time

    model = tv_models.resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def mobilenet_v3_small(num_classes: int) -> nn.Module:
    from torchvision import models as tv_models

    return tv_models.mobilenet_v3_small(weights=None, num_classes=num_classes)


BUILDERS = {
    "small-cnn": small_cnn,
    "small-cnn-gn": lambda num_classes: small_cnn(num_classes, norm="group"),
    "resnet18": resnet18_cifar,
    "mobilenet_v3_small": mobilenet_v3_small,
}


def build_model(name: str, num_classes: int) -> nn.Module:
    return BUILDERS[name](num_classes)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def to_memory_format(model: nn.Module, channels_last: bool) -> nn.Module:
    return model.to(memory_format=torch.channels_last) if channels_last else model
