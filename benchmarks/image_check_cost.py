"""What does checking an image folder before a run cost: the header check (the default) against a full decode?

Makes a folder of photo-like JPEGs (benchmarks/_jpeg_folder.photo_like) at 96×96 (the issue's user's photos) and
at 400×300, then times image_check.check_images over every file, header check and full decode, each pass with the
check's own cache dropped (the files themselves stay in the OS page cache: a folder read once before, as a
second run reads it). Writes benchmarks/results/image_check_cost.json.

    python benchmarks/image_check_cost.py [--files 300] [--passes 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import RESULTS, write_results
from _jpeg_folder import QUALITY, photo_like

from workbench.image_check import check_images, forget_checks

SIZES = ((96, 96), (400, 300))


def make_folder(root: Path, files: int, size: tuple[int, int]) -> list[str]:
    generator = np.random.default_rng(0)
    paths = []
    for index in range(files):
        folder = root / f"class_{index % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{index:04d}.jpg"
        photo_like(generator, size[0], size[1], index % 3).save(path, quality=QUALITY)
        paths.append(str(path))
    return paths


def seconds(paths: list[str], full: bool) -> float:
    forget_checks()
    began = time.perf_counter()
    check = check_images(paths, full=full)
    elapsed = time.perf_counter() - began
    assert not check.bad, check.bad[:3]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as temporary:
        for width, height in SIZES:
            paths = make_folder(Path(temporary) / f"{width}x{height}", args.files, (width, height))
            header = [seconds(paths, full=False) for _ in range(args.passes)]
            full = [seconds(paths, full=True) for _ in range(args.passes)]
            row = {"size": f"{width}x{height}", "files": len(paths),
                   "mean_file_bytes": sum(os.path.getsize(path) for path in paths) / len(paths),
                   "header_seconds": header, "full_decode_seconds": full,
                   "header_ms_per_file": statistics.median(header) / len(paths) * 1000,
                   "full_decode_ms_per_file": statistics.median(full) / len(paths) * 1000}
            results.append(row)
            print(f"{row['size']}: {row['files']} files of {row['mean_file_bytes'] / 1024:.1f} KiB: header check "
                  f"{statistics.median(header):.2f} s ({row['header_ms_per_file']:.2f} ms/file), full decode "
                  f"{statistics.median(full):.2f} s ({row['full_decode_ms_per_file']:.2f} ms/file)")
    machine = {"cpu_count": os.cpu_count(), "python": platform.python_version(), "processor": platform.processor(),
               "load_average": os.getloadavg()}
    print(write_results(RESULTS / "image_check_cost.json", {"machine": machine, "results": results}))


if __name__ == "__main__":
    main()
