"""Each pipeline yields correctly shaped, correctly normalised batches; augmentation really augments."""

import numpy as np
import pytest
import torch
from engine_helpers import tiny_config

from workbench.engine.augment import PADDING, per_sample_transform, random_crop_flip
from workbench.engine.data import (
    CIFAR_MEAN,
    CIFAR_STD,
    DevicePreparer,
    LoaderBatches,
    ResidentBatches,
    load_arrays,
    preview_batch,
)

CPU = torch.device("cpu")


def make_batches(config):
    arrays = load_arrays(config)
    if config.pipeline == "gpu-resident":
        return ResidentBatches(arrays, config, CPU)
    return LoaderBatches(arrays, config, pin_memory=False)


@pytest.mark.parametrize(
    "changes",
    [
        dict(pipeline="dataloader", num_workers=0),
        dict(pipeline="dataloader", num_workers=2, persistent_workers=False),
        dict(pipeline="gpu-resident"),
    ],
    ids=["loader-0-workers", "loader-2-workers", "resident"],
)
def test_batches_are_uint8_then_normalised_on_the_device(changes):
    config = tiny_config(augment="none", **changes)
    batches = make_batches(config)
    try:
        images, labels = next(iter(batches.epoch()))
    finally:
        batches.close()
    assert images.shape == (32, 3, 32, 32) and images.dtype == torch.uint8
    assert labels.shape == (32,) and labels.dtype == torch.int64
    assert batches.steps_per_epoch == 256 // 32

    prepared, prepared_labels = DevicePreparer(config, CPU, non_blocking=False)(images, labels)
    mean = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(CIFAR_STD).view(1, 3, 1, 1)
    expected = (images.float() / 255 - mean) / std
    assert prepared.dtype == torch.float32 and prepared.shape == (32, 3, 32, 32)
    torch.testing.assert_close(prepared, expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(prepared_labels, labels)


def test_channels_last_batches():
    config = tiny_config(channels_last=True, augment="none")
    images, labels = next(iter(make_batches(config).epoch()))
    prepared, _ = DevicePreparer(config, CPU, non_blocking=False)(images, labels)
    assert prepared.is_contiguous(memory_format=torch.channels_last)


def test_an_epoch_visits_every_image_once_in_a_new_order():
    config = tiny_config(pipeline="gpu-resident", augment="none", synthetic_size=96, batch_size=32)
    arrays = load_arrays(config)
    batches = ResidentBatches(arrays, config, CPU)
    first = torch.cat([labels for _, labels in batches.epoch()])
    second = torch.cat([labels for _, labels in batches.epoch()])
    assert sorted(first.tolist()) == sorted(arrays.train_labels.tolist())
    assert not torch.equal(first, second)


def crops_of(image: torch.Tensor) -> list[torch.Tensor]:
    """Every image random-crop(pad 4) + optional flip can make from ``image``."""
    padded = torch.nn.functional.pad(image, (PADDING,) * 4)
    crops = []
    for dy in range(2 * PADDING + 1):
        for dx in range(2 * PADDING + 1):
            crop = padded[:, dy : dy + 32, dx : dx + 32]
            crops += [crop, crop.flip(-1)]
    return crops


def test_batched_augmentation_changes_images_into_crops_and_flips():
    images = torch.randint(0, 256, (16, 3, 32, 32), dtype=torch.uint8)
    augmented = random_crop_flip(images, torch.Generator().manual_seed(1))
    assert augmented.shape == images.shape and augmented.dtype == torch.uint8
    changed = [not torch.equal(a, b) for a, b in zip(augmented, images)]
    assert sum(changed) >= 12  # the identity (no shift, no flip) has probability 1/162 per image
    for original, result in zip(images, augmented):
        assert any(torch.equal(result, crop) for crop in crops_of(original))


def test_batched_augmentation_flips_about_half():
    images = torch.arange(32, dtype=torch.uint8).repeat(3, 32, 1).unsqueeze(0).repeat(400, 1, 1, 1)
    augmented = random_crop_flip(images, torch.Generator().manual_seed(2))
    # With a horizontal gradient, a flipped crop decreases left to right.
    flipped = (augmented[:, 0, 16, 10].int() > augmented[:, 0, 16, 20].int()).float().mean().item()
    assert 0.4 < flipped < 0.6


def test_cpu_per_sample_augmentation_changes_images_into_crops_and_flips():
    torch.manual_seed(3)
    transform = per_sample_transform()
    images = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8)
    results = [transform(image) for image in images]
    assert sum(not torch.equal(r, i) for r, i in zip(results, images)) >= 6
    for original, result in zip(images, results):
        assert result.dtype == torch.uint8
        assert any(torch.equal(result, crop) for crop in crops_of(original))


@pytest.mark.parametrize("augment", ["none", "cpu", "gpu"])
def test_preview_batch_shows_what_the_model_is_fed(augment):
    config = tiny_config(augment=augment)
    preview = preview_batch(config, count=8).images
    assert preview.shape == (8, 32, 32, 3) and preview.dtype == np.uint8
    plain = preview_batch(config.replace(augment="none"), count=8).images
    if augment == "none":
        assert np.array_equal(preview, plain)
    else:
        assert not np.array_equal(preview, plain)


def test_batched_augmentation_is_each_image_own_crop_and_flip_from_the_same_draws():
    """The gather reads exactly the pixels that indexing the padded batch by rows and columns reads."""
    import torch.nn.functional as F

    images = torch.randint(0, 256, (64, 3, 32, 32), dtype=torch.uint8)
    augmented = random_crop_flip(images, torch.Generator().manual_seed(5))
    draws = torch.Generator().manual_seed(5)
    shifts = torch.randint(0, 2 * PADDING + 1, (2, 64), generator=draws)
    flips = torch.rand(64, generator=draws) < 0.5
    padded = F.pad(images, (PADDING,) * 4)
    for index in range(64):
        dy, dx = shifts[:, index].tolist()
        crop = padded[index, :, dy : dy + 32, dx : dx + 32]
        assert torch.equal(augmented[index], crop.flip(-1) if flips[index] else crop)


@pytest.mark.parametrize("augment", ["none", "gpu"])
def test_batched_fetch_gives_the_batches_of_a_per_image_loader(augment):
    """Without per-image transforms a batch is fetched in one gather: the same images, labels and order
    as torch's per-image fetch and collate with the same seed (shuffle=True, the run's generator)."""
    config = tiny_config(augment=augment, num_workers=0, batch_size=16)
    arrays = load_arrays(config)
    fetched = list(LoaderBatches(arrays, config, pin_memory=False).epoch())
    reference = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(arrays.train_images, arrays.train_labels), batch_size=16, shuffle=True,
        drop_last=True, generator=torch.Generator().manual_seed(config.seed),
    )
    expected = list(reference)
    assert len(fetched) == len(expected) == len(arrays.train_labels) // 16
    for (images, labels), (want_images, want_labels) in zip(fetched, expected):
        assert images.dtype == torch.uint8 and images.shape == want_images.shape
        assert torch.equal(images, want_images) and torch.equal(labels, want_labels)


def test_normalise_leaves_its_input_alone_and_keeps_the_memory_format():
    config = tiny_config(augment="none", channels_last=True)
    prepare = DevicePreparer(config, CPU, non_blocking=False)
    images = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8).float()
    before = images.clone()
    out = prepare.normalise(images)
    assert torch.equal(images, before) and out.data_ptr() != images.data_ptr()
    assert out.is_contiguous(memory_format=torch.channels_last)
    mean = torch.tensor(CIFAR_MEAN).view(1, 3, 1, 1) * 255
    std = torch.tensor(CIFAR_STD).view(1, 3, 1, 1) * 255
    assert torch.allclose(out, (before - mean) / std)
