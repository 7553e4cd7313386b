"""`workbench make-npz SOURCE --out FILE`: a dataset file for `--dataset npz` from CIFAR's tarball or an image folder."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from workbench.cli.parsing import UsageError, positive_int
from workbench.regular_file import invalid_path_problem


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "make-npz",
        help="write a dataset .npz from the CIFAR-10/100 tarball or an image folder",
        description="Write an .npz that `workbench run --dataset npz --data-path FILE` trains on: "
        "train_images / test_images (uint8, N×32×32×3), train_labels / test_labels, class_names. "
        "SOURCE is cifar-10-python.tar.gz (or cifar-100-python.tar.gz, or its extracted folder), or a folder "
        "with one sub-folder of images per class (train/ and val/ or test/ inside it keep that split; otherwise "
        "--test-fraction of the images is held out). Images are cropped to their centre square and "
        "scaled to 32×32 pixels, the size the workbench's models take.",
    )
    parser.add_argument("source", metavar="SOURCE", help="CIFAR tarball or folder, or a folder of class folders")
    parser.add_argument("--out", required=True, metavar="FILE.npz",
                        help="the .npz file to write (replaced if it exists; .npz is added to a name without a suffix)")
    parser.add_argument("--test-fraction", type=float, default=0.2, metavar="F",
                        help="share of an image folder held out for test when it has no test/ folder (default: 0.2)")
    parser.add_argument("--max-train", type=positive_int, metavar="N", help="keep only the first N training images")
    parser.add_argument("--max-test", type=positive_int, metavar="N", help="keep only the first N test images")
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test split of an image folder "
                        "(default: 0)")
    # SOURCE is read, its name kept nowhere (not in the .npz, not in the history): bytes that are not UTF-8 are a
    # name like any other here. --out is refused: `run --data-path` could not keep its name.
    parser.set_defaults(handler=make_npz_command, any_bytes=("source",))


def make_npz_command(args: argparse.Namespace) -> int:
    from workbench.formatting import printable
    from workbench.npz.make import MakeNpzError, make_image_set

    out_path = Path(args.out)
    if out_path.suffix and out_path.suffix != ".npz":  # refused, not renamed behind the user's back
        raise UsageError(f"workbench make-npz: --out {args.out} would not be an .npz file: name it "
                         f"{out_path.with_suffix('.npz')} (or {args.out}.npz)")
    invalid = invalid_path_problem(args.out)
    if invalid is not None:  # said before the images are read, not after
        raise UsageError(f"workbench make-npz: --out {args.out} {invalid}")
    try:
        image_set = make_image_set(args.source, args.test_fraction, args.seed).limited(args.max_train, args.max_test)
        out = image_set.save(args.out)
    except MakeNpzError as error:
        raise UsageError(f"workbench make-npz: {error}") from None
    for note in image_set.notes:
        print(printable(f"workbench make-npz: note: {note}"), file=sys.stderr)  # a note names a folder
    names = ", ".join(image_set.class_names[:10]) + (", …" if len(image_set.class_names) > 10 else "")
    scaled = (" Each image was cropped to its centre square and scaled to 32×32 pixels, the size the workbench's "
              "models take." if image_set.source.startswith("image folder") else "")
    # the path is the user's: a newline or an escape sequence in it is written as its escape, on its own line
    print(printable(f"Wrote {out}: {len(image_set.train_labels):,} training and {len(image_set.test_labels):,} test "
                    f"images, {len(image_set.class_names)} classes ({names}) from the {image_set.source}.{scaled}"))
    print(printable(f"Train on it: workbench run --dataset npz --data-path {shlex.quote(str(out))}"))
    return 0

