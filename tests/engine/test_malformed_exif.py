"""A JPEG with a malformed EXIF block passed the check before a run, then failed the run mid-epoch without naming
the file, and make-npz crashed on it: the broken metadata is ignored and the image used as stored. Any other error
of Pillow's while decoding still fails the run naming the file."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from own_images import make_folder, malformed_exif
from PIL import Image

from workbench.engine import folder_data
from workbench.engine.data import DataError
from workbench.engine.folder_data import decode
from workbench.image_pixels import upright_rgb
from workbench.npz.make import make_image_set


def test_an_image_with_a_malformed_exif_block_is_used_unrotated(tmp_path):
    path = tmp_path / "exifbad.jpg"
    malformed_exif(path)
    with Image.open(path) as image:
        assert upright_rgb(image).size == (40, 36)  # as stored: the orientation could not be applied
    assert tuple(decode(str(path)).shape) == (3, 36, 40)


def test_make_npz_reads_a_folder_holding_one(tmp_path):
    root = make_folder(tmp_path / "pets", per_class=4)
    malformed_exif(root / "cat" / "exifbad.jpg")
    image_set = make_image_set(root)
    assert len(image_set.train_labels) + len(image_set.test_labels) == 13


def test_any_other_decoding_error_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / "odd.jpg"
    Image.fromarray(np.zeros((8, 8, 3), dtype=np.uint8)).save(path)

    def plug_in_fault(image):
        raise struct.error("unpack requires a buffer of 4 bytes")

    monkeypatch.setattr(folder_data, "upright_rgb", plug_in_fault)
    with pytest.raises(DataError, match=f"cannot decode {path} as an image \\(unpack requires a buffer of 4 bytes\\)"):
        decode(str(path))
