"""The real CIFAR-10 subset learns, from its .npz and written out as a PNG folder alike (issue 21, Done-when 3):
the folder pipeline decodes, crops and flips what the arrays' pipeline crops and flips. (One pair of runs proves
both: the slow tier's longest test.)"""

from __future__ import annotations

import numpy as np
import pytest
from engine_helpers import run_to_end, tiny_config
from PIL import Image

from workbench.engine.events import RunStarted, StepStats

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
ACCURACY_POINTS = 0.03  # the folder run's test accuracy is within 3 points of the npz run's


def write_png_folder(npz_path, root):
    """train/<i>-<name>/ and test/<i>-<name>/: the class folders sort into CIFAR's label order."""
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
def test_the_cifar_subset_as_a_png_folder_learns_as_the_npz_does(subset_npz, tmp_path):
    root = write_png_folder(subset_npz, tmp_path / "cifar10-png")
    same = dict(model="small-cnn", image_size=32, augment="cpu", seed=0, epochs=3, max_steps=None, batch_size=128,
                log_every=40, num_workers=1, worker_start_method="forkserver", persistent_workers=True)
    arrays = run_to_end(tiny_config(dataset="npz", data_path=str(subset_npz), **same))
    folder = run_to_end(tiny_config(dataset="folder", data_path=str(root), **same))
    for events in (arrays, folder):
        assert events[-1].status == "finished", events[-1].reason
    started = [next(e for e in events if isinstance(e, RunStarted)) for events in (arrays, folder)]
    assert [(s.train_size, s.test_size, s.num_classes) for s in started] == [(5085, 1017, 10)] * 2
    npz_accuracy, folder_accuracy = (events[-1].summary.test_accuracy for events in (arrays, folder))
    print(f"test accuracy after 3 epochs: npz {npz_accuracy:.1%}, PNG folder {folder_accuracy:.1%}")
    assert npz_accuracy >= 0.40  # it learned (chance is 10%)
    for events in (arrays, folder):
        losses = [event.loss for event in events if isinstance(event, StepStats)]
        assert losses[-1] < losses[0] * 0.8, losses
    assert abs(folder_accuracy - npz_accuracy) <= ACCURACY_POINTS, (npz_accuracy, folder_accuracy)
