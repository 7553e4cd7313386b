"""Flags the history cannot hold (issue 28, lesser items): a --name or --data-path of bytes that are not UTF-8 gave
UnicodeEncodeError, and a run id past 2^63-1 gave OverflowError from sqlite3, each a traceback. Now one line,
exit 2, nothing recorded."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from workbench.cli import main
from workbench.history.store import HistoryStore

TINY = ["--dataset", "synthetic", "--synthetic-size", "64", "--batch-size", "32", "--max-steps", "2",
        "--device", "cpu", "--num-workers", "0"]
TOO_LARGE = str(2**63)


def one_line(capsys, *args) -> tuple[int, str]:
    code = main(list(args))
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return code, err.strip()


@pytest.mark.skipif(os.name != "posix", reason="POSIX file names are bytes")
def test_a_name_or_data_path_that_is_not_utf8_is_one_line_and_records_nothing(tmp_path, capsys):
    home = tmp_path / "home"
    latin1 = os.fsdecode(b"caf\xe9")  # how Python hands such argv bytes over: a lone surrogate
    code, line = one_line(capsys, "--home", str(home), "run", *TINY, "--name", latin1)
    assert code == 2 and line == ("workbench run: --name holds bytes that are not UTF-8 text, which the history "
                                  "cannot keep: rename the file or folder, or give another name")
    folder = os.path.join(os.fsencode(tmp_path), b"photos-\xe9t\xe9")
    os.mkdir(folder)
    code, line = one_line(capsys, "--home", str(home), "run", *TINY, "--dataset", "folder",
                          "--data-path", os.fsdecode(folder))
    assert code == 2 and line.startswith("workbench run: --data-path holds bytes that are not UTF-8 text")
    with HistoryStore.open(home) as store:
        assert store.list_runs() == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX file names are bytes")
@pytest.mark.parametrize("args, named", [(["tag", "1", "{latin1}"], "TAG"),
                                         (["make-npz", "{tmp}", "--out", "{tmp}/{latin1}.npz"], "--out")],
                         ids=["tag", "make-npz-out"])
def test_an_argument_that_is_not_utf8_is_named_as_the_user_gives_it(tmp_path, capsys, args, named):
    """A positional was named by its attribute, as a flag no command has: `workbench tag 1 TAG` said "--tags".
    (make-npz's --out is refused: `run --data-path` could not keep the file's name.)"""
    latin1 = os.fsdecode(b"caf\xe9")
    code, line = one_line(capsys, "--home", str(tmp_path / "home"),
                          *(arg.format(latin1=latin1, tmp=tmp_path) for arg in args))
    assert code == 2 and line.startswith(f"workbench {args[0]}: {named} holds bytes that are not UTF-8 text"), line


@pytest.mark.skipif(os.name != "posix", reason="POSIX file names are bytes")
@pytest.mark.parametrize("how", [[], ["--out"]], ids=["FILE", "--out"])
def test_export_writes_a_file_whose_name_is_not_utf8(tmp_path, capsys, how):
    """An export's file name is kept nowhere, yet it was refused "which the history cannot keep": it is written under
    the bytes given, and the line saying so shows the name escaped."""
    target = os.path.join(os.fsencode(tmp_path), b"caf\xe9.csv")
    code = main(["--home", str(tmp_path / "home"), "export", *how, os.fsdecode(target)])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    with open(target, "rb") as written:
        assert written.read().startswith(b"run_id,")
    assert out.startswith("Wrote ") and out.endswith(f"{tmp_path}/caf\\udce9.csv\n"), out


def write_pngs(folder: Path, count: int) -> None:
    folder.mkdir(parents=True)
    for index in range(count):
        Image.fromarray(np.full((8, 8, 3), 40 * index, dtype=np.uint8)).save(folder / f"{index}.png")


@pytest.mark.skipif(os.name != "posix", reason="POSIX file names are bytes")
def test_make_npz_reads_a_source_whose_name_is_not_utf8(tmp_path, capsys):
    """SOURCE is only read, its name kept nowhere, yet a folder named with bytes that are not UTF-8 was refused
    "which the history cannot keep". It is read as any folder; a message naming it shows the name escaped."""
    source = Path(os.fsdecode(os.path.join(os.fsencode(tmp_path), b"imgs-\xff")))
    write_pngs(source / "cat", 3)
    write_pngs(source / "dog", 3)
    (source / ".cache").mkdir()  # a note names the folder
    out = tmp_path / "imgs.npz"
    code = main(["make-npz", str(source), "--out", str(out)])
    printed, err = capsys.readouterr()
    assert (code, err) == (0, f"workbench make-npz: note: {tmp_path}/imgs-\\udcff: skipped .cache (a folder whose "
                              "name starts with '.' is not a class)\n"), err
    assert printed.startswith(f"Wrote {out}: 5 training and 1 test images, 2 classes (cat, dog)"), printed
    with np.load(out) as npz:
        assert list(npz["class_names"]) == ["cat", "dog"] and npz["train_images"].shape == (5, 32, 32, 3)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file names are bytes")
def test_make_npz_names_a_class_folder_that_is_not_utf8_as_such(tmp_path, capsys):
    """The class name goes into the .npz (its class_names), so it is refused; the reason said "(a newline or
    control character)"."""
    write_pngs(tmp_path / "pets" / os.fsdecode(b"caf\xe9"), 2)
    write_pngs(tmp_path / "pets" / "dog", 2)
    code, line = one_line(capsys, "make-npz", str(tmp_path / "pets"), "--out", str(tmp_path / "pets.npz"))
    assert code == 2 and line == (f"workbench make-npz: {tmp_path}/pets: the class folder 'caf\\udce9' has bytes "
                                  "that are not UTF-8 text: rename it")
    assert not (tmp_path / "pets.npz").exists()


@pytest.mark.parametrize("command", [["verify", TOO_LARGE], ["export", "--out", "{tmp}/runs.csv", "--runs", TOO_LARGE]])
def test_a_run_id_past_sqlites_integers_is_one_line(tmp_path, capsys, command):
    args = [part.replace("{tmp}", str(tmp_path)) for part in command]
    code, line = one_line(capsys, "--home", str(tmp_path / "home"), *args)
    assert code == 2 and line.endswith(f"expected a number up to 9,223,372,036,854,775,807 (2^63-1), got {TOO_LARGE}")
    assert not (tmp_path / "runs.csv").exists()
