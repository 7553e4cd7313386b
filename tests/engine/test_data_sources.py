"""Dataset sources: synthetic, npz (validated) and CIFAR-10 from its on-disk format, offline."""

import hashlib

import numpy as np
import pytest
import torch
from engine_helpers import run_to_end, tiny_config, write_cifar10_archive, write_npz
from torchvision import datasets

from workbench.engine.data import DataError, load_arrays


def test_synthetic_is_deterministic_by_seed_and_sized_by_config():
    a = load_arrays(tiny_config(synthetic_size=300, seed=1))
    b = load_arrays(tiny_config(synthetic_size=300, seed=1).replace())
    c = load_arrays(tiny_config(synthetic_size=300, seed=2))
    assert a.train_images.shape == (300, 3, 32, 32) and a.train_images.dtype == torch.uint8
    assert a.test_images.shape == (60, 3, 32, 32)
    assert torch.equal(a.train_images, b.train_images)
    assert not torch.equal(a.train_images, c.train_images)


def test_npz_loads_hwc_images_as_chw(tmp_path):
    path = write_npz(tmp_path / "data.npz", train=40, test=8)
    with np.load(path) as archive:
        first = archive["train_images"][0]
    arrays = load_arrays(tiny_config(dataset="npz", data_path=str(path)))
    assert arrays.train_images.shape == (40, 3, 32, 32)
    assert np.array_equal(arrays.train_images[0].permute(1, 2, 0).numpy(), first)
    assert arrays.num_classes == 10


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(train_images=np.zeros((4, 28, 28), np.uint8)), "train_images is uint8 (4, 28, 28); expected uint8 images"),
        (dict(test_images=np.zeros((32, 32, 32, 3), np.float32)), "test_images is float32 (32, 32, 32, 3)"),
        (dict(train_labels=np.zeros(3, np.int64)), "train_labels is int64 (3,); expected 64 integer labels"),
        # The keys the file has, so a misnamed array is easy to spot.
        (dict(test_labels=None, labels_test=np.zeros(32, np.uint8)),
         "has labels_test, test_images, train_images, train_labels; it needs train_images, train_labels, "
         "test_images, test_labels (missing: test_labels)"),
    ],
)
def test_npz_with_wrong_contents_is_a_clear_data_error(tmp_path, overrides, message):
    path = write_npz(tmp_path / "bad.npz", **overrides)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_arrays(tiny_config(dataset="npz", data_path=str(path)))
    ended = run_to_end(tiny_config(dataset="npz", data_path=str(path)))[-1]
    assert ended.status == "failed" and ended.kind == "data" and message.split(";")[0] in ended.reason


def test_a_file_that_is_not_npz_is_a_clear_data_error(tmp_path):
    path = tmp_path / "notes.npz"
    path.write_text("hello")  # numpy alone would talk about pickles and allow_pickle
    with pytest.raises(DataError) as caught:
        load_arrays(tiny_config(dataset="npz", data_path=str(path)))
    assert str(caught.value).startswith(f"{path} is not a valid npz archive")
    assert "pickle" not in str(caught.value)


def test_batch_larger_than_the_dataset_is_a_data_error(tmp_path):
    path = write_npz(tmp_path / "small.npz", train=20)
    ended = run_to_end(tiny_config(dataset="npz", data_path=str(path), batch_size=32))[-1]
    assert ended.kind == "data" and ended.reason == "batch_size 32 is larger than the training set (20 images)"


# -- CIFAR-10 in its own on-disk format ----------------------------------------------------


def md5(path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def offline_cifar10(monkeypatch):
    """torchvision's real CIFAR10 class, but any download attempt hits a closed local port."""
    monkeypatch.setattr(datasets.CIFAR10, "url", "http://127.0.0.1:9/cifar-10-python.tar.gz")


def test_cifar10_from_its_archive_offline(tmp_path, offline_cifar10, monkeypatch):
    root = tmp_path / "datasets"
    root.mkdir()
    archive, source, batches = write_cifar10_archive(root)
    # The checksums torchvision verifies are those of our files; the code path is torchvision's own.
    monkeypatch.setattr(datasets.CIFAR10, "tgz_md5", md5(archive))
    monkeypatch.setattr(datasets.CIFAR10, "train_list", [[f"data_batch_{i}", md5(source / f"data_batch_{i}")]
                                                         for i in range(1, 6)])
    monkeypatch.setattr(datasets.CIFAR10, "test_list", [["test_batch", md5(source / "test_batch")]])
    monkeypatch.setattr(datasets.CIFAR10, "meta", {**datasets.CIFAR10.meta, "md5": md5(source / "batches.meta")})

    arrays = load_arrays(tiny_config(dataset="cifar10", data_path=str(root)))
    assert (root / "cifar-10-batches-py" / "data_batch_1").exists()  # extracted from the archive
    assert arrays.train_images.shape == (100, 3, 32, 32) and arrays.test_images.shape == (30, 3, 32, 32)
    data, labels = batches["data_batch_1"]
    assert torch.equal(arrays.train_images[0], torch.from_numpy(data[0].reshape(3, 32, 32)))
    assert arrays.train_labels[:20].tolist() == labels
    assert arrays.num_classes == 10

    ended = run_to_end(tiny_config(dataset="cifar10", data_path=str(root), batch_size=25, max_steps=3))[-1]
    assert ended.status == "finished", ended.reason


def test_cifar10_offline_without_files_says_where_and_how(tmp_path, offline_cifar10):
    root = tmp_path / "empty"
    with pytest.raises(DataError) as caught:
        load_arrays(tiny_config(dataset="cifar10", data_path=str(root)))
    message = str(caught.value)
    assert message.startswith(f"CIFAR-10 is not in {root} and could not be downloaded")
    assert "Put cifar-10-python.tar.gz in that folder, or choose dataset=synthetic" in message
    assert "\n" not in message


def test_cifar_default_folder_is_in_the_workbench_home(isolated_workbench_home, offline_cifar10):
    with pytest.raises(DataError, match=str(isolated_workbench_home / "datasets")):
        load_arrays(tiny_config(dataset="cifar10"))
