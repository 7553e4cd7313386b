"""An opened image's pixels as the run and make-npz both take them (Pillow and numpy; no torch).

Upright as its EXIF orientation says (as a photo viewer shows it; torchvision's readers ignore it), and 16-bit
grey (PNG, TIFF: Pillow's "I;16" and "I") scaled to 8 bits: Pillow's own conversion to RGB clips it, so a 16-bit
scan came out almost all white.
"""

from __future__ import annotations

from typing import Any

import numpy as np


# Pillow's UnidentifiedImageError names the file it was given: a stream's repr ("<_io.BufferedReader name=3>").
UNIDENTIFIED_WORDS = "not an image Pillow can read (neither JPEG, PNG, BMP, GIF, WebP nor TIFF)"


def error_words(error: BaseException) -> str:
    """An exception as a reason in one line: its message's first line, or its type's name when it has none
    (Pillow's plug-ins raise OSError, ValueError, SyntaxError, struct.error: some with no message)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def upright_rgb(image: Any) -> Any:
    """The PIL image as 8-bit RGB, turned upright (as stored when its EXIF block is malformed)."""
    from PIL import Image, ImageOps

    try:
        image = ImageOps.exif_transpose(image)
    except OSError:
        raise  # the pixels cannot be read: the caller names the file
    except Exception:  # Pillow's EXIF code raises struct.error, TypeError, ... on a malformed block
        pass  # a camera's broken metadata is no reason to lose the photo: used unrotated
    if image.mode.startswith("I;16") or image.mode == "I":
        wide = np.clip(np.asarray(image).astype(np.int64), 0, 65535)
        return Image.fromarray((wide // 257).astype(np.uint8)).convert("RGB")
    return image.convert("RGB")
