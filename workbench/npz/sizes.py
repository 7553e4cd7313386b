"""Whether an .npz's sizes can be believed, and whether it fits this machine: from the zip's central
directory and the .npy headers, before a byte of the arrays is read (cheap enough for the form).

The rules, each refused with the numbers:
1. A member's decompressed size (ZipInfo.file_size, which zipfile never reads past) must be its .npy
   header plus shape × item size, as numpy.savez writes it. A header that claims more (10¹² images in a
   few kilobytes) would make numpy allocate what it claims before reading: it lies.
2. A member that decompresses to more than BOMB_RATIO times its size in the file, and past
   BOMB_FLOOR_BYTES, is a decompression bomb: photographs compress a few times at most (CIFAR about
   1.2:1, mostly-black digits under 10:1), so a hundredfold holds nearly constant bytes, not images.
3. The arrays once decoded must fit MEMORY_SHARE of this machine's RAM: a run holds its images twice
   while it loads them (as stored, then channel-first), and the rest of the machine needs room too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

from workbench.formatting import format_bytes

BOMB_RATIO = 100
BOMB_FLOOR_BYTES = 64 * 2**20
MEMORY_SHARE = 0.4


def physical_memory_bytes() -> Optional[int]:
    """This machine's RAM; None where the platform does not say (then rule 3 is not applied)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def size_problems(shown: Path, headers: Mapping, names: tuple[str, ...]) -> list[str]:
    """Rules 1-3 for the arrays ``names`` of an archive's ``headers`` (ArrayHeader by name); [] when they hold."""
    problems = []
    for name in names:
        header = headers[name]
        claimed = header.header_bytes + header.data_bytes
        if header.stored_bytes != claimed:
            problems.append(
                f"npz file {shown}: {name}'s header claims {header.describe()}, {format_bytes(header.data_bytes)}, "
                f"but the archive holds {format_bytes(max(0, header.stored_bytes - header.header_bytes))} of it: "
                "the header does not match its data (a damaged or crafted file)"
            )
        elif (header.stored_bytes > BOMB_FLOOR_BYTES
              and header.stored_bytes > BOMB_RATIO * max(1, header.compressed_bytes)):
            problems.append(
                f"npz file {shown}: {name} decompresses to {format_bytes(header.stored_bytes)} from "
                f"{format_bytes(header.compressed_bytes)} in the file ({header.stored_bytes // max(1, header.compressed_bytes):,}:1); "
                f"images never compress {BOMB_RATIO}:1, so this is a decompression bomb or blank images"
            )
    if problems:
        return problems
    decoded = sum(headers[name].data_bytes for name in names)
    memory = physical_memory_bytes()
    if memory is not None and decoded > MEMORY_SHARE * memory:
        problems.append(
            f"npz file {shown} decodes to {format_bytes(decoded)}; this machine has {format_bytes(memory)} of RAM "
            f"and a run holds the images twice while loading them: at most {MEMORY_SHARE:.0%} of RAM "
            f"({format_bytes(MEMORY_SHARE * memory)}) fits. Use a smaller file (make-npz --max-train N)"
        )
    return problems
