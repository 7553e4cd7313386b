"""Issue 22, the CLI a new user meets: what `workbench --help` says, a too-small dataset refused before torch
loads, an image folder pointed to make-npz, CPU memory in the summaries, a ceiling that is steady only when it is."""

import os
import re
import subprocess
import sys

import pytest
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
    result = without_torch("run", "--dataset", "npz", "--data-path", str(folder), "--device", "cpu",
                           home=tmp_path / "home")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and f"`{command}`" in result.stderr, result.stderr
    assert "choose dataset=folder to train on its images directly" in result.stderr


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


# -- the compute ceiling: steady only when it is, never beaten as a figure ------------------------------


def test_a_ceiling_is_steady_only_over_repeated_chunks_that_agree_for_long_enough():
    from workbench.engine.ceiling_cache import STEADY_CHUNKS, STEADY_MIN_SECONDS, STEADY_TOLERANCE, steady_chunks

    assert (STEADY_CHUNKS, STEADY_TOLERANCE, STEADY_MIN_SECONDS) == (3, 0.03, 2.0)
    # Issue 22: two one-step chunks of 128 images in 2 s each ("64 images/s over 1 steps") were called steady.
    assert steady_chunks([(128, 2.0), (128, 2.0)]) is None
    assert steady_chunks([(128, 0.5), (128, 0.5), (128, 0.5)]) is None  # agreeing, but 1.5 s of timing
    assert steady_chunks([(128, 1.0), (128, 0.9), (128, 1.0), (128, 1.0)]) is None  # only the last two agree
    settled = steady_chunks([(128, 1.5), (128, 1.0), (128, 1.01), (128, 1.0)])  # the 3 s that agree
    assert settled == [(128, 1.0), (128, 1.01), (128, 1.0)]


@pytest.mark.slow  # several seconds of processes or training: the fast tier stays under 5 minutes
def test_the_ceiling_command_says_not_steady_when_its_budget_ends_first(tmp_path, capsys):
    result = workbench("ceiling", "--device", "cpu", "--batch-size", "8", "--budget", "0.3", "--json",
                       WORKBENCH_HOME=str(tmp_path))
    assert result.returncode == 0, result.stderr
    import json

    assert json.loads(result.stdout.strip().splitlines()[-1])["steady"] is False
    with pytest.raises(SystemExit) as done:  # the help in this process, as test_help_says_that_no_command_… reads it
        main(["ceiling", "--help"])
    assert done.value.code == 0
    described = capsys.readouterr().out
    assert "at least 3 timed chunks in a row agree within 3% of each other over at least 2 s" in " ".join(
        described.split())


def test_a_run_faster_than_its_ceiling_reads_ceiling_stale_everywhere():
    from workbench.cli.timeline_report import summary_rows
    from workbench.controller.messages import ended_text, progress_text
    from workbench.engine.events import RunEnded, StepStats
    from workbench.engine.run_summary import RunSummary
    from workbench.history.metrics import METRICS_BY_NAME, format_metric

    summary = RunSummary(status="finished", images_per_sec=90.0, steps=10,
                         ceiling_images_per_sec=67.0, pipeline_efficiency=90.0 / 67.0)
    stale = "ceiling stale — measure again"
    assert dict(summary_rows(summary, None))["efficiency"] == stale  # the CLI summary
    assert stale in ended_text(RunEnded(status="finished", summary=summary)) and "134%" not in ended_text(RunEnded(status="finished", summary=summary))
    step = StepStats(step=5, total_steps=10, epoch=1, epochs=1, samples_seen=640, loss=1.0, lr=0.1,
                     images_per_sec=90.0, data_wait_seconds=0.0, device_span_seconds=0.0, window_seconds=1.0,
                     elapsed_seconds=5.0)
    assert f"({stale})" in progress_text(step, 67.0)  # the window's progress bar
    assert format_metric(METRICS_BY_NAME["pipeline_efficiency"].kind, 90.0 / 67.0) == stale  # runs tab, comparison
    assert format_metric(METRICS_BY_NAME["pipeline_efficiency"].kind, 0.41) == "41.0 %"
    assert "41% of ceiling" in progress_text(step, 90.0 / 0.41)


# -- CPU memory: the process's peak RSS where the torch and NVML figures do not exist ----------------------


@pytest.mark.slow  # several seconds of processes or training: the fast tier stays under 5 minutes
def test_a_cpu_run_shows_its_peak_rss_in_the_summary_the_json_the_history_and_the_runs_list(tmp_path, capsys,
                                                                                             monkeypatch):
    """Issue 22: the summary read "torch allocated n/a, reserved n/a; NVML used n/a" while the window plotted
    a 1.1 GiB RSS peak, and `workbench runs`' memory column was blank on a CPU."""
    tiny = ["--synthetic-size", "128", "--batch-size", "32", "--max-steps", "4", "--device", "cpu",
            "--num-workers", "0", "--log-every", "1"]
    home = str(tmp_path / "home")
    # The summary in this process (the --json run below is the CLI process: one torch import fewer, 5-10 s of the
    # slow tier on a loaded 2-core machine); main() prints what `workbench run` prints.
    monkeypatch.setenv("WORKBENCH_HOME", home)
    assert main(["run", *tiny]) == 0
    text = capsys.readouterr()
    line = next(line for line in text.out.splitlines() if line.strip().startswith("peak memory"))
    assert "process RSS" in line and "MiB" in line and "torch allocated n/a" not in line
    assert "the torch and NVML figures need a CUDA GPU" in line

    import json

    made = workbench("run", *tiny, "--json", WORKBENCH_HOME=home)
    peaks = json.loads(made.stdout.strip().splitlines()[-1])["peak_memory_bytes"]
    assert peaks["process_rss"] > 2**20 and peaks["torch_allocated"] is None

    listed = workbench("runs", WORKBENCH_HOME=home).stdout.splitlines()
    assert "PEAK MEMORY" in listed[0] and len(listed) == 3
    assert all(re.search(r"  \d+\.\d (MiB|GiB) RSS  ", row) for row in listed[1:]), listed

    from workbench.history.store import HistoryStore

    with HistoryStore.open(tmp_path / "home") as store:
        assert all(record.summary.peak_process_rss_bytes > 2**20 for record in store.list_runs())


# -- tune: a search that tries something, or says why not --------------------------------------------------


def test_tune_refuses_a_budget_too_small_for_one_change_before_anything_runs(tmp_path):
    result = workbench("tune", "--budget-seconds", "5", "--device", "cpu", WORKBENCH_HOME=str(tmp_path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "workbench tune: the time budget of 5 s cannot fit one change: the best settings and the change run 3 times "
        "each, interleaved, each 4 s of training or more; give a budget of 24 s or more")


def test_tune_help_reads_3_percent_and_names_max_steps_as_the_trial_length():
    text = " ".join(workbench("tune", "--help").stdout.split())
    assert "3 %%" not in text and "gains less than 3 %." in text
    assert "default: --max-steps when given" in text
