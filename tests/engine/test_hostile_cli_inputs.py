"""Hostile files given to the CLI (--config, --data-path): one line, exit 2, no traceback, no hang."""

import contextlib
import json
import os

import pytest
from hostile_paths import fifo_unblocked, make_fifo, make_symlink_loop

from workbench.cli import main
from workbench.cli.config_file import read_config_file

TINY = ["--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "32", "--max-steps", "3",
        "--device", "cpu", "--num-workers", "0", "--no-history"]
POSIX_ONLY = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")


def one_line(capsys, *args) -> tuple[int, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return code, lines[0]


CONFIG_CONTENTS = {
    "array-of-pairs": (b'[["batch_size", 64], ["epochs", 1]]', "holds an array; it must hold a JSON object"),
    "array": (b"[1, 2, 3]", "holds an array"),
    "string": (b'"batch_size=64"', "holds a string"),
    "number": (b"64", "holds a number"),
    "null": (b"null", "holds null"),
    "not-utf8": (b'{"name": "\xff\xfe"}', "is not UTF-8 text (invalid start byte at byte 10)"),
    "deep-nesting": (b"[" * 100_000 + b"]" * 100_000, "is nested too deeply to be settings"),
    "deep-inside-an-object": (b'{"lr": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "is nested too deeply"),
    "too-large": (b'{"name": "' + b"x" * (2 << 20) + b'"}', "is larger than 1,048,576 bytes"),
    "not-json": (b"batch_size: 64", "is not valid JSON"),
    "a-5000-digit-integer": (b'{"batch_size": ' + b"9" * 5000 + b"}", "holds a number of more than 4,300 digits"),
    # json.loads kept the last value silently: the run trained with a setting the user may not have meant
    "duplicate-key": (b'{"lr": 0.1, "batch_size": 64, "lr": 0.5}',
                      'gives the key "lr" more than once in one object; keep one of its values'),
    "duplicate-key-inside": (b'{"name": "a", "x": {"k": 1, "k": 2}}', 'gives the key "k" more than once'),
    "not-utf8-after-a-bom": (b'\xef\xbb\xbf{"name": "\xff"}', "is not UTF-8 text (invalid start byte at byte 13)"),
}


@pytest.mark.parametrize("command", ["run", "sweep", "max-batch"])
@pytest.mark.parametrize("case", list(CONFIG_CONTENTS))
def test_a_config_that_is_not_an_object_of_settings_is_one_line(capsys, tmp_path, command, case):
    contents, words = CONFIG_CONTENTS[case]
    path = tmp_path / "settings.json"
    path.write_bytes(contents)
    extra = ["--param", "batch_size", "--values", "32,64"] if command == "sweep" else []
    code, line = one_line(capsys, command, *extra, "--config", str(path))
    assert code == 2
    assert line.startswith(f"workbench {command}: ") and words in line, line


@POSIX_ONLY
@pytest.mark.parametrize(
    "make, words",
    [
        (lambda tmp: make_fifo(tmp / "settings.json"), "is a FIFO (named pipe)"),
        (lambda tmp: make_symlink_loop(tmp / "settings.json"), "is a symlink loop (too many levels of symbolic links)"),
        (lambda tmp: tmp, "is a folder"),
        (lambda tmp: "/dev/zero", "is a character device"),
        (lambda tmp: tmp / "missing.json", "does not exist"),
    ],
    ids=["fifo", "symlink-loop", "folder", "device", "missing"],
)
def test_a_config_that_is_not_a_regular_file_is_one_line_and_never_read(capsys, tmp_path, make, words):
    path = make(tmp_path)
    with fifo_unblocked(path) if words.endswith("(named pipe)") else contextlib.nullcontext():
        code, line = one_line(capsys, "run", *TINY, "--config", str(path))
    assert code == 2 and line == f"workbench run: cannot read --config: {path} {words}"


@pytest.mark.parametrize("contents", [b'{"batch_size": 16, "max_steps": 2}', b'\xef\xbb\xbf{"batch_size": 16, "max_steps": 2}',
                                      b'\xef\xbb\xbf\n  {"batch_size": 16, "max_steps": 2}\r\n'],
                         ids=["plain", "byte-order-mark", "byte-order-mark-crlf"])
def test_a_config_starting_with_a_byte_order_mark_is_read(tmp_path, contents):
    """Windows Notepad starts a UTF-8 file with a byte order mark: it was refused with json's "Unexpected UTF-8 BOM
    (decode using utf-8-sig)"."""
    path = tmp_path / "settings.json"
    path.write_bytes(contents)
    assert read_config_file(str(path), "workbench run") == {"batch_size": 16, "max_steps": 2}


def test_a_config_object_still_gives_the_settings(capsys, tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"batch_size": 16, "max_steps": 2}))
    code = main(["run", *TINY, "--config", str(path), "--json"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and summary["config"]["max_steps"] == 3  # the flag wins over the file
    assert summary["config"]["batch_size"] == 32


@POSIX_ONLY
@pytest.mark.parametrize(
    "make, words",
    [
        (lambda tmp: make_fifo(tmp / "data.npz"), "is a FIFO (named pipe)"),
        (lambda tmp: make_symlink_loop(tmp / "data.npz"), "is a symlink loop (too many levels of symbolic links)"),
        (lambda tmp: "/dev/zero", "is a character device"),
    ],
    ids=["fifo", "symlink-loop", "device"],
)
def test_a_data_path_that_is_not_a_regular_file_is_one_line(capsys, tmp_path, make, words):
    path = make(tmp_path)
    with fifo_unblocked(path) if words.endswith("(named pipe)") else contextlib.nullcontext():
        code, line = one_line(capsys, "run", *TINY, "--dataset", "npz", "--data-path", str(path))
    assert code == 2
    assert line == f"workbench run: data_path '{path}' {words}: dataset=npz needs an .npz file"


@POSIX_ONLY
@pytest.mark.parametrize("where", ["data_path", "datasets folder"])
def test_a_cifar_folder_that_is_a_symlink_loop_or_a_file_is_one_line_before_the_run(
        capsys, tmp_path, isolated_workbench_home, where):
    """A loop raised RuntimeError from Path.resolve: a failed run recorded, with a traceback in the failure log,
    exit 1."""
    from workbench.history.store import HistoryStore

    for make, words in ((make_symlink_loop, "is a symlink loop (too many levels of symbolic links)"),
                        (lambda path: path.write_text("x") and path, "is a file")):
        folder = isolated_workbench_home / "datasets" if where == "datasets folder" else tmp_path / "cifar"
        for leftover in (folder, folder.with_name(folder.name + ".other")):
            if os.path.lexists(leftover):
                os.remove(leftover)
        make(folder)
        data_path = ["--data-path", str(folder)] if where == "data_path" else []
        code, line = one_line(capsys, "run", *TINY, "--dataset", "cifar10", *data_path)
        named = f"data_path '{folder}'" if where == "data_path" else f"the datasets folder {folder}"
        assert (code, line) == (2, f"workbench run: {named} {words}: CIFAR is kept (and downloaded) in a folder")
    with HistoryStore.open() as store:
        assert store.list_runs() == []


NO_USER = "~no-such-user-of-the-workbench"
NOT_A_PATH = f"{NO_USER} would be the home folder of a user 'no-such-user-of-the-workbench', and this machine has none"


@pytest.mark.parametrize(
    "args, words",
    [
        (["run", *TINY[2:], "--dataset", "folder", "--data-path", f"{NO_USER}/pets"],
         f"workbench run: data_path '{NO_USER}/pets' is not a valid path ({NOT_A_PATH})"),
        (["run", *TINY, "--config", f"{NO_USER}/c.json"],
         f"workbench run: cannot read --config: {NO_USER}/c.json is not a valid path ({NOT_A_PATH})"),
        (["run", *TINY, "--save-model", f"{NO_USER}/m.pt"],
         f"workbench run: save_model '{NO_USER}/m.pt' is not a valid path ({NOT_A_PATH})"),
        (["make-npz", f"{NO_USER}/pets", "--out", "o.npz"],
         f"workbench make-npz: {NO_USER}/pets is not a valid path ({NOT_A_PATH})"),
        (["make-npz", "pets", "--out", f"{NO_USER}/o.npz"],
         f"workbench make-npz: --out {NO_USER}/o.npz is not a valid path ({NOT_A_PATH})"),
    ],
    ids=["data-path", "config", "save-model", "make-npz-source", "make-npz-out"],
)
def test_a_path_of_a_user_the_machine_does_not_have_is_one_line(capsys, args, words):
    """Path.expanduser raised RuntimeError("Could not determine home directory."): a traceback."""
    code, line = one_line(capsys, *args)
    assert code == 2 and words in line, line


def test_a_nul_character_in_a_path_of_the_config_is_one_line(capsys, tmp_path):
    """os.path.realpath raised ValueError("embedded null byte"): a traceback."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"save_model": "a\u0000b.pt"}))
    code, line = one_line(capsys, "run", *TINY, "--config", str(path))
    assert code == 2 and line == "workbench run: save_model 'a\\x00b.pt' is not a valid path (it holds a NUL character)"
