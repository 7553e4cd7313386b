"""An image folder's unreadable files, refused before a command records anything (issue 30 §2)."""

from __future__ import annotations

import sys
from typing import Iterable

from workbench.cli.parsing import UsageError
from workbench.config import RunConfig
from workbench.folder_layout import FolderLayoutError
from workbench.image_check import check_images, folder_images, run_folder, without_unreadable


def refuse_bad_images(config: RunConfig, prog: str) -> None:
    """An image folder's files checked before the run is recorded: every unreadable one listed at once (exit 2),
    unless --skip-bad-images leaves them out (the run counts them) and enough classes are left to train on."""
    folder = run_folder(config)
    if folder is None:
        return
    check = check_images(folder_images(folder))
    if not check.bad:
        return
    if not config.skip_bad_images:
        raise UsageError(check.report(f"{prog}: "))
    try:
        without_unreadable(folder, check.bad)
    except FolderLayoutError as error:
        raise UsageError(f"{prog}: {error}") from None
    print(f"{prog}: skipping {len(check.bad):,} unreadable image{'s' if len(check.bad) != 1 else ''} "
          "(--skip-bad-images)", file=sys.stderr)


def refuse_bad_images_of(configs: Iterable[RunConfig], prog: str) -> None:
    """``refuse_bad_images`` for a sequence's members, once per folder (a sweep may vary data_path)."""
    checked = set()
    for config in configs:
        folder = (config.dataset, config.data_path, config.seed, config.skip_bad_images)
        if folder not in checked:
            checked.add(folder)
            refuse_bad_images(config, prog)
