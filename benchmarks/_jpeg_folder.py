"""A folder of JPEGs for the loader benchmarks, made here: one sub-folder per class, photo-like content (smooth
gradients, soft shapes, a little sensor noise) at a few camera-ish sizes, saved at quality 90.

Random noise would be the wrong test: it compresses badly, so its files are several times larger than a photo's
and its decode time is dominated by entropy decoding. Gradients and shapes give files of the size and decode cost
of ordinary photos (tens of KB at these sizes).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# (width, height): around ImageNet's typical 400×350, some larger, some smaller than a 224 crop's source.
SIZES = ((500, 375), (375, 500), (400, 300), (320, 240), (256, 256), (640, 480))
QUALITY = 90


def photo_like(generator: np.random.Generator, width: int, height: int, label: int) -> Image.Image:
    """A gradient background in a class's hue, a few blurred shapes, mild noise."""
    hue = np.array([(label * 37) % 256, (label * 91 + 60) % 256, (label * 53 + 120) % 256], dtype=np.float32)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    angle = generator.uniform(0, np.pi)
    ramp = (np.cos(angle) * x / width + np.sin(angle) * y / height)[..., None]
    pixels = hue * (0.5 + 0.5 * ramp) + generator.uniform(-30, 30, 3).astype(np.float32)
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(int(generator.integers(3, 8))):
        x0, y0 = int(generator.integers(0, width)), int(generator.integers(0, height))
        size = int(generator.integers(min(width, height) // 10, min(width, height) // 2))
        colour = tuple(int(c) for c in generator.integers(0, 256, 3))
        box = (x0, y0, x0 + size, y0 + int(size * generator.uniform(0.5, 1.5)))
        (draw.ellipse if generator.random() < 0.5 else draw.rectangle)(box, fill=colour)
    image = image.filter(ImageFilter.GaussianBlur(radius=1.5))
    noisy = np.asarray(image).astype(np.int16) + generator.integers(-6, 7, (height, width, 3), dtype=np.int16)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8))


def make_jpeg_folder(root: Path, classes: int, per_class: int, seed: int = 0) -> dict:
    """``root``/class_XX/NNNN.jpg, made once: a folder that already holds this spec is reused as it is."""
    spec = {"classes": classes, "per_class": per_class, "seed": seed, "sizes": SIZES, "quality": QUALITY}
    marker = root / "spec.json"
    if marker.is_file() and json.loads(marker.read_text()) == json.loads(json.dumps(spec)):
        return _facts(root, spec)
    generator = np.random.default_rng(seed)
    for label in range(classes):
        folder = root / f"class_{label:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            width, height = SIZES[(label + index) % len(SIZES)]
            photo_like(generator, width, height, label).save(folder / f"{index:04d}.jpg", quality=QUALITY)
    marker.write_text(json.dumps(spec))
    return _facts(root, spec)


def _facts(root: Path, spec: dict) -> dict:
    files = [path for path in root.glob("class_*/*.jpg")]
    total = sum(path.stat().st_size for path in files)
    return {**spec, "root": str(root), "files": len(files), "mean_file_bytes": total / max(1, len(files))}
