"""dataset=folder: the user's own images, decoded in the loader and brought to image_size (issue 21 §1)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_helpers import run_to_end, tiny_config
from own_images import CLASSES, damaged_inside, make_folder
from PIL import Image

from workbench.cli import main
from workbench.engine import pipelines
from workbench.engine.data import DataError
from workbench.engine.datasets import load_data
from workbench.engine.events import RunEnded, RunStarted
from workbench.folder_layout import FOLDER_TEST_FRACTION, scan_folder
from workbench.history.store import HistoryStore


def folder_config(root: Path, **changes):
    base = dict(dataset="folder", data_path=str(root), image_size=64, batch_size=8, max_steps=6, log_every=2)
    base.update(changes)
    return tiny_config(**base)


@pytest.mark.parametrize("augment", ["cpu", "gpu", "none"])
def test_a_folder_of_mixed_pngs_and_jpegs_trains_at_64_pixels(tmp_path, augment):
    root = make_folder(tmp_path / "pets")
    events = run_to_end(folder_config(root, augment=augment))
    (started,) = [e for e in events if isinstance(e, RunStarted)]
    ended = events[-1]
    assert isinstance(ended, RunEnded) and ended.status == "finished", ended.reason
    assert (started.dataset_name, started.num_classes) == ("pets", 3)
    assert started.train_size + started.test_size == 36
    assert any("held out for test" in note and "64×64" in note for note in started.notes)
    assert ended.summary.test_accuracy is not None


def test_train_and_val_folders_are_the_splits(tmp_path):
    root = make_folder(tmp_path / "split", layout="split")
    folder = scan_folder(root, seed=0)
    assert (folder.train_size, folder.test_size, folder.class_names) == (27, 9, CLASSES)
    assert "val/ folder is the test split" in folder.split_note


def test_a_folder_too_small_to_hold_out_test_images_has_no_accuracy_rather_than_zero(tmp_path):
    """One image a class holds none back: the run read "test accuracy 0.0 %" from no images at all."""
    root = make_folder(tmp_path / "one-each", per_class=1)
    ended = run_to_end(tiny_config(dataset="folder", data_path=str(root), batch_size=1, max_steps=2))[-1]
    assert ended.status == "finished", ended.reason
    assert ended.summary.test_accuracy is None


def test_without_splits_each_class_holds_out_a_seeded_fifth(tmp_path):
    root = make_folder(tmp_path / "flat")
    one, again, other = scan_folder(root, 0), scan_folder(root, 0), scan_folder(root, 1)
    assert one.test_size == 3 * round(12 * FOLDER_TEST_FRACTION)
    assert one.test == again.test and one.test != other.test
    assert not set(one.test.paths) & set(one.train.paths)


def test_hidden_folders_empty_folders_and_a_symlink_loop_are_not_classes_and_do_not_hang(tmp_path):
    root = make_folder(tmp_path / "odd")
    (root / ".cache").mkdir()
    Image.new("RGB", (8, 8)).save(root / ".cache" / "x.png")
    (root / "empty").mkdir()
    os.symlink(root, root / "cat" / "loop")  # a link back up: the scan does not follow it
    assert scan_folder(root, 0).class_names == CLASSES


def test_a_damaged_image_names_its_file_and_the_run_keeps_what_it_recorded(tmp_path, capsys):
    # In the val/ split: the epoch's 6 training steps are recorded before evaluation meets the file.
    root = make_folder(tmp_path / "broken", layout="split")
    bad = root / "val" / "dog" / "dog99.jpg"
    damaged_inside(bad)  # the check before the run refuses a file it can tell is bad (test_bad_images.py)
    home = tmp_path / "home"
    code = main(["--home", str(home), "run", "--dataset", "folder", "--data-path", str(root), "--image-size", "32",
                 "--batch-size", "4", "--epochs", "1", "--num-workers", "0", "--device", "cpu", "--log-every", "1"])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot decode {bad}" in err and "Traceback" not in err
    with HistoryStore.open(home) as store:
        (record,) = store.list_runs()
        steps = [row["step"] for row in store.iter_step_rows(record.id)]
    assert record.status == "failed" and record.failure_kind == "data" and str(bad) in record.reason
    assert steps == [1, 2, 3, 4, 5, 6] and record.summary.steps == 6  # 27 training images, batches of 4


@pytest.mark.slow  # starts a DataLoader worker process
def test_a_damaged_image_read_by_a_worker_is_named_too(tmp_path):
    root = make_folder(tmp_path / "broken")
    bad = root / "fox" / "fox99.png"
    bad.write_bytes(b"\x89PNG garbage")
    ended = run_to_end(folder_config(root, num_workers=2, worker_start_method="forkserver", epochs=1,
                                     max_steps=None, batch_size=4, image_size=32))[-1]
    assert ended.status == "failed" and ended.kind == "data"
    assert ended.reason.startswith(f"cannot decode {bad}") and "\n" not in ended.reason


def test_gpu_resident_decodes_the_folder_once_when_it_fits_and_is_refused_with_the_sizes_when_not(tmp_path,
                                                                                                  monkeypatch):
    root = make_folder(tmp_path / "resident")
    ended = run_to_end(folder_config(root, pipeline="gpu-resident"))[-1]
    assert ended.status == "finished", ended.reason
    monkeypatch.setattr(pipelines, "RESIDENT_SHARE", 1e-9)
    refused = run_to_end(folder_config(root, pipeline="gpu-resident"))[-1]
    assert refused.status == "failed" and refused.kind == "data"
    assert "pipeline=gpu-resident would hold 30 decoded images of 3×64×64: 360.0 KiB, more than" in refused.reason
    assert "iB free; use pipeline=dataloader" in refused.reason


def test_decode_on_the_gpu_is_refused_where_it_cannot_apply(tmp_path):
    from workbench.engine.device import probe_device

    root = make_folder(tmp_path / "pngs")
    cpu = probe_device("cpu")
    assert "decode=gpu needs a CUDA GPU (nvJPEG): use decode=cpu" in folder_config(root, decode="gpu").validate(cpu)
    assert any("cannot augment" in p for p in folder_config(root, decode="gpu", augment="cpu").validate())
    assert any("holds decoded images already" in p for p in tiny_config(decode="gpu").validate())
    with pytest.raises(DataError, match="decode=gpu decodes JPEGs only"):  # 18 of its 36 images are PNGs
        pipelines.build_pipeline(load_data(folder_config(root, decode="gpu")), folder_config(root, decode="gpu"),
                                 torch.device("cpu"), None, [])


def test_a_path_that_is_no_folder_is_refused_before_anything_runs(tmp_path):
    file = tmp_path / "one.png"
    Image.new("RGB", (8, 8)).save(file)
    assert any("is a file: dataset=folder needs a folder" in p for p in folder_config(file).validate())
    os.mkfifo(tmp_path / "fifo")
    assert any("is a FIFO (named pipe): dataset=folder" in p  # stat only: no hang
               for p in folder_config(tmp_path / "fifo").validate())


def test_the_sample_batch_of_a_folder_is_at_the_image_size_with_its_class_names(tmp_path):
    from workbench.engine.datasets import preview_batch

    root = make_folder(tmp_path / "preview")
    for augment in ("cpu", "gpu", "none"):
        batch = preview_batch(folder_config(root, augment=augment), count=6)
        assert batch.images.shape == (6, 64, 64, 3) and batch.images.dtype == np.uint8
        assert set(batch.names()) <= set(CLASSES)


def test_the_ceiling_of_a_folder_run_uses_its_classes_and_image_size(tmp_path):
    from workbench.engine.ceiling import measure_ceiling
    from workbench.engine.device import probe_device

    root = make_folder(tmp_path / "ceiling")
    ceiling = measure_ceiling(folder_config(root, batch_size=4), probe_device("cpu"), budget_seconds=1.0)
    assert ceiling.images_per_sec > 0 and ceiling.key["num_classes"] == 3


def test_a_sweep_and_a_search_run_on_a_folder_with_a_torchvision_model(tmp_path):
    from workbench.experiments.events import SequenceEnded
    from workbench.experiments.sweep import SweepAxis, SweepPlan, run_sweep
    from workbench.experiments.tune import TunePlan, run_tune

    root = make_folder(tmp_path / "sweep")
    base = folder_config(root, model="squeezenet1_1", image_size=48, max_steps=4)
    swept = list(run_sweep(SweepPlan(base, (SweepAxis("augment", ("cpu", "gpu")),)), lambda: False))
    assert [e.status for e in swept if isinstance(e, SequenceEnded)] == ["finished"]
    searched = list(run_tune(TunePlan(base, trial_steps=4, knobs=("channels_last",), max_passes=1), lambda: False))
    assert searched[-1].status == "finished", searched[-1].reason


def test_findings_count_the_bytes_of_images_at_the_runs_size():
    from workbench.config import RunConfig
    from workbench.engine.run_facts import RunFacts
    from workbench.engine.run_facts import bytes_per_image as _bytes_per_image
    from workbench.engine.run_summary import RunSummary

    def facts(**changes):
        return RunFacts(config=RunConfig(**changes), summary=RunSummary(status="finished"), device_type="cuda")

    assert _bytes_per_image(facts(dataset="folder", data_path="/x", image_size=224)) == 3 * 224 * 224
    assert _bytes_per_image(facts(dataset="npz", data_path="/x.npz", image_size=224)) == 3 * 32 * 32


def test_findings_do_not_count_a_folders_test_set_as_held_on_the_device():
    # FolderTestSet streams the test files through the loader; arrays' test split sits on the device.
    from workbench.config import RunConfig
    from workbench.engine.run_facts import RunFacts
    from workbench.engine.run_facts import fixed_bytes as _fixed_bytes
    from workbench.engine.run_summary import RunSummary

    def fixed(**changes):
        return _fixed_bytes(RunFacts(config=RunConfig(**changes), summary=RunSummary(status="finished"),
                                     device_type="cuda", parameter_count=1000, train_size=5000, test_size=1000))

    weights = 1000 * 4 * 3  # weights, gradients, SGD momentum
    assert fixed(dataset="folder", data_path="/x", image_size=224) == weights
    assert fixed(dataset="folder", data_path="/x", image_size=64, pipeline="gpu-resident") == weights + 5000 * 3 * 64**2
    assert fixed(dataset="npz", data_path="/x.npz") == weights + 1000 * 3 * 32**2


def test_a_folder_as_data_path_without_dataset_trains_as_a_folder_and_says_so(tmp_path, capsys):
    root = make_folder(tmp_path / "pets")
    code = main(["--home", str(tmp_path / "home"), "run", "--data-path", str(root), "--max-steps", "2",
                 "--batch-size", "8", "--num-workers", "0", "--device", "cpu", "--log-every", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"{root} is a folder: training on its images, one sub-folder per class (--dataset folder)" in err


def test_a_folder_is_scanned_again_once_a_class_folder_changes(tmp_path):
    # A window's runs reuse the scan; an image added to (or removed from) a class folder is seen by the next
    # run (the folder's own time does not change when a class folder's files do).
    root = make_folder(tmp_path / "pets", layout="split")
    config = folder_config(root)
    first = load_data(config)
    assert load_data(config) is first
    before = os.stat(root / "train" / "dog").st_mtime_ns
    Image.new("RGB", (8, 8)).save(root / "train" / "dog" / "new.png")
    os.utime(root / "train" / "dog", ns=(before + 10**9, before + 10**9))  # as coarse file-system times see it
    again = load_data(config)
    assert again.train_size == first.train_size + 1 and str(root / "train" / "dog" / "new.png") in again.train.paths


def test_gpu_decode_waits_for_the_current_stream_before_nvjpeg_writes(monkeypatch):
    """issue 31 item 4: nvJPEG decodes on its own stream, which does not wait for the training stream, so the
    current stream is synchronised first (torch.cuda and torchvision's decoder faked: no GPU here)."""
    import torchvision.io

    from workbench.engine.folder_data import decode_on_device

    calls = []

    class Stream:
        def synchronize(self):
            calls.append("stream synchronised")

    def decode_jpeg(batch, mode, device):
        calls.append("decoded")
        return [torch.zeros(3, 40, 50, dtype=torch.uint8) for _ in batch]

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: Stream())
    monkeypatch.setattr(torchvision.io, "decode_jpeg", decode_jpeg)
    images = decode_on_device([torch.zeros(10, dtype=torch.uint8)] * 2, 32, torch.device("cuda", 0))
    assert images.shape == (2, 3, 32, 32)
    assert calls == ["stream synchronised", "decoded"]
    calls.clear()
    decode_on_device([torch.zeros(10, dtype=torch.uint8)], 32, torch.device("cpu"))
    assert calls == ["decoded"]  # a CPU decode has no stream to wait for
