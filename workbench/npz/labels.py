"""An .npz's labels against its classes: what only the label values can tell, checked before a run starts.

The label arrays are small (8 bytes an image at most), so the CLI reads them before it records a run,
and the engine checks the same arrays once it has loaded them (a run the window starts, on the
training thread). Never on the GUI thread: reading values is not a header check.

The classes:
- with class_names in the file (make-npz writes it), there are len(class_names) classes and every
  label must lie in [0, len(class_names));
- without it, the classes are 0 … the largest label. A stray label would silently add output classes
  (label 200 in a 10-class set makes 201), so a file whose classes without a training image outnumber
  those with one is refused, as is one past MAX_CLASSES (a model's last layer of 10¹² outputs).
- One class is trained (the speed figures hold whatever the labels) with a warning: accuracy is then
  100 % whatever the model learns, which a user must not mistake for a result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from workbench.npz.header import CLASS_NAMES_KEY, DAMAGED_ARCHIVE_ERRORS

MAX_CLASSES = 100_000  # ImageNet-21k has about 21,800; a last layer this wide is already 50 M weights at 512 features


@dataclass(frozen=True)
class LabelCheck:
    num_classes: int
    problems: list[str] = field(default_factory=list)  # refused: the run does not start
    notes: list[str] = field(default_factory=list)  # said at the start; the run goes on


def check_labels(shown: Path | str, train_labels: np.ndarray, test_labels: np.ndarray,
                 class_names: Optional[np.ndarray]) -> LabelCheck:
    """The classes these labels make (see the module's rules), and what is wrong with them."""
    splits = {"train_labels": train_labels, "test_labels": test_labels}
    for name, labels in splits.items():
        if labels.size and int(labels.min()) < 0:
            return LabelCheck(0, [f"npz file {shown}: {name} has negative labels"])
    largest = max(int(labels.max()) for labels in splits.values() if labels.size)
    present = np.unique(train_labels)
    if class_names is not None:
        count = len(class_names)
        if count > MAX_CLASSES:  # a model's output this wide takes the machine's memory (5 M names: 24 GB)
            return LabelCheck(0, [
                f"npz file {shown}: its class_names names {count:,} classes; more than {MAX_CLASSES:,} cannot be a "
                "model's output"])
        for name, labels in splits.items():
            if labels.size and int(labels.max()) >= count:
                return LabelCheck(0, [
                    f"npz file {shown}: {name} has labels up to {int(labels.max()):,}, but its class_names names "
                    f"{count:,} class{'es' if count != 1 else ''}: labels must be 0 to {count - 1:,}"])
    else:
        count = largest + 1
        if count > MAX_CLASSES:
            return LabelCheck(0, [
                f"npz file {shown}: its largest label is {largest:,}; without class_names the classes are 0 to "
                f"the largest label, and more than {MAX_CLASSES:,} cannot be a model's output. Fix the labels, "
                "or store class_names in the file"])
        empty = count - len(present)
        if empty > len(present):
            return LabelCheck(0, [
                f"npz file {shown}: its largest label is {largest:,}, so without class_names the model would get "
                f"{count:,} classes, {empty:,} of them without a training image: a stray label? "
                f"Fix the labels, or store class_names in the file to say how many classes there are"])
    notes = []
    if len(present) == 1:
        notes.append(
            f"{Path(shown).name}: every training image has the same label ({int(present[0])}): test accuracy "
            "will be near 100 % whatever the model learns; the speed figures still hold")
    return LabelCheck(count, [], notes)


def read_label_check(path: Path | str) -> LabelCheck:
    """check_labels on the file's label arrays (and class_names), read without its images."""
    shown = Path(path).expanduser()
    try:
        with np.load(shown, allow_pickle=False) as archive:
            train, test = archive["train_labels"], archive["test_labels"]
            names = archive[CLASS_NAMES_KEY] if CLASS_NAMES_KEY in archive.files else None
    except (KeyError, *DAMAGED_ARCHIVE_ERRORS) as error:
        return LabelCheck(0, [f"{shown} is not a valid npz archive ({error})"])
    return check_labels(shown, train, test, names)
