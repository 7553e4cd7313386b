"""Issue 30 §9: the trained model saved (`--save-model PATH`, the form's "Save the model to"): its weights load into
the model spec it was trained from; a path that cannot take them is refused before the run; a save that fails at
the end fails the run with its figures kept."""

from __future__ import annotations

import errno
import importlib.machinery
import json
import os
import py_compile
from pathlib import Path

import torch
from hostile_paths import make_fifo
from own_images import USER_MODELS, make_folder, zip_of_user_models

from workbench.cli import main
from workbench.config import RunConfig
from workbench.engine import run
from workbench.engine.events import RunEnded, StatusChanged
from workbench.engine.models import build_model
from workbench.history.store import HistoryStore

TINY = ["--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "32", "--max-steps", "3",
        "--num-workers", "0", "--device", "cpu"]


def test_the_trained_weights_are_saved_and_load_into_the_same_model(capsys, tmp_path):
    path = tmp_path / "model.pt"
    assert main(["run", *TINY, "--save-model", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert f"Saved the trained model's weights to {path}" in out + err
    weights = torch.load(path, weights_only=True)  # tensors only: nothing in the file runs as code
    fresh = build_model("small-cnn", 10, 32)
    fresh.load_state_dict(weights)  # the same keys and shapes as the spec it was trained from
    assert json.loads(out.strip().splitlines()[-1])["config"]["save_model"] == str(path)
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".partial")]


def test_a_path_that_cannot_take_the_weights_is_refused_before_the_run(capsys, tmp_path, isolated_workbench_home):
    fifo = make_fifo(tmp_path / "model.pt")
    for target, words in ((fifo, "is a FIFO (named pipe): the weights are written to a regular file"),
                          (tmp_path / "gone" / "model.pt", "cannot be written: its folder")):
        assert main(["run", *TINY, "--save-model", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
    with HistoryStore.open() as store:
        assert store.list_runs() == []


def test_the_weights_never_replace_the_history_or_anything_else_in_the_workbench_home(
        capsys, tmp_path, isolated_workbench_home):
    """--save-model at the history replaced it with the weights, exit 0: every run was gone."""
    home = isolated_workbench_home
    assert main(["run", *TINY]) == 0
    capsys.readouterr()
    history = home / "history.sqlite3"
    before = history.read_bytes()
    link = tmp_path / "model.pt"
    link.symlink_to(history)  # a link's target is what a save replaces
    for target in (history, home / "history.sqlite3-wal", home / "gui-settings.json", link):
        assert main(["run", *TINY, "--save-model", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"is in the workbench home ({home.resolve()})" in err, err
    assert history.read_bytes() == before
    with HistoryStore.open() as store:
        assert len(store.list_runs()) == 1  # nothing more ran
    assert main(["run", *TINY, "--save-model", str(home / "model.pt")]) == 0  # weights of their own name: kept
    assert torch.load(home / "model.pt", weights_only=True)


def test_a_save_that_fails_at_the_end_fails_the_run_and_keeps_its_figures(tmp_path, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    config = RunConfig(dataset="synthetic", synthetic_size=128, batch_size=32, max_steps=3, log_every=1,
                       num_workers=0, device="cpu", save_model=str(tmp_path / "model.pt"))
    events = list(run(config, lambda: False))
    ended = events[-1]
    assert isinstance(ended, RunEnded) and ended.status == "failed"
    assert ended.reason.startswith(f"trained, but could not save the weights to {tmp_path / 'model.pt'}: ")
    assert ended.summary.steps == 3 and ended.summary.images_per_sec is not None  # the run's figures stay
    assert not any(isinstance(e, StatusChanged) and e.message.startswith("Saved") for e in events)
    assert not (tmp_path / "model.pt").exists()


def test_torch_saves_own_error_fails_the_run_in_words_and_keeps_its_figures(tmp_path, monkeypatch):
    """torch.save raises RuntimeError, not OSError, on a full disk: the CLI ended in a traceback after training."""
    def full_disk(*args, **kwargs):
        raise RuntimeError("unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", full_disk)
    config = RunConfig(dataset="synthetic", synthetic_size=128, batch_size=32, max_steps=3, log_every=1, num_workers=0,
                       device="cpu", save_model=str(tmp_path / "model.pt"))
    ended = list(run(config, lambda: False))[-1]
    assert ended.status == "failed" and ended.reason == (
        f"trained, but could not save the weights to {tmp_path / 'model.pt'}: the file could not be written whole, "
        "is the disk full? (unexpected pos 64 vs 0)")
    assert ended.summary.steps == 3 and ended.summary.images_per_sec is not None
    assert os.listdir(tmp_path) == []  # the partial file is gone


def test_a_folder_that_takes_no_new_files_is_refused_before_the_run(capsys, tmp_path, monkeypatch):
    """/proc/m.pt trained the whole run, then torch.save failed with a traceback."""
    proc = os.statvfs("/proc") if hasattr(os, "statvfs") and os.path.isdir("/proc") else None
    if proc is not None and proc.f_blocks == proc.f_files == 0:  # Linux's procfs
        assert main(["run", *TINY, "--save-model", "/proc/m.pt"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "its folder /proc takes no new files" in err, err
    folder = tmp_path / "locked"
    folder.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: Path(path) != folder and real_access(path, mode, **kw))
    assert main(["run", *TINY, "--save-model", str(folder / "m.pt")]) == 2  # root passes os.access: faked here
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"its folder {folder} takes no new files (permission denied)" in err, err


def _save_problems(**settings) -> list[str]:
    return [problem for problem in RunConfig(**settings).validate() if problem.startswith("save_model")]


def test_the_weights_never_replace_the_runs_data_or_its_model_code(capsys, tmp_path, monkeypatch):
    """--save-model victim.npz with --data-path victim.npz replaced the dataset; --save-model mm.py with
    --model mm:good turned the user's module into a zip file."""
    data = tmp_path / "victim.npz"
    data.write_bytes(b"data")
    link = tmp_path / "model.pt"
    link.symlink_to(data)  # a link's target is what a save replaces
    for target in (data, link):
        (problem,) = _save_problems(dataset="npz", data_path=str(data), save_model=str(target))
        assert f"is the run's data_path ({data}): the weights would replace the data" in problem
    folder = make_folder(tmp_path / "pets", per_class=4)
    inside = folder / "cat" / "model.pt"
    assert main(["run", "--dataset", "folder", "--data-path", str(folder), "--device", "cpu", "--max-steps", "1",
                 "--batch-size", "4", "--num-workers", "0", "--no-history", "--save-model", str(inside)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"is inside the run's image folder ({folder})" in err, err
    assert not inside.exists()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_module_for_saving.py").write_text(USER_MODELS)
    for target in ("my_module_for_saving.py", str(tmp_path / "my_module_for_saving.py")):
        (problem,) = _save_problems(model="my_module_for_saving:tiny_net", save_model=target)
        assert "is the source of the model's module" in problem and "the weights would replace your code" in problem
    assert _save_problems(model="my_module_for_saving:tiny_net", save_model="weights.pt") == []


MOUNT_TABLE = """22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
30 27 0:40 / /mnt/ram rw,relatime - ramfs ramfs rw
31 30 0:41 / /mnt/ram/with\\040space rw - tmpfs tmpfs rw
"""


def test_ramfs_reports_no_storage_as_proc_does_but_takes_files(tmp_path, monkeypatch):
    """statvfs gives ramfs neither blocks nor inodes, as it gives /proc: --save-model to a ramfs folder was refused
    as "a file system without storage". Its type, from the mount table, tells the two apart."""
    from workbench import regular_file

    assert regular_file._file_system_type("/mnt/ram/models", MOUNT_TABLE) == "ramfs"
    assert regular_file._file_system_type("/mnt/ram/with space/m", MOUNT_TABLE) == "tmpfs"  # the longest point
    assert regular_file._file_system_type("/proc/self", MOUNT_TABLE) == "proc"

    class NoBlocksNoInodes:
        f_flag, f_blocks, f_files = 0, 0, 0

    monkeypatch.setattr(os, "statvfs", lambda folder: NoBlocksNoInodes())
    for kind, problem in (("ramfs", None), ("proc", "takes no new files (a file system without storage, such as "
                                                   "/proc)"), (None, "takes no new files (a file system without "
                                                               "storage, such as /proc)")):
        monkeypatch.setattr(regular_file, "_file_system_type", lambda folder, table=None, kind=kind: kind)
        assert regular_file.new_file_problem(tmp_path) == problem, kind


def test_the_weights_never_replace_the_zip_archive_the_model_module_is_imported_from(capsys, tmp_path, monkeypatch):
    """--save-model models.zip with --model zipped_mod:tiny_net (models.zip on the path) was accepted: the check
    looked only for a .py file, and the run replaced the archive, with all the user's code in it, by the weights."""
    archive = zip_of_user_models(tmp_path, "zipped_weights_victim", monkeypatch)
    before = archive.read_bytes()
    link = tmp_path / "model.pt"
    link.symlink_to(archive)  # a link's target is what a save replaces
    for target in (archive, link):
        assert main(["run", *TINY, "--no-history", "--model", "zipped_weights_victim:tiny_net",
                     "--save-model", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        assert f"is the zip archive the model's module is imported from ({archive}): the weights would replace your " \
               "code" in err, err
    assert archive.read_bytes() == before
    assert _save_problems(model="zipped_weights_victim:tiny_net", save_model=str(tmp_path / "weights.pt")) == []


def test_the_weights_never_replace_the_compiled_file_the_model_module_is_imported_from(tmp_path, monkeypatch):
    """The check compared --save-model with the module's .py alone: its cached .pyc, a sourceless .pyc and an
    extension module (what the import actually reads) were replaced by the weights."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "compiled_weights_victim.py"
    source.write_text(USER_MODELS)
    cached = Path(py_compile.compile(str(source), doraise=True))  # __pycache__/….cpython-3XX.pyc
    (problem,) = _save_problems(model="compiled_weights_victim:tiny_net", save_model=str(cached))
    assert f"is the cached bytecode of the model's module ({cached}): the weights would replace your code" in problem
    sourceless = tmp_path / "sourceless_weights_victim.pyc"  # no .py beside it: the .pyc is imported
    py_compile.compile(str(source), cfile=str(sourceless), doraise=True)
    (problem,) = _save_problems(model="sourceless_weights_victim:tiny_net", save_model=str(sourceless))
    assert f"is the compiled file the model's module is imported from ({sourceless})" in problem
    extension = tmp_path / f"extension_weights_victim{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    extension.write_bytes(b"\x7fELF")  # found by its name; nothing imports it
    (problem,) = _save_problems(model="extension_weights_victim:make", save_model=str(extension))
    assert f"is the compiled file the model's module is imported from ({extension})" in problem
    assert _save_problems(model="sourceless_weights_victim:tiny_net", save_model="weights.pt") == []
