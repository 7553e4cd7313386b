"""--skip-bad-images could leave a class with no images: the run trained on one class and reported 100 % accuracy.
A class left without training images is no class, as the scan counts an empty class folder; fewer than two left is
refused before training, in the scan's words."""

from __future__ import annotations

from pathlib import Path

import pytest
from own_images import make_folder

from workbench.cli import main
from workbench.config import RunConfig
from workbench.engine.data import DataError
from workbench.engine.datasets import load_data
from workbench.history.store import HistoryStore


def spoil(folder: Path) -> None:
    """Every image of a class folder replaced by text under the same name."""
    for path in folder.iterdir():
        path.write_text("junk\n")


def test_a_class_left_without_images_is_no_class(tmp_path):
    root = make_folder(tmp_path / "pets")  # cat, dog, fox
    spoil(root / "dog")
    folder = load_data(RunConfig(dataset="folder", data_path=str(root), skip_bad_images=True))
    assert folder.class_names == ("cat", "fox")
    assert set(folder.train.labels) == set(folder.test.labels) == {0, 1}
    assert not any("/dog/" in path for split in (folder.train, folder.test) for path in split.paths)
    assert any(path.startswith(str(root / "fox")) for path, label in zip(folder.train.paths, folder.train.labels)
               if label == 1)
    assert "dog has no readable training images: not counted as a class (skip_bad_images)" in folder.notes


def test_fewer_than_two_classes_left_are_refused_before_training(tmp_path, capsys):
    root = make_folder(tmp_path / "pets")
    spoil(root / "dog")
    spoil(root / "fox")
    words = (f"{root} has 1 class folder with readable training images once 24 unreadable were skipped: a "
             "classifier needs at least two (one sub-folder of images per class)")
    with pytest.raises(DataError, match="has 1 class folder with readable training images"):
        load_data(RunConfig(dataset="folder", data_path=str(root), skip_bad_images=True))  # the window's runs
    home = tmp_path / "home"
    code = main(["--home", str(home), "run", "--dataset", "folder", "--data-path", str(root), "--device", "cpu",
                 "--max-steps", "2", "--batch-size", "4", "--num-workers", "0", "--skip-bad-images"])
    err = capsys.readouterr().err
    assert (code, err) == (2, f"workbench run: {words}\n")
    with HistoryStore.open(home) as store:
        assert store.list_runs() == []
