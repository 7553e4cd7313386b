"""Read an .npz dataset's array names, shapes and dtypes from its headers, without loading the arrays.

An .npz is a zip of .npy members; each member starts with a small header (magic, version, a dict of
shape, dtype and order). Reading those bytes costs microseconds where ``np.load`` would read
hundreds of megabytes, so the form can check a file as the user types its path.
"""

from __future__ import annotations

import functools
import lzma
import math
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.npz.sizes import size_problems
from workbench.regular_file import kind_problem, regular_file_problem

NPZ_KEYS = ("train_images", "train_labels", "test_images", "test_labels")
CLASS_NAMES_KEY = "class_names"  # optional: the classes' names, and so their number
IMAGE_SHAPE = (32, 32, 3)


class NpzError(ValueError):
    """The file is not an .npz dataset the workbench can read; the message says what is wrong."""


# What reading a damaged archive raises: zipfile's RuntimeError (a member marked encrypted), NotImplementedError (a
# compression method it lacks), a deflate or lzma stream's own error (bytes flipped inside a member), besides the
# usual. Each is the file's fault, said in one line: none may reach the user as a traceback (the window, reading
# a saved path at start, failed to open at all).
DAMAGED_ARCHIVE_ERRORS = (OSError, zipfile.BadZipFile, EOFError, ValueError, RuntimeError, NotImplementedError,
                          zlib.error, lzma.LZMAError)


@dataclass(frozen=True)
class ArrayHeader:
    shape: tuple[int, ...]
    dtype: np.dtype
    # From the zip's central directory and the member itself: what the sizes the header claims are checked against.
    header_bytes: int = 0  # the .npy header (magic, version, dict), before the data
    stored_bytes: int = 0  # the member once decompressed (ZipInfo.file_size): zipfile never reads past it
    compressed_bytes: int = 0  # the member in the file (ZipInfo.compress_size)

    @property
    def data_bytes(self) -> int:
        """What the array takes once decoded, as its header claims (shape × item size)."""
        return math.prod(self.shape) * self.dtype.itemsize

    def describe(self) -> str:
        return f"{self.dtype} {self.shape}"


def read_headers(path: Path | str) -> dict[str, ArrayHeader]:
    """Every array in the archive by name (without ".npy"), from the headers alone; NpzError otherwise."""
    path = Path(path).expanduser()
    # os.stat before any open: a FIFO would block the caller (the form, on the GUI thread) forever,
    # a device would be read without end, and a symlink loop makes Path.resolve raise.
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        raise NpzError(f"npz file {path} {regular_file_problem(path)}") from None
    problem = kind_problem(stat.st_mode)
    if problem is not None:
        raise NpzError(f"npz file {path} {problem}, not an .npz file")
    return _read_headers(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _read_headers(path: Path, _mtime_ns: int, _size: int) -> dict[str, ArrayHeader]:
    if not zipfile.is_zipfile(path):
        raise NpzError(
            f"{path} is not a valid npz archive (an .npz file is a zip of .npy arrays, as numpy.savez writes)"
        )
    headers: dict[str, ArrayHeader] = {}
    bare: set[str] = set()
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                # np.load's archive["train_labels"] takes a member named just that before train_labels.npy: such a
                # member is the array read, so its header is the one checked (it passed every check unread)
                npy = info.filename.endswith(".npy")
                key = info.filename[: -len(".npy")] if npy else info.filename
                if (not npy and key not in _ARRAY_KEYS) or (npy and key in bare):
                    continue
                with archive.open(info) as stream:
                    shape, dtype = _read_member_header(stream)
                    headers[key] = ArrayHeader(shape, dtype, stream.tell(), info.file_size, info.compress_size)
                if not npy:
                    bare.add(key)
    except DAMAGED_ARCHIVE_ERRORS as error:
        raise NpzError(f"{path} is not a valid npz archive ({error})") from None
    return headers


_ARRAY_KEYS = frozenset({*NPZ_KEYS, CLASS_NAMES_KEY})


def _read_member_header(stream) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    else:  # 3.0 (utf-8 field names) has no public reader; numpy's stubs leave its private one out
        shape, _, dtype = np.lib.format._read_array_header(stream, version)  # type: ignore[attr-defined]
    return tuple(int(size) for size in shape), np.dtype(dtype)


def npz_problems(path: Path | str) -> list[str]:
    """What stops this file from being a workbench dataset, from its headers; [] when it looks right.

    Sizes are checked too (npz/sizes.py): a header that lies, a decompression bomb, more than fits in RAM.
    What needs the values (the labels) is npz/labels.py's, before a run starts.
    """
    try:
        headers = read_headers(path)
    except NpzError as error:
        return [str(error)]
    shown = Path(path).expanduser()
    missing = [key for key in NPZ_KEYS if key not in headers]
    if missing:
        has = ", ".join(sorted(headers)) if headers else "no arrays"
        return [
            f"npz file {shown} has {has}; it needs {', '.join(NPZ_KEYS)} (missing: {', '.join(missing)})"
        ]
    problems = []
    for split in ("train", "test"):
        images, labels = headers[f"{split}_images"], headers[f"{split}_labels"]
        if images.dtype.hasobject or labels.dtype.hasobject:
            problems.append(f"npz file {shown}: {split} arrays hold Python objects (pickled data), not numbers")
            continue
        if len(images.shape) != 4 or images.shape[1:] != IMAGE_SHAPE or images.dtype != np.uint8:
            problems.append(
                f"npz file {shown}: {split}_images is {images.describe()}; "
                "expected uint8 images of shape (N, 32, 32, 3)"
            )
        elif images.shape[0] == 0:
            problems.append(f"npz file {shown}: {split}_images is empty")
        elif (len(labels.shape) != 1 or labels.shape[0] != images.shape[0]
              or not np.issubdtype(labels.dtype, np.integer)):
            problems.append(
                f"npz file {shown}: {split}_labels is {labels.describe()}; "
                f"expected {images.shape[0]} integer labels, one per image"
            )
    names = headers.get(CLASS_NAMES_KEY)
    if names is not None and (len(names.shape) != 1 or names.dtype.kind not in "US"):
        problems.append(f"npz file {shown}: {CLASS_NAMES_KEY} is {names.describe()}; expected one name per class "
                        "(an array of strings)")
    if problems:
        return problems
    return size_problems(shown, headers, NPZ_KEYS + ((CLASS_NAMES_KEY,) if names is not None else ()))


def train_size(path: Path | str) -> int | None:
    """Training images in the file, from its header; None when the file cannot tell."""
    try:
        header = read_headers(path).get("train_images")
    except NpzError:
        return None
    return header.shape[0] if header is not None and header.shape else None
