"""An image folder's training images counted without torch, from directory entries only, and cached until a
directory changes: the cap max-batch puts on a folder's batch (issue 21 §3)."""

from __future__ import annotations

import os

from own_images import make_folder
from PIL import Image

from workbench import data_check, folder_layout
from workbench.config import RunConfig
from workbench.folder_layout import scan_folder, training_image_count


def test_the_count_is_the_training_split_a_run_would_have(tmp_path):
    flat = make_folder(tmp_path / "flat", per_class=11)
    split = make_folder(tmp_path / "split", layout="split")
    (flat / "cat" / "notes.txt").write_text("not an image")
    assert training_image_count(flat) == scan_folder(flat, 0).train_size == 3 * (11 - 2)
    assert training_image_count(split) == scan_folder(split, 0).train_size == 27
    assert training_image_count(tmp_path / "missing") is None
    assert training_image_count(flat / "cat" / "notes.txt") is None


def test_the_count_reads_directories_once_until_one_of_them_changes(tmp_path, monkeypatch):
    root = make_folder(tmp_path / "pets")
    listed = []
    real_scandir = os.scandir
    monkeypatch.setattr(folder_layout.os, "scandir", lambda path: listed.append(path) or real_scandir(path))
    assert training_image_count(root) == 30 and len(listed) == 4  # the folder and its 3 classes
    assert training_image_count(root) == 30 and len(listed) == 4  # cached: stat only
    before = os.stat(root / "dog").st_mtime_ns
    for name in ("new1.png", "new2.png"):  # changes dog/'s time, not the folder's
        Image.new("RGB", (8, 8)).save(root / "dog" / name)
    os.utime(root / "dog", ns=(before + 10**9, before + 10**9))  # as a file system with coarse times would see it
    assert training_image_count(root) == 31 and len(listed) == 8  # 14 dogs: 3 held out for test


def test_a_folders_size_is_counted_off_the_form_only(tmp_path, monkeypatch):
    # The settings form asks data_check on the GUI thread: listing a large (or network) folder there would
    # freeze the window, so only the callers that run elsewhere (max-batch's search) count.
    root = make_folder(tmp_path / "pets")
    config = RunConfig(dataset="folder", data_path=str(root), batch_size=4)
    monkeypatch.setattr(folder_layout.os, "scandir", lambda path: (_ for _ in ()).throw(AssertionError(path)))
    assert data_check.train_size(config) is None and data_check.data_problems(config) == []
    monkeypatch.undo()
    assert data_check.train_size(config, count_folder=True) == 30


def test_counting_a_folder_needs_no_torch():
    # The CLI's checks and max-batch's plan run before torch is imported (it costs seconds).
    import subprocess
    import sys

    script = ("import sys, workbench.data_check, workbench.folder_layout; "
              "print(sorted(n for n in sys.modules if n.split('.')[0] in ('torch', 'PIL')))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_what_the_scan_leaves_out_is_said_a_folder_link_and_a_class_only_the_test_split_has(tmp_path):
    """A link to a class folder (not followed: a loop would be endless) and val/'s class that train/ lacks were
    left out without a word, while make-npz read them."""
    flat = make_folder(tmp_path / "flat", per_class=4)
    store = make_folder(tmp_path / "store", per_class=4)
    os.symlink(store / "cat", flat / "bird")
    os.symlink(flat / "loop", flat / "loop")  # a link loop: no folder, and no note
    layout = scan_folder(flat, 0)
    assert "bird" not in layout.class_names
    (note,) = [note for note in layout.notes if "link" in note]
    assert note.startswith("skipped 1 link to a folder (links are not followed") and note.endswith(str(flat / "bird"))
    split = make_folder(tmp_path / "split", layout="split")
    (split / "val" / "bird").mkdir()
    for index in range(2):
        Image.new("RGB", (8, 8)).save(split / "val" / "bird" / f"{index}.png")
    layout = scan_folder(split, 0)
    assert "bird" not in layout.class_names
    assert "val/ holds 1 class train/ lacks (bird): 2 images left out (a class is learned from train/)" in layout.notes
