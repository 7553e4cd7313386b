"""Flags the history cannot hold (issue 28, lesser items): a --name or --data-path of bytes that are not UTF-8 gave
UnicodeEncodeError, and a run id past 2^63-1 gave OverflowError from sqlite3, each a traceback. Now one line,
exit 2, nothing recorded."""

from __future__ import annotations

import os

import pytest

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
@pytest.mark.parametrize("args, named", [(["make-npz", "{latin1}", "--out", "{tmp}/x.npz"], "SOURCE"),
                                         (["tag", "1", "{latin1}"], "TAG")],
                         ids=["make-npz", "tag"])
def test_an_argument_that_is_not_utf8_is_named_as_the_user_gives_it(tmp_path, capsys, args, named):
    """A positional was named by its attribute, as a flag no command has: `workbench make-npz SOURCE` said
    "--source"."""
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


@pytest.mark.parametrize("command", [["verify", TOO_LARGE], ["export", "--out", "{tmp}/runs.csv", "--runs", TOO_LARGE]])
def test_a_run_id_past_sqlites_integers_is_one_line(tmp_path, capsys, command):
    args = [part.replace("{tmp}", str(tmp_path)) for part in command]
    code, line = one_line(capsys, "--home", str(tmp_path / "home"), *args)
    assert code == 2 and line.endswith(f"expected a number up to 9,223,372,036,854,775,807 (2^63-1), got {TOO_LARGE}")
    assert not (tmp_path / "runs.csv").exists()
