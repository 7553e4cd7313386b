"""Issue 22, the CLI a new user meets: what `workbench --help` says, a too-small dataset refused before torch
loads, an image folder pointed to make-npz, CPU memory in the summaries, a ceiling that is steady only when it is."""

import os
import subprocess
import sys

from engine_helpers import write_npz

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


NO_TORCH = """
import sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"{name} was imported before the input was checked")

sys.meta_path.insert(0, NoTorch())
from workbench.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def without_torch(*args: str, home) -> subprocess.CompletedProcess:
    env = dict(os.environ, WORKBENCH_HOME=str(home))
    return subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_a_dataset_smaller_than_the_batch_is_refused_before_torch_is_imported(tmp_path):
    """Issue 22: 48 images at batch 128 took 58 s to be refused on a loaded machine (torch and the device probe
    came first); the file's header says it."""
    path = write_npz(tmp_path / "small.npz", train=48, test=16)
    result = without_torch("run", "--data-path", str(path), "--batch-size", "128", "--device", "cpu",
                           home=tmp_path / "home")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "workbench run: batch_size 128 is larger than the training set (48 images)"
    assert not (tmp_path / "home" / "history.sqlite3").exists()  # nothing recorded
