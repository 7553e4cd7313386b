"""`workbench run`: flags for every field, one readable line for bad input, exit codes."""

import json

import pytest
from engine_helpers import write_npz
from torchvision import datasets

from workbench.cli import main
from workbench.config import FIELD_NAMES

TINY = ["--dataset", "synthetic", "--synthetic-size", "128", "--batch-size", "32", "--max-steps", "3",
        "--log-every", "1", "--device", "cpu", "--num-workers", "0", "--no-history"]


def run_cli(capsys, *args):
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_summary_is_the_last_line_of_stdout(capsys):
    code, out, err = run_cli(capsys, *TINY, "--json")
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["status"] == "finished" and summary["device_type"] == "cpu"
    assert set(summary) >= {"test_accuracy", "final_loss", "images_per_sec", "data_wait_fraction",
                            "peak_memory_bytes", "wall_seconds"}
    # One throughput figure, a number (an object {mean, median} until issue 30).
    assert isinstance(summary["images_per_sec"], float) and summary["images_per_sec"] > 0
    assert "images_per_sec_median" not in summary


def test_every_config_field_is_a_flag(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = capsys.readouterr().out
    for name in FIELD_NAMES:
        assert "--" + name.replace("_", "-") in help_text


@pytest.mark.parametrize(
    "args, line",
    [
        (["--batch-size", "0"], "workbench run: batch_size must be between 1 and 65536 (got 0)"),
        (["--model", "vgg"], "workbench run: model 'vgg' is neither a built-in (small-cnn, small-cnn-gn, resnet18, "
                             "mobilenet_v3_small) nor a torchvision classification model nor package.module:function "
                             "(did you mean vgg19 or vgg16 or vgg13?)"),
        (["--batch-size", "many"], "workbench run: argument --batch-size: invalid int value: 'many'"),
        (["--precision", "fp16"], "workbench run: fp16 needs a CUDA GPU"),
        (["--dataset", "npz", "--data-path", "/nowhere/data.npz"],
         "workbench run: data_path '/nowhere/data.npz' does not exist: dataset=npz needs an .npz file"),
        (["--colour", "red"], "workbench run: unknown flag --colour (see `workbench run --help`)"),
        (["--batchsize", "64"], "workbench run: unknown flag --batchsize (did you mean --batch-size?)"),
        (["--num_workers=2"], "workbench run: unknown flag --num_workers (did you mean --num-workers?)"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, args, line):
    code, out, err = run_cli(capsys, *TINY, *args)
    assert code == 2
    assert err.strip() == line
    assert "Traceback" not in err


def test_npz_with_wrong_shapes_exits_2_with_one_line_and_no_summary(capsys, tmp_path):
    import numpy as np

    path = write_npz(tmp_path / "bad.npz", train_images=np.zeros((64, 28, 28, 1), np.uint8))
    code, out, err = run_cli(capsys, *TINY, "--dataset", "npz", "--data-path", str(path), "--json")
    assert code == 2
    assert err.strip() == (f"workbench run: npz file {path}: train_images is uint8 (64, 28, 28, 1); "
                           "expected uint8 images of shape (N, 32, 32, 3)")
    assert out == ""  # nothing ran: no summary, no JSON


def test_cifar10_offline_exits_2_naming_the_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.CIFAR10, "url", "http://127.0.0.1:9/cifar-10-python.tar.gz")
    code, out, err = run_cli(capsys, *TINY, "--dataset", "cifar10", "--data-path", str(tmp_path))
    assert code == 2
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"workbench run: CIFAR-10 is not in {tmp_path}") and "choose dataset=synthetic" in last


def test_config_file_is_a_base_that_flags_override(capsys, tmp_path):
    config_file = tmp_path / "run.json"
    config_file.write_text(json.dumps({"batch_size": 16, "max_steps": 2, "model": "small-cnn"}))
    code, out, err = run_cli(capsys, *TINY, "--config", str(config_file), "--max-steps", "1", "--json")
    assert code == 0
    assert json.loads(out.strip().splitlines()[-1])["steps"] == 1


def test_config_file_with_unknown_keys_exits_2(capsys, tmp_path):
    config_file = tmp_path / "run.json"
    config_file.write_text(json.dumps({"batch_sise": 16}))
    code, out, err = run_cli(capsys, "--config", str(config_file))
    assert code == 2 and err.strip() == "workbench run: unknown setting: batch_sise"


def test_a_failed_run_exits_1_and_logs_its_traceback(capsys, monkeypatch, isolated_workbench_home):
    from workbench.engine import train_step as train_step_module

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(train_step_module, "build_model", explode)
    code, out, err = run_cli(capsys, *TINY)
    log = isolated_workbench_home / "logs" / "failures.log"
    assert code == 1 and err.strip().splitlines()[-2:] == [
        "workbench run: RuntimeError: boom", f"workbench run: the traceback is in {log}"]
    assert "a run not in the history (cli) failed [error]: RuntimeError: boom" in log.read_text()
    assert 'raise RuntimeError("boom")' in log.read_text()


def test_json_names_nvml_used_as_device_wide_and_counts_skipped_steps(capsys):
    code, out, err = run_cli(capsys, *TINY, "--json")
    summary = json.loads(out.strip().splitlines()[-1])
    assert set(summary["peak_memory_bytes"]) == {"torch_allocated", "torch_reserved", "nvml_device_used", "nvml_device_used",
                                                 "nvml_process_used", "process_rss"}
    assert summary["skipped_optimizer_steps"] == 0


def test_the_summary_says_nvml_used_is_device_wide():
    from workbench.cli.run_summary_text import peak_memory_text
    from workbench.engine.run_summary import RunSummary

    gpu = RunSummary(status="finished", peak_allocated_bytes=2**30, peak_reserved_bytes=2**31, peak_nvml_device_used_bytes=3 * 2**30,
                     peak_process_rss_bytes=2**29)
    assert peak_memory_text(gpu) == ("torch allocated 1.0 GiB, reserved 2.0 GiB; NVML used 3.0 GiB device-wide, "
                                     "n/a this process; process RSS 512.0 MiB")


def test_cli_runs_are_recorded_in_the_history(capsys, isolated_workbench_home):
    from workbench.history.store import HistoryStore

    args = [arg for arg in TINY if arg != "--no-history"]
    assert main(["run", *args, "--name", "first"]) == 0
    capsys.readouterr()
    store = HistoryStore.open(isolated_workbench_home)
    try:
        runs = store.list_runs()
        assert [(r.name, r.status, r.source) for r in runs] == [("first", "finished", "cli")]
    finally:
        store.close()


def test_profile_json_on_a_cpu_has_top_ops_and_says_why_gpu_figures_are_none(capsys):
    code, out, err = run_cli(capsys, "--dataset", "synthetic", "--synthetic-size", "320", "--batch-size", "32",
                             "--epochs", "1", "--log-every", "2", "--device", "cpu", "--num-workers", "0",
                             "--no-history", "--profile", "--json")
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    profile = summary["profile"]
    assert profile["samples"] == 1
    assert profile["top_ops"] and all(set(op) >= {"name", "host_seconds"} for op in profile["top_ops"])
    for name in ("kernel_busy_fraction", "memcpy_fraction", "idle_waiting_for_data_fraction",
                 "idle_waiting_for_host_fraction", "idle_other_fraction", "kernels_per_step"):
        assert profile[name] is None
    assert profile["gpu_unavailable_reason"] == "a CPU run has no GPU timeline"
    assert profile["trace_path"].endswith(".trace.json.gz")
    assert "profile sample, steps 7-9" in err and profile["trace_path"] in err
    assert summary["pipeline_efficiency"] is None  # no ceiling measured in this home
    assert summary["findings"] and all(set(f) >= {"text", "figure", "field", "value"} for f in summary["findings"])
    assert summary["verdict"] == summary["findings"][0]["headline"]


def test_without_profile_the_json_profile_is_null_and_findings_are_listed(capsys):
    code, out, err = run_cli(capsys, *TINY)
    assert code == 0
    assert "findings" in out and "1. CPU-bound" in out
    code, out, err = run_cli(capsys, *TINY, "--json")
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["profile"] is None


def test_a_run_of_one_log_window_says_it_has_no_steady_state_and_gives_no_rate_or_verdict(capsys):
    """Its one window is the warm-up: a 5-step run with workers read 11× too slow and input-bound on their start-up."""
    one_window = [argument for argument in TINY if argument not in ("--log-every", "1")]  # log_every 10, 3 steps
    code, out, err = run_cli(capsys, *one_window, "--json")
    assert code == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["steps"] == 3 and summary["images_per_sec"] is None and summary["data_wait_fraction"] is None
    assert summary["verdict"] is None and summary["findings"] == []
    assert summary["no_steady_state_reason"].startswith("no steady window: the run's steps all fell in its first")
    code, out, err = run_cli(capsys, *one_window)
    assert "img/s  n/a: no steady window" in out and "verdict  n/a (no steady window)" in out
    code, out, err = run_cli(capsys, *TINY, "--json")
    assert json.loads(out.strip().splitlines()[-1])["no_steady_state_reason"] is None
