"""An image folder's layout, without torch: its classes, its splits and its files, read from directory entries
only (nothing opened or decoded).

The layout is torchvision's ImageFolder: one sub-folder of images per class, with ``train/`` and ``val/`` (or
``test/``) splits when the folder has them, else a seeded split holding out ``FOLDER_TEST_FRACTION`` of each
class. The engine scans a folder with ``scan_folder`` (engine/folder_data.py decodes its files); the checks that
run before anything starts count its training images with ``training_image_count``, cached per folder by the
modification times of the directories it read.
"""

from __future__ import annotations

import os
import random
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from workbench.regular_file import kind_problem, os_error_words

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")
JPEG_SUFFIXES = (".jpg", ".jpeg")
TEST_FOLDERS = ("val", "test")  # ImageFolder datasets name their held-out split either way
FOLDER_TEST_FRACTION = 0.2  # held out for test where the folder has no val/ or test/ split

# (directory, st_mtime_ns) of every directory whose entries a scan read: adding, removing or renaming an entry
# changes its directory's time, so a scan is current while these are.
DirectoryTimes = tuple[tuple[str, int], ...]


class FolderLayoutError(ValueError):
    """The path is no image folder; the message says why, in words."""


@dataclass(frozen=True)
class FolderSplit:
    paths: tuple[str, ...]
    labels: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class FolderLayout:
    """An image folder, scanned: its classes and each split's files (not decoded yet). Not torchvision's
    ImageFolder (a dataset that decodes): only what the folder holds."""

    name: str
    root: str
    class_names: tuple[str, ...]
    train: FolderSplit
    test: FolderSplit
    split_note: str  # how the test split was made, said once when the run starts
    notes: tuple[str, ...] = ()  # what else the run should say about its data at the start (as ImageArrays')
    directory_times: DirectoryTimes = ()
    skipped_bad_images: int = 0  # files left out as unreadable (skip_bad_images; image_check.py)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def train_size(self) -> int:
        return len(self.train)

    @property
    def test_size(self) -> int:
        return len(self.test)

    def non_jpeg_count(self) -> int:
        return sum(not path.lower().endswith(JPEG_SUFFIXES) for split in (self.train, self.test)
                   for path in split.paths)


def held_out(count: int) -> int:
    """Test images of a class of ``count`` where the folder has no split: a fifth, at least one where it has two."""
    return max(1, round(count * FOLDER_TEST_FRACTION)) if count > 1 else 0


class _Reader:
    """Reads directory entries, noting each directory's modification time (DirectoryTimes) and the image-named
    entries that are no regular file (skipped)."""

    def __init__(self) -> None:
        self.times: dict[str, int] = {}
        self.not_files: list[str] = []  # "pipe.jpg is a FIFO (named pipe)": opened, it would block its reader
        self.folder_links: list[str] = []  # links to folders, not followed (a loop would make the scan endless)

    def note_time(self, directory: str) -> None:
        try:
            self.times[directory] = os.stat(directory).st_mtime_ns
        except OSError as error:
            raise FolderLayoutError(f"{directory} {os_error_words(error)}") from None

    def entries(self, directory: str) -> list[os.DirEntry]:
        self.note_time(directory)
        try:
            with os.scandir(directory) as found:
                return sorted(found, key=lambda entry: entry.name)
        except OSError as error:  # a class folder without read permission, one removed mid-scan
            raise FolderLayoutError(f"{directory} {os_error_words(error)}") from None

    def subfolders(self, root: str) -> list[str]:
        """Sub-folders (not links to folders, which are noted; not hidden '.x' ones), sorted."""
        found = []
        for entry in self.entries(root):
            if entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                found.append(entry.path)
            else:
                self._note_folder_link(entry)
        return found

    def _note_folder_link(self, entry: os.DirEntry) -> None:
        try:
            if entry.is_symlink() and entry.is_dir():
                self.folder_links.append(entry.path)
        except OSError:  # a link loop, or one the user may not follow: no folder to read either way
            pass

    def images_in(self, folder: str) -> Iterator[str]:
        """Image files under ``folder``, sorted, sub-folders included (each folder's files, then its sub-folders
        in order). Links to folders are not followed: a link loop cannot make the scan endless. A stack, not
        recursion: a folder 1,200 levels deep is read like any other. Only regular files (links to them
        included) are images: a FIFO named pipe.jpg, or a link to /dev/zero, is skipped and noted."""
        pending = [folder]
        while pending:
            folders = []
            for entry in self.entries(pending.pop()):
                if entry.name.startswith("."):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                    continue
                self._note_folder_link(entry)
                if entry.name.lower().endswith(IMAGE_SUFFIXES):
                    problem = self._not_a_file(entry)
                    if problem is None:
                        yield entry.path
                    else:
                        self.not_files.append(f"{entry.path} {problem}")
            pending.extend(reversed(folders))

    @staticmethod
    def _not_a_file(entry: os.DirEntry) -> Optional[str]:
        """Why an image-named entry is no regular file (os.stat: never opened); None for one."""
        try:
            if entry.is_file():  # the directory entry's type: no stat unless it is a link
                return None
            return kind_problem(entry.stat().st_mode)
        except OSError as error:  # a dangling link, a link loop
            return os_error_words(error)

    def skipped_notes(self) -> tuple[str, ...]:
        """What the reads passed over, said: image names that are no regular file, links to folders."""
        notes = []
        if self.not_files:
            one = len(self.not_files) == 1
            notes.append(f"skipped {len(self.not_files):,} image name{'' if one else 's'} that "
                         f"{'is' if one else 'are'} no regular file: {_first_few(self.not_files)}")
        if self.folder_links:
            one = len(self.folder_links) == 1
            notes.append(f"skipped {len(self.folder_links):,} link{'' if one else 's'} to a folder (links are not "
                         "followed, so that a loop cannot make the scan endless; copy or move the folder in to use "
                         f"it): {_first_few(self.folder_links)}")
        return tuple(notes)

    def frozen_times(self) -> DirectoryTimes:
        return tuple(sorted(self.times.items()))


def image_files(folder: Path | str) -> tuple[list[str], tuple[str, ...]]:
    """The image files under ``folder`` as a run reads a class folder (hidden '.x' entries and links to folders
    skipped, sub-folders included), and notes on what was skipped; FolderLayoutError where a folder in it cannot
    be read: make-npz reads a class's files so, or it would read a folder otherwise than the run it feeds."""
    reader = _Reader()
    paths = list(reader.images_in(str(folder)))
    return paths, reader.skipped_notes()


def split_roots(root: Path) -> tuple[Optional[Path], Optional[Path]]:
    """(train/, val/ or test/) when the folder has both, else (None, None): each class's images then split."""
    train = root / "train"
    test = next((root / name for name in TEST_FOLDERS if (root / name).is_dir()), None)
    return (train, test) if train.is_dir() and test is not None else (None, None)


def scan_folder(root: Path, seed: int) -> FolderLayout:
    """The classes and files of ``root`` (nothing decoded); FolderLayoutError when it is no image folder."""
    if not root.is_dir():
        raise FolderLayoutError(f"data_path {root} is not a folder (dataset=folder needs a folder with one "
                                "sub-folder of images per class)")
    reader = _Reader()
    reader.note_time(str(root))  # a split folder added or removed changes how the folder is read
    train_root, test_root = split_roots(root)
    extra_notes: list[str] = []
    if train_root is not None and test_root is not None:
        by_class = _images_by_class(reader, train_root)
        classes = tuple(by_class)
        train = _labelled(by_class, classes)
        test_by_class = _images_by_class(reader, test_root)
        test = _labelled(test_by_class, classes)
        note = f"the {test_root.name}/ folder is the test split"
        test_only = [name for name in test_by_class if name not in by_class]
        if test_only:
            count = sum(len(test_by_class[name]) for name in test_only)
            extra_notes.append(f"{test_root.name}/ holds {len(test_only)} class{'es' if len(test_only) > 1 else ''} "
                               f"train/ lacks ({', '.join(test_only)}): {count:,} image{'s' if count != 1 else ''} "
                               "left out (a class is learned from train/)")
    else:
        by_class = _images_by_class(reader, root)
        classes = tuple(by_class)
        train, test = _split(by_class, seed)
        note = f"{FOLDER_TEST_FRACTION:.0%} of each class held out for test (seed {seed}): the folder has no val/"
    if len(classes) < 2:
        raise FolderLayoutError(f"{root} has {len(classes)} class folder{'s' if len(classes) != 1 else ''} with "
                                "images: a classifier needs at least two (one sub-folder of images per class)")
    if not len(train):
        raise FolderLayoutError(f"{root}: no training images ({', '.join(IMAGE_SUFFIXES)})")
    return FolderLayout(root.name, str(root), classes, train, test, note,
                        notes=reader.skipped_notes() + tuple(extra_notes),
                        directory_times=reader.frozen_times())


def _first_few(items: Sequence[str]) -> str:
    return "; ".join(items[:3]) + (f"; and {len(items) - 3:,} more" if len(items) > 3 else "")


def _images_by_class(reader: _Reader, root: Path) -> dict[str, list[str]]:
    """Each sub-folder that holds at least one image (a class), sorted by name, with its images."""
    found = {}
    for folder in reader.subfolders(str(root)):
        images = list(reader.images_in(folder))
        if images:
            found[os.path.basename(folder)] = images
    return found


def _labelled(by_class: dict[str, list[str]], classes: Sequence[str]) -> FolderSplit:
    """The images of ``classes`` (a split's folders may lack a class, or have one the training split lacks)."""
    pairs = [(path, label) for label, name in enumerate(classes) for path in by_class.get(name, ())]
    return FolderSplit(tuple(path for path, _ in pairs), tuple(label for _, label in pairs))


def _split(by_class: dict[str, list[str]], seed: int) -> tuple[FolderSplit, FolderSplit]:
    """Each class's images shuffled by ``seed``; ``held_out`` of them for test."""
    generator = random.Random(seed)
    train: list[tuple[str, int]] = []
    test: list[tuple[str, int]] = []
    for label, paths in enumerate(by_class.values()):
        paths = list(paths)
        generator.shuffle(paths)
        held = held_out(len(paths))
        test += [(path, label) for path in paths[:held]]
        train += [(path, label) for path in paths[held:]]
    return (FolderSplit(tuple(p for p, _ in train), tuple(label for _, label in train)),
            FolderSplit(tuple(p for p, _ in test), tuple(label for _, label in test)))


def is_current(times: DirectoryTimes) -> bool:
    """Whether no directory a scan read has changed since (one os.stat each; nothing listed)."""
    try:
        return all(os.stat(directory).st_mtime_ns == mtime for directory, mtime in times)
    except OSError:
        return False


_counts: dict[str, tuple[DirectoryTimes, int]] = {}
_counts_lock = threading.Lock()


def training_image_count(root: Path | str) -> Optional[int]:
    """How many training images a run on this folder would have (as ``scan_folder`` splits it); None where it
    is no readable folder. Directory entries only (os.scandir; no file opened), cached per folder until one
    of the directories it read changes. It lists every class folder: call it off the GUI thread (a folder of a
    million images, or one on a network drive, takes seconds)."""
    try:
        path = Path(root).expanduser().resolve()
        key = str(path)
        with _counts_lock:
            cached = _counts.get(key)
        if cached is not None and is_current(cached[0]):
            return cached[1]
        if not path.is_dir():
            return None
        reader = _Reader()
        reader.note_time(key)  # a split folder added or removed changes how the folder is read
        train_root, _ = split_roots(path)
        if train_root is not None:
            count = sum(len(images) for images in _images_by_class(reader, train_root).values())
        else:
            count = sum(len(images) - held_out(len(images)) for images in _images_by_class(reader, path).values())
    except (OSError, ValueError, RuntimeError):  # unreadable, a NUL in the path, a symlink loop in resolve()
        return None
    with _counts_lock:
        _counts[key] = (reader.frozen_times(), count)
    return count
