"""What `workbench run` says to a new user: bad files, missing flags, typos, help, --json, the device."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from engine_helpers import write_npz

from workbench.cli import main
from workbench.config import FIELD_NAMES, SETTINGS, RunConfig

TINY = ["--synthetic-size", "128", "--batch-size", "32", "--max-steps", "2", "--device", "cpu",
        "--num-workers", "0"]


def run_cli(capsys, *args):
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


def history_runs():
    from workbench.history.store import HistoryStore

    with HistoryStore.open() as store:
        return store.list_runs()


def test_a_text_file_named_npz_is_not_a_valid_npz_archive(capsys, tmp_path):
    path = tmp_path / "data.npz"
    path.write_text("not numbers")
    code, out, err = run_cli(capsys, *TINY, "--dataset", "npz", "--data-path", str(path))
    assert code == 2 and out == ""
    assert err.strip().startswith(f"workbench run: {path} is not a valid npz archive")
    assert "pickle" not in err and len(err.strip().splitlines()) == 1


def test_an_npz_with_the_wrong_keys_names_the_keys_it_has(capsys, tmp_path):
    path = tmp_path / "mnist-like.npz"
    np.savez(path, x_train=np.zeros((4, 32, 32, 3), np.uint8), y_train=np.zeros(4, np.uint8))
    code, out, err = run_cli(capsys, *TINY, "--dataset", "npz", "--data-path", str(path))
    assert code == 2
    assert err.strip() == (f"workbench run: npz file {path} has x_train, y_train; it needs train_images, "
                           "train_labels, test_images, test_labels (missing: train_images, train_labels, "
                           "test_images, test_labels)")


def test_data_path_to_an_npz_without_dataset_trains_on_it_and_says_so(capsys, tmp_path):
    path = write_npz(tmp_path / "mine.npz", train=64, test=16)
    code, out, err = run_cli(capsys, *TINY, "--data-path", str(path), "--json", "--no-history")
    assert code == 0, err
    assert f"workbench run: {path} is an .npz file: training on it (--dataset npz)" in err.splitlines()
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["config"]["dataset"] == "npz" and summary["config"]["data_path"] == str(path)


@pytest.mark.parametrize("args, line", [
    (["--data-path", "/some/folder"],
     "workbench run: --data-path needs --dataset: npz for an .npz file, folder for a folder of class folders, "
         "cifar10 or cifar100 for a CIFAR folder"),
    (["--dataset", "synthetic", "--data-path", "x.npz"],
     "workbench run: --data-path is not used with --dataset synthetic: drop it, or choose --dataset npz "
     "(an .npz file), folder (a folder of class folders) or cifar10/cifar100 (a CIFAR folder)"),
])
def test_data_path_that_would_be_ignored_is_refused(capsys, args, line):
    code, out, err = run_cli(capsys, *TINY, *args)
    assert code == 2 and err.strip() == line


def test_json_says_what_ran_run_id_and_the_whole_config(capsys):
    code, out, err = run_cli(capsys, *TINY, "--json", "--lr", "0.02")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    [record] = history_runs()
    assert summary["run_id"] == record.id
    assert summary["config"] == record.config.to_dict()
    assert RunConfig.from_dict(summary["config"]).lr == 0.02
    code, out, err = run_cli(capsys, *TINY, "--json", "--no-history")
    assert json.loads(out.strip().splitlines()[-1])["run_id"] is None


def test_help_gives_each_flag_the_forms_one_line(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "default: X" not in help_text
    for name in FIELD_NAMES:
        assert f"--{name.replace('_', '-')}" in help_text
        assert " ".join(SETTINGS[name].help.split()) in help_text, name
        assert "\n" not in SETTINGS[name].help and SETTINGS[name].tooltip.startswith(SETTINGS[name].help)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_device_cuda_without_a_gpu_says_it_once_with_what_to_do(capsys):
    code, out, err = run_cli(capsys, "--device", "cuda", "--no-history")
    assert code == 2
    line = err.strip()
    assert line.startswith("workbench run: device=cuda but no CUDA GPU was found")
    assert line.count("no CUDA GPU") == 1
    assert "choose device=auto or device=cpu" in line


def test_a_typo_in_a_subcommand_suggests_the_nearest(capsys):
    assert main(["rnu"]) == 2
    assert capsys.readouterr().err.strip().endswith("did you mean 'run'?")


def test_the_installed_command_line_says_the_same(tmp_path):
    """The real process: exit code 2 and the one line, with nothing else on stderr."""
    result = subprocess.run([sys.executable, "-m", "workbench", "run", "--max-step", "3", "--devcie", "cpu"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip() == "workbench run: unknown flag --devcie (did you mean --device?)"
