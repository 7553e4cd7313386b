"""`workbench make-npz`: a dataset file from CIFAR-10's tarball (built offline in its format) or an image folder."""

import json

import numpy as np
import pytest
from engine_helpers import write_cifar10_archive
from PIL import Image

from workbench.cli import main
from workbench.npz.header import npz_problems


def test_cifar10_tarball_becomes_an_npz_that_trains(capsys, tmp_path):
    archive, _, batches = write_cifar10_archive(tmp_path, per_batch=20, test=30)
    out = tmp_path / "cifar10.npz"
    assert main(["make-npz", str(archive), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"Wrote {out}: 100 training and 30 test images, 10 classes (airplane, automobile" in printed
    assert npz_problems(out) == []
    with np.load(out) as npz:
        data, labels = batches["data_batch_1"]
        assert npz["train_images"].shape == (100, 32, 32, 3) and npz["train_images"].dtype == np.uint8
        # CIFAR rows are channel-major (1024 red, 1024 green, 1024 blue): pixel (0, 0) is (r0, g0, b0).
        assert tuple(npz["train_images"][0, 0, 0]) == (data[0, 0], data[0, 1024], data[0, 2048])
        assert npz["train_labels"][:20].tolist() == labels
        assert npz["test_images"].shape == (30, 32, 32, 3)
        assert list(npz["class_names"])[:2] == ["airplane", "automobile"]

    assert main(["run", "--data-path", str(out), "--max-steps", "2", "--batch-size", "25", "--device", "cpu",
                 "--num-workers", "0", "--no-history", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["steps"] == 2


def test_limits_keep_the_first_images(capsys, tmp_path):
    archive, _, _ = write_cifar10_archive(tmp_path)
    out = tmp_path / "small.npz"
    assert main(["make-npz", str(archive), "--out", str(out), "--max-train", "50", "--max-test", "10"]) == 0
    with np.load(out) as npz:
        assert len(npz["train_labels"]) == 50 and len(npz["test_labels"]) == 10


def _write_images(folder, sizes):
    rng = np.random.default_rng(1)
    for index, size in enumerate(sizes):
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{index}.png")


@pytest.mark.parametrize("held_out", ["test", "val"])
def test_an_image_folder_with_train_and_test_keeps_its_split_and_scales_to_32(capsys, tmp_path, held_out):
    """train/ + val/ (as `run` reads it) became 2 classes named "train" and "val"."""
    root = tmp_path / "pets"
    _write_images(root / "train" / "cat", [(64, 48), (32, 32), (100, 100)])
    _write_images(root / "train" / "dog", [(40, 80), (33, 33)])
    _write_images(root / held_out / "cat", [(50, 50)])
    _write_images(root / held_out / "dog", [(32, 32)])
    out = tmp_path / "pets.npz"
    assert main(["make-npz", str(root), "--out", str(out)]) == 0
    with np.load(out) as npz:
        assert npz["train_images"].shape == (5, 32, 32, 3)
        assert sorted(npz["train_labels"].tolist()) == [0, 0, 0, 1, 1]  # shuffled: see the --max-train test
        assert sorted(npz["test_labels"].tolist()) == [0, 1]
        assert list(npz["class_names"]) == ["cat", "dog"]
    assert f"2 classes (cat, dog) from the image folder (train/ and {held_out}/)" in capsys.readouterr().out


def test_an_image_folder_of_classes_is_split_by_the_test_fraction(tmp_path):
    root = tmp_path / "shapes"
    _write_images(root / "a", [(32, 32)] * 6)
    _write_images(root / "b", [(32, 32)] * 4)
    out = tmp_path / "shapes.npz"
    assert main(["make-npz", str(root), "--out", str(out), "--test-fraction", "0.3"]) == 0
    with np.load(out) as npz:
        assert (len(npz["train_labels"]), len(npz["test_labels"])) == (7, 3)


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp, "has no class folders: put each class's images in a sub-folder named after it"),
    (lambda tmp: tmp / "missing", "does not exist"),
    (lambda tmp: (tmp / "x.tar.gz").write_text("no") and tmp / "x.tar.gz", "is not a tar archive"),
])
def test_a_source_that_cannot_become_a_dataset_exits_2_with_one_line(capsys, tmp_path, make, message):
    source = make(tmp_path)
    assert main(["make-npz", str(source), "--out", str(tmp_path / "out.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"workbench make-npz: {source}") and message in err
    assert not (tmp_path / "out.npz").exists()


def test_max_train_of_a_train_and_val_folder_keeps_every_class(tmp_path):
    """The splits were stacked in class order: --max-train 3 kept three cats and no dog."""
    root = tmp_path / "pets"
    _write_images(root / "train" / "cat", [(32, 32)] * 6)
    _write_images(root / "train" / "dog", [(32, 32)] * 6)
    _write_images(root / "val" / "cat", [(32, 32)] * 2)
    _write_images(root / "val" / "dog", [(32, 32)] * 2)
    out = tmp_path / "pets.npz"
    assert main(["make-npz", str(root), "--out", str(out), "--max-train", "4", "--max-test", "2"]) == 0
    with np.load(out) as npz:
        assert len(npz["train_labels"]) == 4 and set(npz["train_labels"].tolist()) == {0, 1}


def test_a_class_folder_is_read_as_a_run_reads_it_hidden_files_skipped(tmp_path, capsys):
    """A macOS "._0.jpg" (AppleDouble, no image) failed make-npz, and a .ipynb_checkpoints copy added duplicates,
    while the run skips both; a link to a folder is said as the run says it."""
    root = tmp_path / "pets"
    _write_images(root / "cat", [(32, 32)] * 5)
    _write_images(root / "dog", [(32, 32)] * 5)
    (root / "cat" / "._0.jpg").write_bytes(b"\x00\x05\x16\x07")
    _write_images(root / "cat" / ".ipynb_checkpoints", [(32, 32)] * 3)
    out = tmp_path / "pets.npz"
    assert main(["make-npz", str(root), "--out", str(out), "--test-fraction", "0.2"]) == 0
    with np.load(out) as npz:
        assert len(npz["train_labels"]) + len(npz["test_labels"]) == 10


def test_a_source_that_is_no_folder_is_said_as_what_it_is(tmp_path, capsys):
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert main(["make-npz", str(fifo), "--out", str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" not in err and "FIFO" in err
