"""The real CIFAR-10 subset learns from a PNG folder, and that folder feeds the model what the .npz does (issue 21,
Done-when 3): every image decodes to the npz's pixels with its label, and the workers crop and flip them with the
arrays' own transform, draw for draw. (Exact, where two training runs compared their accuracies within 3 points
at twice the time: the slow tier's longest test.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from engine_helpers import run_to_end, tiny_config
from PIL import Image

from workbench.engine.augment import per_sample_transform
from workbench.engine.data import load_arrays
from workbench.engine.events import RunStarted, StepStats
from workbench.engine.folder_data import FolderImages, Transforms
from workbench.folder_layout import scan_folder

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def write_png_folder(npz_path, root):
    """train/<i>-<name>/ and test/<i>-<name>/: the class folders sort into CIFAR's label order; each file is named
    by its index in the npz."""
    with np.load(npz_path) as arrays:
        for split in ("train", "test"):
            images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
            for label, name in enumerate(CIFAR10_CLASSES):
                (root / split / f"{label}-{name}").mkdir(parents=True)
            for index, (image, label) in enumerate(zip(images, labels)):
                Image.fromarray(image).save(root / split / f"{label}-{CIFAR10_CLASSES[label]}" / f"{index:05d}.png")
    return root


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_cifar_subset_as_a_png_folder_feeds_the_npz_pixels_and_learns(subset_npz, tmp_path):
    root = write_png_folder(subset_npz, tmp_path / "cifar10-png")
    arrays = load_arrays(tiny_config(dataset="npz", data_path=str(subset_npz)))  # the npz pipeline's own reading
    layout = scan_folder(root, seed=0)
    transforms = Transforms(32, "cpu")
    for split, images, labels in ((layout.train, arrays.train_images, arrays.train_labels),
                                  (layout.test, arrays.test_images, arrays.test_labels)):
        assert len(split) == len(labels)
        decoded = FolderImages(split, transforms, train=False)  # at 32 × 32, evaluation keeps the image as it is
        for position in range(len(decoded)):
            image, label = decoded[position]
            index = int(Path(split.paths[position]).stem)
            assert label == labels[index] and torch.equal(image, images[index]), split.paths[position]

    # Training crops and flips each image with the arrays' transform: the same outputs from the same draws.
    array_transform = per_sample_transform(32)
    for seed in range(20):
        image = arrays.train_images[seed]
        torch.manual_seed(seed)
        folder_out = transforms.train(image)
        torch.manual_seed(seed)
        assert torch.equal(folder_out, array_transform(image))

    config = tiny_config(dataset="folder", data_path=str(root), model="small-cnn", image_size=32, augment="cpu",
                         seed=0, epochs=1, max_steps=None, batch_size=128, log_every=10, num_workers=1,
                         worker_start_method="forkserver", persistent_workers=True)
    events = run_to_end(config)
    assert events[-1].status == "finished", events[-1].reason
    started = next(event for event in events if isinstance(event, RunStarted))
    assert (started.train_size, started.test_size, started.num_classes) == (5085, 1017, 10)
    accuracy = events[-1].summary.test_accuracy
    print(f"test accuracy after 1 epoch from the PNG folder: {accuracy:.1%}")
    # It learned: chance is 10 % (one standard deviation of a guess over 1,017 images: 0.9 points). One epoch (40
    # steps) reached 43.0 % on the 2-core AMD EPYC VM, and 34.5-41.7 % with seeds 1-3 (49.1 % after 2 epochs, 52-54 %
    # after 3 on two CPUs, from the folder and the npz alike): the bound leaves room for another CPU's float results.
    assert accuracy >= 0.25
    losses = [event.loss for event in events if isinstance(event, StepStats)]
    assert losses[-1] < losses[0] * 0.85, losses  # 2.15-2.22 at step 10, 1.62-1.63 at step 40 (seeds 0-3)
