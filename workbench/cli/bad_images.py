"""An image folder's unreadable files, refused before a command records anything (issue 30 §2)."""

from __future__ import annotations

import sys

from workbench.cli.parsing import UsageError
from workbench.config import RunConfig
from workbench.image_check import check_run_images


def refuse_bad_images(config: RunConfig, prog: str) -> None:
    """An image folder's files checked before the run is recorded: every unreadable one listed at once (exit 2),
    unless --skip-bad-images leaves them out (the run counts them)."""
    check = check_run_images(config)
    if check is None or not check.bad:
        return
    if config.skip_bad_images:
        print(f"{prog}: skipping {len(check.bad):,} unreadable image{'s' if len(check.bad) != 1 else ''} "
              "(--skip-bad-images)", file=sys.stderr)
        return
    raise UsageError(check.report(f"{prog}: "))
