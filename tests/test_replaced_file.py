"""Files written beside their target and renamed over it (an export, make-npz's .npz, the saved weights) under a
name near the file system's limit on one (255 bytes): the temporary's name, ".NAME.<tag>", passed the limit, so a
name the file system takes was refused ("file name too long"), and --save-model failed the run after training.
A --save-model name past the limit trained too, then failed: it is refused before the run."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from builders import record_complete_run

from workbench.cli import main
from workbench.engine.saved_model import save_weights
from workbench.history.store import HistoryStore
from workbench.npz.make import ImageSet
from workbench.replaced_file import temporary_beside


def long_name(folder: Path, suffix: str) -> Path:
    """A name of 250 bytes, some of them two-byte characters: the file system takes it, and a temporary named
    after it whole would not."""
    stem = "é" * 20 + "r" * (250 - 40 - len(suffix))
    path = folder / (stem + suffix)
    assert len(os.fsencode(path.name)) == 250 <= os.pathconf(folder, "PC_NAME_MAX") < 250 + len(".x.1234abcd.tmp")
    return path


def test_an_export_to_a_name_near_the_limit_is_written(tmp_path, capsys):
    home = tmp_path / "home"
    with HistoryStore.open(home) as store:
        record_complete_run(store, name="first")
    target = long_name(tmp_path, ".csv")
    assert main(["--home", str(home), "export", "--out", str(target)]) == 0, capsys.readouterr().err
    assert target.read_text(encoding="utf-8").startswith("run_id,") and "first" in target.read_text(encoding="utf-8")
    assert sorted(os.listdir(tmp_path)) == sorted(["home", target.name])  # no temporary left


def test_weights_saved_to_a_name_near_the_limit_are_written(tmp_path):
    target = long_name(tmp_path, ".pt")
    assert save_weights(torch.nn.Linear(2, 2), str(target)) == target
    assert set(torch.load(target, weights_only=True)) == {"weight", "bias"}
    assert os.listdir(tmp_path) == [target.name]


def test_a_save_model_name_past_the_limit_is_refused_before_the_run(tmp_path, capsys, isolated_workbench_home):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    target = tmp_path / ("m" * (limit + 10 - 3) + ".pt")
    assert main(["run", "--dataset", "synthetic", "--synthetic-size", "64", "--batch-size", "8", "--max-steps", "3",
                 "--num-workers", "0", "--device", "cpu", "--save-model", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (f"cannot be written: its name is {limit + 10:,} bytes long, and its folder takes names of at most "
            f"{limit:,} bytes") in err
    assert not (isolated_workbench_home / "history.sqlite3").exists() and os.listdir(tmp_path) == []


def test_an_npz_saved_to_a_name_near_the_limit_is_written(tmp_path):
    images = np.zeros((2, 32, 32, 3), dtype=np.uint8)
    labels = np.array([0, 1], dtype=np.int64)
    image_set = ImageSet(images, labels, images, labels, ("a", "b"), "image folder")
    target = long_name(tmp_path, ".npz")
    assert image_set.save(target) == target
    with np.load(target) as saved:
        assert list(saved["class_names"]) == ["a", "b"]
    assert os.listdir(tmp_path) == [target.name]


def test_the_temporary_keeps_its_tag_whole_and_a_short_name_whole(tmp_path):
    short = temporary_beside(tmp_path / "runs.csv", "1a2b.tmp")
    assert short == tmp_path / ".runs.csv.1a2b.tmp"
    cut = temporary_beside(long_name(tmp_path, ".npz"), "123.tmp.npz")
    assert cut.name.endswith(".123.tmp.npz") and len(os.fsencode(cut.name)) <= os.pathconf(tmp_path, "PC_NAME_MAX")
    assert cut.name.startswith(".éé")


def the_three_writers(folder: Path) -> dict:
    """File name → what writes it: an export (of a history under ``folder``), a make-npz .npz and saved weights."""
    home = folder / "home"
    with HistoryStore.open(home) as store:
        record_complete_run(store, name="first")
    images = np.zeros((2, 32, 32, 3), dtype=np.uint8)
    labels = np.array([0, 1], dtype=np.int64)
    return {
        "runs.csv": lambda path: main(["--home", str(home), "export", "--out", str(path)]),
        "set.npz": ImageSet(images, labels, images, labels, ("a", "b"), "image folder").save,
        "model.pt": lambda path: save_weights(torch.nn.Linear(2, 2), str(path)),
    }


def test_a_file_replaced_keeps_its_permissions_and_a_new_one_gets_the_umasks(tmp_path, capsys):
    """A private (0600) export, .npz or weights file was replaced by one the umask made (0644): readable by all."""
    writers = the_three_writers(tmp_path)
    umask = os.umask(0o022)
    try:
        for name, write in writers.items():
            private, new = tmp_path / name, tmp_path / ("new-" + name)
            private.write_bytes(b"")
            private.chmod(0o640)
            write(private)
            write(new)
            assert private.stat().st_size > 0 and oct(private.stat().st_mode & 0o7777) == oct(0o640), name
            assert oct(new.stat().st_mode & 0o7777) == oct(0o644), name
    finally:
        os.umask(umask)
    assert not [name for name in os.listdir(tmp_path) if name.startswith(".")]  # no temporary left


def test_a_symlink_replaced_stays_a_link_and_its_target_is_written(tmp_path, capsys):
    """make-npz --out and --save-model renamed a plain file over a symlink (the linked file never updated), where
    an export wrote the link's target."""
    writers = the_three_writers(tmp_path)
    (tmp_path / "kept").mkdir()
    (tmp_path / "links").mkdir()
    for name, write in writers.items():
        kept, link = tmp_path / "kept" / name, tmp_path / "links" / name
        kept.write_bytes(b"")
        link.symlink_to(kept)
        write(link)
        assert link.is_symlink() and os.readlink(link) == str(kept), name
        assert kept.stat().st_size > 0, name
    assert sorted(os.listdir(tmp_path / "kept")) == sorted(writers)  # no temporary left
