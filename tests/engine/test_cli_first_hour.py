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


def image_folder(root):
    from PIL import Image

    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for index in range(3):
            Image.new("RGB", (64, 48), (40 * index, 90, 200)).save(root / name / f"{index}.png")
    return root


def test_an_image_folder_as_data_is_pointed_to_make_npz_with_the_exact_command(tmp_path):
    """Issue 22: a folder was refused with "is not a file (dataset=npz needs an .npz file)", make-npz unnamed."""
    folder = image_folder(tmp_path / "pets")
    command = f"workbench make-npz {folder} --out {folder}.npz"
    for flags in (["--data-path", f"{folder}/"], ["--dataset", "npz", "--data-path", str(folder)]):
        result = without_torch("run", *flags, "--device", "cpu", home=tmp_path / "home")
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and f"`{command}`" in result.stderr, result.stderr


def test_make_npz_says_it_scales_and_refuses_an_out_name_that_is_not_npz(tmp_path):
    folder = image_folder(tmp_path / "pets")
    refused = workbench("make-npz", str(folder), "--out", str(tmp_path / "mine.png"))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip() == (f"workbench make-npz: --out {tmp_path / 'mine.png'} would not be an .npz file: "
                                      f"name it {tmp_path / 'mine.npz'} (or {tmp_path / 'mine.png'}.npz)")
    assert list(tmp_path.glob("mine*")) == []
    made = workbench("make-npz", str(folder), "--out", str(tmp_path / "mine"))
    assert made.returncode == 0, made.stderr
    assert f"Wrote {tmp_path / 'mine.npz'}: " in made.stdout
    assert "cropped to its centre square and scaled to 32×32 pixels" in made.stdout
    assert (tmp_path / "mine.npz").is_file()
