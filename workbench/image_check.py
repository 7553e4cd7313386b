"""Every unreadable image of a folder found before a run starts, all at once (Pillow; no torch, no Qt).

Before, each bad file stopped one run mid-epoch and left a failed run in the history. The check reads each file
of both splits as the run would open it (a regular file, at most MAX_FILE_BYTES):

- the header check (the default): Pillow's ``Image.open`` + ``verify()``: the format, its size, and for PNG every
  chunk's CRC. A JPEG must also end with its end-of-image marker; one that does not (cut off mid-file: what a
  failed copy leaves) is decoded in full to confirm, so a JPEG padded past its end is not refused;
- ``full=True``: every file decoded as the run decodes it (about ten times the cost: docs/own-data.md).

A file the header check passes can still fail mid-run (damaged scan data behind an intact header and end
marker): the run then stops naming it, as it always did. Results are cached per file by its size, modification
time and inode, so the run's own check (``skip_bad_images``) after the CLI's or the window's costs one stat per file.
"""

from __future__ import annotations

import os
import threading
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO, Callable, Generator, Optional, Sequence

from workbench.config import RunConfig
from workbench.folder_layout import FolderLayout, FolderLayoutError, FolderSplit, scan_folder
from workbench.formatting import printable
from workbench.image_pixels import UNIDENTIFIED_WORDS, error_words
from workbench.regular_file import NotARegularFile, open_regular_file, os_error_words

MAX_FILE_BYTES = 256 * 2**20  # a file past this is not an image a training step can use (as the run refuses it)
JPEG_END = b"\xff\xd9"
JPEG_TAIL_BYTES = 64  # where the end-of-image marker of an intact JPEG sits (a few bytes of padding allowed)
SHOWN_IN_ONE_LINE = 3  # bad files named in a run's note; the CLI and the window list them all

Progress = Callable[[int, int], None]  # (files checked, files in all)


@dataclass(frozen=True)
class BadImage:
    path: str
    problem: str  # Pillow's or the OS's words: "image file is truncated (46 bytes not processed)"

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


@dataclass(frozen=True)
class ImageCheck:
    checked: int  # files read (all of them, unless cancelled)
    total: int
    bad: tuple[BadImage, ...]
    cancelled: bool = False

    def summary_line(self, prefix: str = "") -> str:
        """One line: how many of how many files cannot be read, and what to do."""
        many = len(self.bad) != 1
        return (f"{prefix}{len(self.bad):,} of {self.total:,} image{'s' if self.total != 1 else ''} cannot be read "
                f"as {'images' if many else 'an image'}: remove or replace {'them' if many else 'it'}, or skip "
                f"{'them' if many else 'it'} (--skip-bad-images; in the window, \"Skip unreadable images\")")

    def report(self, prefix: str = "") -> str:
        """The summary line, then every bad file on a line of its own (a newline in its name escaped: one line each)."""
        return "\n".join([self.summary_line(prefix)]
                         + [f"  {printable(str(bad))}" for bad in sorted(self.bad, key=lambda item: item.path)])


_cache: dict[str, tuple[tuple[int, int, int], bool, Optional[str]]] = {}  # path → (size, mtime_ns, inode), full, problem
_cache_lock = threading.Lock()


def forget_checks() -> None:
    """Drop every cached result (a benchmark's fresh pass; a test's)."""
    with _cache_lock:
        _cache.clear()


def image_problem(path: str, full: bool = False) -> Optional[str]:
    """Why ``path`` cannot be read as an image, in words; None when it can (by the header check, or ``full``)."""
    try:
        status = os.stat(path)
    except OSError as error:
        return os_error_words(error)
    key = (status.st_size, status.st_mtime_ns, status.st_ino)
    with _cache_lock:
        cached = _cache.get(path)
    if cached is not None and cached[0] == key and (cached[1] or not full or cached[2] is not None):
        return cached[2]
    problem = _problem(path, full)
    with _cache_lock:
        _cache[path] = (key, full, problem)
    return problem


def _problem(path: str, full: bool) -> Optional[str]:
    from PIL import Image, UnidentifiedImageError

    try:
        stream = open_regular_file(path)
    except NotARegularFile as error:
        return str(error).removeprefix(path).strip() or "not a regular file"
    with stream:
        size = os.fstat(stream.fileno()).st_size
        if size == 0:
            return "empty (0 bytes)"
        if size > MAX_FILE_BYTES:
            return f"{size / 2**20:,.0f} MiB: larger than any image a step can use ({MAX_FILE_BYTES // 2**20} MiB at most)"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)  # the run refuses it too
                with Image.open(stream) as image:
                    image_format = image.format
                    image.verify()
                # verify() reads a PNG's every chunk and its CRC, and a JPEG is whole where its end marker is there;
                # of BMP, GIF, TIFF and WebP it reads little (a truncated BMP passed, to fail the run mid-epoch), so
                # those are decoded
                verified_whole = image_format == "PNG" or (image_format == "JPEG" and _has_jpeg_end(stream, size))
                if full or not verified_whole:
                    stream.seek(0)
                    with Image.open(stream) as image:  # verify() leaves an image unusable: open it again
                        image.load()
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            return f"more than {Image.MAX_IMAGE_PIXELS:,} pixels: too large to decode safely"
        except UnidentifiedImageError:
            return UNIDENTIFIED_WORDS
        except (OSError, ValueError, SyntaxError, EOFError) as error:
            return error_words(error)
    return None


def _has_jpeg_end(stream: BinaryIO, size: int) -> bool:
    stream.seek(max(0, size - JPEG_TAIL_BYTES))
    return JPEG_END in stream.read(JPEG_TAIL_BYTES)


def checking(paths: Sequence[str], full: bool = False,
             cancelled: Optional[Callable[[], bool]] = None) -> Generator[int, None, ImageCheck]:
    """Every file of ``paths`` checked (``image_problem``), in order, yielding how many are done after each;
    ``cancelled`` is asked before each (then an ImageCheck with cancelled=True and the files checked so far)."""
    bad: list[BadImage] = []
    for done, path in enumerate(paths):
        if cancelled is not None and cancelled():
            return ImageCheck(done, len(paths), tuple(bad), cancelled=True)
        problem = image_problem(path, full)
        if problem is not None:
            bad.append(BadImage(path, problem))
        yield done + 1
    return ImageCheck(len(paths), len(paths), tuple(bad))


def check_images(paths: Sequence[str], full: bool = False, progress: Optional[Progress] = None,
                 cancelled: Optional[Callable[[], bool]] = None) -> ImageCheck:
    """``checking`` to its end; ``progress`` is told after each file."""
    steps = checking(paths, full, cancelled)
    while True:
        try:
            done = next(steps)
        except StopIteration as end:
            return end.value
        if progress is not None:
            progress(done, len(paths))


def run_folder(config: RunConfig) -> Optional[FolderLayout]:
    """The image folder a run of ``config`` would read, scanned; None where it reads none, or the folder cannot be
    scanned (the run refuses it in its own words)."""
    if config.dataset != "folder" or not config.data_path:
        return None
    try:
        return scan_folder(Path(config.data_path).expanduser().resolve(), config.seed)
    except (FolderLayoutError, OSError, ValueError, RuntimeError):
        return None


def run_images(config: RunConfig) -> Optional[tuple[str, ...]]:
    """The files a run of ``config`` would read; None as for ``run_folder``."""
    folder = run_folder(config)
    return None if folder is None else folder_images(folder)


def folder_images(folder: FolderLayout) -> tuple[str, ...]:
    """Both splits' files: a bad test image fails the run at its first evaluation."""
    return folder.train.paths + folder.test.paths


def check_run_images(config: RunConfig, full: bool = False, progress: Optional[Progress] = None,
                     cancelled: Optional[Callable[[], bool]] = None) -> Optional[ImageCheck]:
    """The images a run of ``config`` would read, checked (None: ``run_images``)."""
    paths = run_images(config)
    return None if paths is None else check_images(paths, full, progress, cancelled)


def without_unreadable(folder: FolderLayout, bad: Sequence[BadImage]) -> FolderLayout:
    """skip_bad_images: ``folder`` without ``bad``'s files, counted and named in its notes. A class left with no
    training image is no class, as the scan counts a class folder without images (its test images go too, the rest
    relabelled); FolderLayoutError, in the scan's words, when fewer than two classes are left."""
    if not bad:
        return folder
    unreadable = {item.path for item in bad}

    def kept(split: FolderSplit) -> list[tuple[str, int]]:
        return [(path, label) for path, label in zip(split.paths, split.labels) if path not in unreadable]

    train, test = kept(folder.train), kept(folder.test)
    if not train:
        raise FolderLayoutError(f"{folder.root}: no training image can be read ({len(bad):,} skipped as unreadable)")
    trained = sorted({label for _, label in train})
    if len(trained) < 2:
        raise FolderLayoutError(
            f"{folder.root} has {len(trained)} class folder with readable training images once {len(bad):,} "
            "unreadable were skipped: a classifier needs at least two (one sub-folder of images per class)")
    relabelled = {old: new for new, old in enumerate(trained)}
    notes = [bad_images_note(bad)]
    emptied = [name for label, name in enumerate(folder.class_names) if label not in relabelled]
    if emptied:
        many = len(emptied) > 1
        notes.append(f"{', '.join(emptied)} ha{'ve' if many else 's'} no readable training images: not counted as "
                     f"{'classes' if many else 'a class'} (skip_bad_images)")

    def split(pairs: list[tuple[str, int]]) -> FolderSplit:
        pairs = [(path, relabelled[label]) for path, label in pairs if label in relabelled]
        return FolderSplit(tuple(path for path, _ in pairs), tuple(label for _, label in pairs))

    return replace(folder, class_names=tuple(folder.class_names[old] for old in trained), train=split(train),
                   test=split(test), notes=folder.notes + tuple(notes), skipped_bad_images=len(bad))


def bad_images_note(bad: Sequence[BadImage]) -> str:
    """The run's note on the files it skipped (skip_bad_images), the first few named."""
    shown = "; ".join(printable(str(item)) for item in bad[:SHOWN_IN_ONE_LINE])
    more = f"; and {len(bad) - SHOWN_IN_ONE_LINE:,} more" if len(bad) > SHOWN_IN_ONE_LINE else ""
    return f"skipped {len(bad):,} unreadable image{'s' if len(bad) != 1 else ''} (skip_bad_images): {shown}{more}"
