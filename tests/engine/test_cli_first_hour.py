"""Issue 22, the CLI a new user meets: what `workbench --help` says, a too-small dataset refused before torch
loads, an image folder pointed to make-npz, CPU memory in the summaries, a ceiling that is steady only when it is."""

import os
import subprocess
import sys

from workbench.cli import main


def workbench(*args: str, timeout: float = 300, **environ: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **environ)
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_help_says_that_no_command_opens_the_app(capsys):
    try:
        main(["--help"])
    except SystemExit as done:
        assert done.code == 0
    out = capsys.readouterr().out
    assert "with no COMMAND opens the desktop app" in " ".join(out.split())
