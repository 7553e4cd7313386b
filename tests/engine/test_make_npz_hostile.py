"""`workbench make-npz` on hostile sources: a crafted CIFAR tarball runs nothing, odd image folders are reported."""

import os
import pickle
import struct
import tarfile

import numpy as np
import pytest

from workbench.cli import main
from workbench.npz.cifar_pickle import RefusedPickle, load_cifar_batch
from workbench.npz.make import IMAGE_SUFFIXES

CIFAR10_MEMBERS = [*[f"data_batch_{i}" for i in range(1, 6)], "test_batch"]
LABEL_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def one_line(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return code, out, err.strip()


def py2_batch(data: np.ndarray, labels: list[int]) -> bytes:
    """A batch as Python 2 and numpy 1.x pickled CIFAR's: protocol 2, byte strings (SHORT_BINSTRING /
    BINSTRING), the array rebuilt by numpy.core.multiarray._reconstruct, numpy.ndarray and numpy.dtype."""

    def string(text: bytes) -> bytes:
        return (b"U" + bytes([len(text)]) if len(text) < 256 else b"T" + struct.pack("<i", len(text))) + text

    def integer(number: int) -> bytes:
        return b"J" + struct.pack("<i", number)

    rows, columns = data.shape
    array = (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85" + string(b"b") + b"\x87R"
             + b"(K\x01" + integer(rows) + integer(columns) + b"\x86"
             + b"cnumpy\ndtype\n" + string(b"u1") + b"K\x00K\x01\x87R"
             + b"(K\x03" + string(b"|") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
             + b"\x89" + string(data.tobytes()) + b"tb")
    label_list = b"](" + b"".join(integer(label) for label in labels) + b"e"
    return (b"\x80\x02}(" + string(b"batch_label") + string(b"training batch 1 of 5") + string(b"data") + array
            + string(b"labels") + label_list + b"u.")


def write_tarball(path, members: dict[str, bytes]):
    source = path.parent / "src" / "cifar-10-batches-py"
    source.mkdir(parents=True)
    for name, data in members.items():
        (source / name).write_bytes(data)
    with tarfile.open(path, "w:gz") as tar:
        tar.add(source, arcname="cifar-10-batches-py")
    return path, source


def real_batches(count: int = 10) -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    members = {name: py2_batch(rng.integers(0, 256, (count, 3072), dtype=np.uint8),
                               rng.integers(0, 10, count).tolist()) for name in CIFAR10_MEMBERS}
    members["batches.meta"] = pickle.dumps({b"label_names": [name.encode() for name in LABEL_NAMES]}, protocol=2)
    return members


class RunsCode:
    """Unpickling this calls ``call(*args)``: what a crafted batch does."""

    def __init__(self, call, *args):
        self.call, self.args = call, args

    def __reduce__(self):
        return self.call, self.args


def test_a_python2_cifar_batch_loads_with_the_restricted_unpickler(capsys, tmp_path):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, (4, 3072), dtype=np.uint8)
    batch = py2_batch(data, [3, 1, 4, 1])
    assert pickle.loads(batch, encoding="bytes")[b"labels"] == [3, 1, 4, 1]  # the format CIFAR's own loader reads
    loaded = load_cifar_batch(batch)
    assert np.array_equal(loaded["data"], data) and loaded["labels"] == [3, 1, 4, 1]
    # Python 3's pickles of the same dict (bytes keys, as CIFAR's readme loads them) at every protocol.
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = load_cifar_batch(pickle.dumps({b"data": data, b"labels": [3, 1, 4, 1]}, protocol=protocol))
        assert np.array_equal(again[b"data"], data), protocol

    archive, _ = write_tarball(tmp_path / "cifar-10-python.tar.gz", real_batches())
    out = tmp_path / "cifar.npz"
    assert main(["make-npz", str(archive), "--out", str(out)]) == 0
    assert "50 training and 10 test images, 10 classes (airplane, automobile" in capsys.readouterr().out


@pytest.mark.parametrize("crafted", ["data_batch_3", "test_batch", "batches.meta"])
@pytest.mark.parametrize("how", ["os.system", "exec"])
def test_a_crafted_cifar_tarball_is_refused_and_runs_nothing(capsys, tmp_path, crafted, how):
    marker = tmp_path / "ran-code"
    payload = (RunsCode(os.system, f"touch {marker}") if how == "os.system"
               else RunsCode(exec, f"open({str(marker)!r}, 'w').close()"))
    members = real_batches()
    members[crafted] = pickle.dumps({b"data": payload, b"labels": [0]}, protocol=2)
    archive, source = write_tarball(tmp_path / "cifar-10-python.tar.gz", members)
    out = tmp_path / "out.npz"
    for given in (archive, source):  # the tarball, and its extracted folder
        code, _, line = one_line(capsys, "make-npz", str(given), "--out", str(out))
        assert code == 2 and line.startswith("workbench make-npz: ") and crafted in line
        assert "which a CIFAR batch never holds (refused: nothing was run)" in line
        assert ("posix.system" if how == "os.system" else "__builtin__.exec") in line  # protocol 2: Python 2 names
        assert not marker.exists() and not out.exists()


def test_the_restricted_unpickler_refuses_every_other_global():
    for call in (os.system, eval, getattr, np.load, pickle.loads):
        with pytest.raises(RefusedPickle, match="refused: nothing was run"):
            load_cifar_batch(pickle.dumps(RunsCode(call, "1")))
    # _codecs.encode is admitted for the bytes Python 3 writes into protocol 2 pickles, with latin1 alone.
    crafted = pickle.dumps(b"x", protocol=2).replace(b"latin1", b"utf_16")
    with pytest.raises(RefusedPickle):
        load_cifar_batch(crafted)


# -- image folders -------------------------------------------------------------------------------------


def write_images(folder, count, size=(32, 32)):
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(len(str(folder)))
    for index in range(count):
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(folder / f"{index}.png")


def png_claiming(path, width, height):
    """A PNG whose header claims width × height (its pixels are never there): Pillow checks the size on open."""
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))
    return path


@pytest.mark.parametrize("side", [20_000, 10_000])  # past Pillow's error limit (178 M pixels), past its warning (89 M)
def test_an_image_past_pillows_bomb_limit_is_refused_in_one_line(capsys, tmp_path, side):
    write_images(tmp_path / "pets" / "cat", 3)
    write_images(tmp_path / "pets" / "dog", 3)
    bomb = png_claiming(tmp_path / "pets" / "dog" / "huge.png", side, side)
    out = tmp_path / "out.npz"
    code, _, line = one_line(capsys, "make-npz", str(tmp_path / "pets"), "--out", str(out))
    assert code == 2 and line.startswith(f"workbench make-npz: {bomb} is too large to decode safely (")
    assert f"{side * side} pixels" in line and "scale it down, or leave it out" in line
    assert not out.exists()


def test_a_png_whose_header_chunk_is_cut_short_is_one_line_naming_it(capsys, tmp_path):
    """Pillow's ValueError("Truncated IHDR chunk") was a traceback: only OSError was caught."""
    write_images(tmp_path / "pets" / "cat", 3)
    write_images(tmp_path / "pets" / "dog", 3)
    damaged = png_claiming(tmp_path / "pets" / "dog" / "cut.png", 8, 8)
    data = bytearray(damaged.read_bytes())
    data[8:12] = struct.pack(">I", 1)  # IHDR's length field: 1 byte instead of 13
    damaged.write_bytes(bytes(data))
    code, _, line = one_line(capsys, "make-npz", str(tmp_path / "pets"), "--out", str(tmp_path / "out.npz"))
    assert (code, line) == (2, f"workbench make-npz: cannot read {damaged} as an image (Truncated IHDR chunk)")


def test_hidden_folders_are_skipped_with_a_note_and_one_class_left_is_refused(capsys, tmp_path):
    root = tmp_path / "pets"
    write_images(root / ".cats", 3)
    write_images(root / "dogs", 3)
    out = tmp_path / "out.npz"
    code, _, line = one_line(capsys, "make-npz", str(root), "--out", str(out))
    assert code == 2 and line == (f"workbench make-npz: {root} has images of one class only (dogs): a classifier "
                                  f"needs two or more; {root}: skipped .cats (a folder whose name starts with '.' "
                                  "is not a class)")
    assert not out.exists()
    write_images(root / "birds", 3)  # two classes besides: the file is made, the skip said
    assert main(["make-npz", str(root), "--out", str(out)]) == 0
    out_text, err = capsys.readouterr()
    assert err.strip() == f"workbench make-npz: note: {root}: skipped .cats (a folder whose name starts with '.' is not a class)"
    assert "2 classes (birds, dogs)" in out_text


def test_an_empty_class_folder_is_not_a_class_and_is_named(capsys, tmp_path):
    root = tmp_path / "pets"
    write_images(root / "train" / "cat", 3)
    write_images(root / "train" / "dog", 3)
    (root / "train" / "emu").mkdir()
    write_images(root / "test" / "cat", 1)
    write_images(root / "test" / "dog", 1)
    write_images(root / "test" / "emu", 1)
    out = tmp_path / "out.npz"
    assert main(["make-npz", str(root), "--out", str(out)]) == 0
    out_text, err = capsys.readouterr()
    assert err.strip().splitlines() == [
        f"workbench make-npz: note: {root / 'train'}: emu has no images ({', '.join(IMAGE_SUFFIXES)}): not counted "
        "as a class",
        f"workbench make-npz: note: {root / 'test'}: emu has no training images: left out of the test set",
    ]
    assert "6 training and 2 test images, 2 classes (cat, dog)" in out_text
    with np.load(out) as npz:
        assert list(npz["class_names"]) == ["cat", "dog"] and sorted(npz["test_labels"].tolist()) == [0, 1]


@pytest.mark.parametrize("name", ["cat\ndog", "tab\there", "bell\x07"])
def test_a_class_name_that_cannot_be_shown_on_one_line_is_refused(capsys, tmp_path, name):
    root = tmp_path / "pets"
    write_images(root / name, 3)
    write_images(root / "dog", 3)
    out = tmp_path / "out.npz"
    code, _, line = one_line(capsys, "make-npz", str(root), "--out", str(out))
    assert code == 2 and line == (f"workbench make-npz: {root}: the class folder {name!r} has a character that "
                                  "cannot be shown on one line (a newline or control character): rename it")
    assert not out.exists()


def test_an_out_on_a_read_only_file_system_is_one_line(capsys, tmp_path, monkeypatch):
    """The temporary file's removal fails there too: it raised from inside the handler, a double traceback."""
    import errno
    from pathlib import Path

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    root = tmp_path / "pets"
    write_images(root / "cats", 3)
    write_images(root / "dogs", 3)
    monkeypatch.setattr(np, "savez", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)
    out = tmp_path / "out.npz"
    code, _, line = one_line(capsys, "make-npz", str(root), "--out", str(out))
    assert code == 2 and line == f"workbench make-npz: cannot write {out}: read-only file system"
