"""Write a workbench .npz dataset from the CIFAR-10/100 python tarball or from a folder of images.

The file holds train_images / test_images (uint8, N×32×32×3), train_labels / test_labels (int64)
and class_names, the layout `--dataset npz` trains on. No torch: numpy, the standard library,
and Pillow (a torchvision dependency) for image files.
"""

from __future__ import annotations

import contextlib
import os
import tarfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from workbench.folder_layout import IMAGE_SUFFIXES, FolderLayoutError, image_files, split_roots
from workbench.image_pixels import error_words, upright_rgb
from workbench.npz.cifar_pickle import RefusedPickle, load_cifar_batch
from workbench.regular_file import InvalidPath, NotARegularFile, expanded, folder_problem, read_regular_file
from workbench.replaced_file import keep_permissions, replaced_file, temporary_beside

# The largest real batch is CIFAR-100's train (about 155 MB); a member far past it is not a CIFAR batch.
BATCH_MAX_BYTES = 512 * 2**20
SIDE = 32


class MakeNpzError(ValueError):
    """The source cannot become a dataset; the message says why and what to do."""


class RefusedBatch(MakeNpzError):
    """A CIFAR batch asked to run code (a crafted pickle); nothing it named was called."""


@dataclass(frozen=True)
class ImageSet:
    train_images: np.ndarray  # uint8 (N, 32, 32, 3)
    train_labels: np.ndarray  # int64 (N,)
    test_images: np.ndarray
    test_labels: np.ndarray
    class_names: tuple[str, ...]
    source: str  # "CIFAR-10 tarball", "image folder (train/ and val/)", ...
    notes: tuple[str, ...] = ()  # what the source held that is not in the file (a hidden or empty folder)

    def limited(self, max_train: Optional[int], max_test: Optional[int]) -> ImageSet:
        """The first ``max_train`` / ``max_test`` images of each split (CIFAR's batches are already shuffled)."""
        return ImageSet(
            self.train_images[:max_train], self.train_labels[:max_train],
            self.test_images[:max_test], self.test_labels[:max_test], self.class_names, self.source, self.notes,
        )

    def save(self, out: Path | str) -> Path:
        """Write the .npz atomically (a temporary file renamed over the target)."""
        try:
            out = expanded(out)
        except InvalidPath as error:
            raise MakeNpzError(f"cannot write {out}: it {error}") from None
        if out.suffix != ".npz":
            out = out.with_name(out.name + ".npz")  # np.savez would add it anyway; say the real name
        written = replaced_file(out)  # a symlink's target: the link stays
        temporary = temporary_beside(written, f"{os.getpid()}.tmp.npz")
        try:
            np.savez(
                temporary,
                train_images=self.train_images, train_labels=self.train_labels,
                test_images=self.test_images, test_labels=self.test_labels,
                class_names=np.array(self.class_names, dtype=str),
            )
            keep_permissions(written, temporary)
            os.replace(temporary, written)
        except OSError as error:
            with contextlib.suppress(OSError):  # a read-only file system refuses this too: the first error says why
                temporary.unlink(missing_ok=True)
            raise MakeNpzError(f"cannot write {out}: {(error.strerror or str(error)).lower()}") from None
        return out


def make_image_set(source: Path | str, test_fraction: float = 0.2, seed: int = 0) -> ImageSet:
    """Read ``source``: a CIFAR-10/100 python tarball, an extracted CIFAR folder, or an image folder."""
    try:
        source = expanded(source)
    except InvalidPath as error:
        raise MakeNpzError(f"{source} {error}") from None
    if source.is_file():
        if tarfile.is_tarfile(source):
            return _from_cifar_tarball(source)
        raise MakeNpzError(
            f"{source} is not a tar archive: give cifar-10-python.tar.gz (or cifar-100-python.tar.gz) "
            "or a folder of images"
        )
    problem = folder_problem(source)
    if problem is not None:  # a FIFO, a link loop or /dev/zero is no missing file: said as what it is
        raise MakeNpzError(f"{source} {problem}")
    for folder in (source, source / "cifar-10-batches-py", source / "cifar-100-python"):
        if (folder / "test_batch").is_file() or (folder / "test").is_file():
            return _from_cifar_folder(folder)
    return _from_image_folder(source, test_fraction, seed)


# -- CIFAR's python format: pickled dicts of (N, 3072) uint8 rows, channel-major ----------------------

_CIFAR_LAYOUTS = {
    # tarball top folder: (train members, test member, meta member, label key, names key)
    "cifar-10-batches-py": ([f"data_batch_{i}" for i in range(1, 6)], "test_batch", "batches.meta",
                            "labels", "label_names"),
    "cifar-100-python": (["train"], "test", "meta", "fine_labels", "fine_label_names"),
}


def _from_cifar_tarball(path: Path) -> ImageSet:
    try:
        with tarfile.open(path) as tar:
            members = {member.name: member for member in tar.getmembers() if member.isfile()}
            for top, layout in _CIFAR_LAYOUTS.items():
                if f"{top}/{layout[1]}" in members:
                    def read(name: str, tar=tar, top=top) -> dict:
                        member = members[f"{top}/{name}"]
                        if member.size > BATCH_MAX_BYTES:
                            raise MakeNpzError(f"{path}:{top}/{name} is {member.size:,} bytes: larger than any "
                                               f"CIFAR batch ({BATCH_MAX_BYTES:,} at most)")
                        handle = tar.extractfile(member)
                        assert handle is not None
                        return _unpickle(handle.read(), f"{path}:{top}/{name}")

                    return _cifar_set(read, layout, f"{'CIFAR-10' if '10' in top else 'CIFAR-100'} tarball")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise MakeNpzError(f"cannot read {path}: {error}") from None
    raise MakeNpzError(
        f"{path} holds neither cifar-10-batches-py/ nor cifar-100-python/: it is not a CIFAR python tarball"
    )


def _from_cifar_folder(folder: Path) -> ImageSet:
    top = "cifar-100-python" if (folder / "test").is_file() else "cifar-10-batches-py"

    def read(name: str) -> dict:
        try:  # a FIFO named data_batch_1 would block a plain read
            return _unpickle(read_regular_file(folder / name, BATCH_MAX_BYTES), str(folder / name))
        except NotARegularFile as error:
            raise MakeNpzError(f"cannot read {error}") from None

    return _cifar_set(read, _CIFAR_LAYOUTS[top], f"extracted {'CIFAR-10' if '10' in top else 'CIFAR-100'} folder")


def _cifar_set(read: Callable[[str], dict], layout: tuple, source: str) -> ImageSet:
    train_names, test_name, meta_name, label_key, names_key = layout
    train = [read(name) for name in train_names]
    test = read(test_name)
    try:
        class_names = tuple(name.decode("latin1") if isinstance(name, bytes) else str(name)
                            for name in read(meta_name)[names_key])
    except RefusedBatch:
        raise
    except (MakeNpzError, KeyError, TypeError):  # no usable meta: the classes are numbered
        class_names = ()
    try:
        train_images = np.concatenate([_cifar_images(batch) for batch in train])
        train_labels = np.concatenate([np.asarray(batch[label_key], dtype=np.int64) for batch in train])
        test_images, test_labels = _cifar_images(test), np.asarray(test[label_key], dtype=np.int64)
    except (KeyError, ValueError, TypeError) as error:
        raise MakeNpzError(f"the {source}'s batches are not CIFAR's ({type(error).__name__}: {error})") from None
    if not class_names:
        class_names = tuple(str(index) for index in range(int(train_labels.max()) + 1))
    return ImageSet(train_images, train_labels, test_images, test_labels, class_names, source)


def _unpickle(data: bytes, where: str) -> dict:
    # Never pickle.loads: a crafted batch would run its code. The restricted unpickler admits numpy's array
    # rebuilders alone; latin1 turns Python 2's byte-string keys into str (as torchvision does).
    try:
        batch = load_cifar_batch(data)
    except RefusedPickle as error:
        raise RefusedBatch(f"{where} is not a CIFAR batch: {error}") from None
    except Exception as error:  # a damaged pickle can raise almost anything
        raise MakeNpzError(f"{where} is not a CIFAR batch ({type(error).__name__}: {error})") from None
    if not isinstance(batch, dict):
        raise MakeNpzError(f"{where} is not a CIFAR batch (a {type(batch).__name__}, not a dict)")
    return {key.decode("latin1") if isinstance(key, bytes) else key: value for key, value in batch.items()}


def _cifar_images(batch: dict) -> np.ndarray:
    data = np.asarray(batch["data"], dtype=np.uint8)
    return np.ascontiguousarray(data.reshape(-1, 3, SIDE, SIDE).transpose(0, 2, 3, 1))


# -- a folder of images, one sub-folder per class ---------------------------------------------------


def _from_image_folder(root: Path, test_fraction: float, seed: int) -> ImageSet:
    """root/train/<class>/* and root/val/<class>/* (or test/), or root/<class>/* split by ``test_fraction``.

    What a folder holds that is not a class is said, not dropped in silence: folders named ".x" are
    skipped (.git, .ipynb_checkpoints) and class folders without images are not classes, each with a
    note, and the file is still made; fewer than two classes left, or a class name that cannot be shown
    on one line (a newline), is refused.
    """
    notes: list[str] = []
    train_root, test_root = split_roots(root)  # as a run reads the folder: train/ with val/ or test/
    if train_root is not None and test_root is not None:
        train = _read_classes(train_root, _class_folders(train_root, notes), notes)
        classes = _classes_with_images(train_root, train, notes)
        left_out = sorted(set(_class_folders(test_root, [])) - set(classes))
        if left_out:
            notes.append(f"{test_root}: {', '.join(left_out)} ha{'ve' if len(left_out) > 1 else 's'} no "
                         "training images: left out of the test set")
        test = _read_classes(test_root, classes, notes)
        # each split shuffled (seeded): in class order, --max-train 10 kept ten images of the first class
        generator = np.random.default_rng(seed)
        train_images, train_labels = _shuffled(generator, *_stack(train_root, train, classes))
        test_images, test_labels = _shuffled(generator, *_stack(test_root, test, classes))
        return ImageSet(train_images, train_labels, test_images, test_labels,
                        tuple(classes), f"image folder (train/ and {test_root.name}/)", tuple(notes))
    if not 0 < test_fraction < 1:
        raise MakeNpzError(f"test fraction must be between 0 and 1 (got {test_fraction:g})")
    per_class = _read_classes(root, _class_folders(root, notes), notes)
    classes = _classes_with_images(root, per_class, notes)
    images, labels = _stack(root, per_class, classes)
    order = np.random.default_rng(seed).permutation(len(labels))
    test_count = max(1, round(len(labels) * test_fraction))
    if test_count >= len(labels):
        raise MakeNpzError(f"{root} has {len(labels)} images: too few to split into train and test")
    test, train = order[:test_count], order[test_count:]
    return ImageSet(images[train], labels[train], images[test], labels[test], tuple(classes),
                    f"image folder, {test_fraction:.0%} held out for test", tuple(notes))


def _class_folders(folder: Path, notes: list[str]) -> list[str]:
    names = sorted(entry.name for entry in folder.iterdir() if entry.is_dir())
    hidden = [name for name in names if name.startswith(".")]
    if hidden:
        notes.append(f"{folder}: skipped {', '.join(hidden)} (a folder whose name starts with '.' is not a class)")
    classes = [name for name in names if not name.startswith(".")]
    for name in classes:
        if not name.isprintable():  # a newline or control character would break every one-line message and CSV
            not_utf8 = any("\ud800" <= character <= "\udfff" for character in name)  # os.fsdecode's escapes
            what = ("bytes that are not UTF-8 text" if not_utf8
                    else "a character that cannot be shown on one line (a newline or control character)")
            raise MakeNpzError(f"{folder}: the class folder {name!r} has {what}: rename it")
    if not classes:
        raise MakeNpzError(
            f"{folder} has no class folders: put each class's images in a sub-folder named after it "
            "(cat/, dog/, …), or give cifar-10-python.tar.gz" + "".join(f"; {note}" for note in notes)
        )
    return classes


def _classes_with_images(folder: Path, per_class: dict[str, list[np.ndarray]], notes: list[str]) -> list[str]:
    """The classes that have images; an empty class folder is no class (the model could never learn it)."""
    empty = [name for name, images in per_class.items() if not images]
    if empty:
        notes.append(f"{folder}: {', '.join(empty)} ha{'ve' if len(empty) > 1 else 's'} no images "
                     f"({', '.join(IMAGE_SUFFIXES)}): not counted as {'classes' if len(empty) > 1 else 'a class'}")
    classes = [name for name, images in per_class.items() if images]
    if len(classes) == 1:
        raise MakeNpzError(f"{folder} has images of one class only ({classes[0]}): a classifier needs two or "
                           "more" + "".join(f"; {note}" for note in notes))
    return classes


def _read_classes(folder: Path, classes: Sequence[str], notes: list[str]) -> dict[str, list[np.ndarray]]:
    """Each class's images, scaled to 32×32 ([] for a class with none here: a class with no test images is
    allowed), its files found as a run finds them (folder_layout.image_files: a macOS "._x.jpg" or a
    .ipynb_checkpoints copy is skipped, a folder that cannot be read is refused)."""
    from PIL import Image  # Pillow comes with torchvision

    per_class: dict[str, list[np.ndarray]] = {}
    for name in classes:
        images = per_class.setdefault(name, [])
        class_folder = folder / name
        if not class_folder.is_dir():
            continue
        try:
            paths, skipped = image_files(class_folder)
        except FolderLayoutError as error:
            raise MakeNpzError(str(error)) from None
        notes.extend(skipped)
        for path in map(Path, paths):
            try:
                with warnings.catch_warnings():
                    # Pillow warns past MAX_IMAGE_PIXELS (89 M) and raises past twice that: refuse both, naming the file.
                    warnings.simplefilter("error", Image.DecompressionBombWarning)
                    with Image.open(path) as image:
                        images.append(_to_32x32(image))
            except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
                raise MakeNpzError(f"{path} is too large to decode safely ({error}): scale it down, or leave it "
                                   "out") from None
            except Exception as error:  # OSError, and a damaged PNG's ValueError or SyntaxError: any plug-in's
                raise MakeNpzError(f"cannot read {path} as an image ({error_words(error)})") from None
    return per_class


def _stack(folder: Path, per_class: dict[str, list[np.ndarray]], classes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    labels = [label for label, name in enumerate(classes) for _ in per_class[name]]
    if not labels:
        raise MakeNpzError(f"{folder} has no images ({', '.join(IMAGE_SUFFIXES)}) in its class folders")
    return (np.stack([image for name in classes for image in per_class[name]]),
            np.asarray(labels, dtype=np.int64))


def _shuffled(generator: np.random.Generator, images: np.ndarray, labels: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    order = generator.permutation(len(labels))
    return images[order], labels[order]


def _to_32x32(image) -> np.ndarray:
    """RGB (upright, 16-bit grey scaled to 8 bits), the centre square, scaled to 32×32: the shape every workbench
    model takes."""
    from PIL import Image

    image = upright_rgb(image)
    width, height = image.size
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    image = image.crop((left, top, left + side, top + side))
    if side != SIDE:
        image = image.resize((SIDE, SIDE), Image.Resampling.BILINEAR, reducing_gap=3.0)
    return np.asarray(image, dtype=np.uint8)

