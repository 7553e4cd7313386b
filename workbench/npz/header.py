"""Read an .npz dataset's array names, shapes and dtypes from its headers, without loading the arrays.

An .npz is a zip of .npy members; each member starts with a small header (magic, version, a dict of
shape, dtype and order). Reading those bytes costs microseconds where ``np.load`` would read
hundreds of megabytes, so the form can check a file as the user types its path.
"""

from __future__ import annotations

import functools
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NPZ_KEYS = ("train_images", "train_labels", "test_images", "test_labels")
IMAGE_SHAPE = (32, 32, 3)


class NpzError(ValueError):
    """The file is not an .npz dataset the workbench can read; the message says what is wrong."""


@dataclass(frozen=True)
class ArrayHeader:
    shape: tuple[int, ...]
    dtype: np.dtype

    def describe(self) -> str:
        return f"{self.dtype} {self.shape}"


def read_headers(path: Path | str) -> dict[str, ArrayHeader]:
    """Every array in the archive by name (without ".npy"), from the headers alone; NpzError otherwise."""
    path = Path(path).expanduser()
    try:
        stat = path.resolve().stat()
    except OSError as error:
        raise NpzError(f"cannot read {path}: {(error.strerror or str(error)).lower()}") from None
    return _read_headers(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _read_headers(path: Path, _mtime_ns: int, _size: int) -> dict[str, ArrayHeader]:
    if not zipfile.is_zipfile(path):
        raise NpzError(
            f"{path} is not a valid npz archive (an .npz file is a zip of .npy arrays, as numpy.savez writes)"
        )
    headers: dict[str, ArrayHeader] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                if not member.endswith(".npy"):
                    continue
                with archive.open(member) as stream:
                    headers[member[: -len(".npy")]] = _read_member_header(stream)
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as error:
        raise NpzError(f"{path} is not a valid npz archive ({error})") from None
    return headers


def _read_member_header(stream) -> ArrayHeader:
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    else:  # 3.0 (utf-8 field names) has no public reader
        shape, _, dtype = np.lib.format._read_array_header(stream, version)
    return ArrayHeader(tuple(int(size) for size in shape), np.dtype(dtype))


def npz_problems(path: Path | str) -> list[str]:
    """What stops this file from being a workbench dataset, from its headers; [] when it looks right.

    What needs the values (negative labels) is checked when the run loads the arrays.
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
    return problems


def train_size(path: Path | str) -> int | None:
    """Training images in the file, from its header; None when the file cannot tell."""
    try:
        header = read_headers(path).get("train_images")
    except NpzError:
        return None
    return header.shape[0] if header is not None and header.shape else None
