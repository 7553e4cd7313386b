"""Compile modes, the CUDA-graphs report, compile time, the fused optimizer and cuDNN benchmark (issue 23 §3)."""

from __future__ import annotations

import json
import logging
import sqlite3

import pytest
import torch
from engine_helpers import run_to_end, tiny_config

from workbench.cli import main
from workbench.config import RunConfig, inactive_settings
from workbench.engine.compiling import ON_CPU, CudaGraphWatch
from workbench.engine.events import RunEnded, RunStarted, StepStats
from workbench.engine.setting_notes import inactive_setting_notes
from workbench.engine.train_step import build_optimizer
from workbench.history.schema import MIGRATIONS, SCHEMA_VERSION
from workbench.history.store import HistoryStore



def test_compile_is_a_mode_and_the_old_switch_still_reads_as_one():
    assert RunConfig().compile == "off"
    assert RunConfig.from_dict({"compile": True}).compile == "default"
    assert RunConfig.from_dict({"compile": False}).compile == "off"
    assert RunConfig(compile=True).compile == "default"  # code that set the switch
    assert RunConfig(compile="reduce-overhead").validate() == []
    assert RunConfig(compile="fast").validate() == [
        "compile must be one of off, default, reduce-overhead, max-autotune (got 'fast')"]


@pytest.mark.parametrize("flags, mode", [
    ([], "off"), (["--compile"], "default"), (["--no-compile"], "off"),
    (["--compile", "reduce-overhead"], "reduce-overhead"), (["--compile", "max-autotune"], "max-autotune"),
])
def test_the_compile_flag_keeps_working_and_takes_a_mode(flags, mode):
    from workbench.cli import build_parser
    from workbench.cli.setting_flags import config_from_args

    args = build_parser().parse_args(["run", *flags])
    assert config_from_args(args).compile == mode


def test_a_bad_compile_mode_is_one_line_and_exit_2(capsys):
    assert main(["run", "--compile", "turbo", "--no-history"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["workbench run: compile must be one of off, default, reduce-overhead, max-autotune (got 'turbo')"]


class _Watching:
    """A CudaGraphWatch on a CUDA device, fed torch's own log line as inductor writes it."""

    @staticmethod
    def run(mode: str, logged: list[str]) -> str:
        with CudaGraphWatch(mode, "cuda") as watch:
            logger = logging.getLogger("torch._inductor.cudagraph_utils.__cudagraphs")
            for message in logged:
                logger.warning(message)
        return watch.report()


def test_cuda_graphs_say_whether_torch_used_them_and_why_not():
    assert _Watching.run("reduce-overhead", []) == "on"
    assert _Watching.run("reduce-overhead", ["skipping cudagraphs due to mutated inputs (1 instances)"]) == (
        "skipped: mutated inputs (1 instances)")
    assert _Watching.run("default", ["skipping cudagraphs due to cpu device"]) is None  # not asked for
    with CudaGraphWatch("reduce-overhead", "cpu") as watch:
        pass
    assert watch.report() == ON_CPU
    # The watch leaves torch's logger as it found it.
    logger = logging.getLogger("torch._inductor.cudagraph_utils.__cudagraphs")
    assert watch not in logger.handlers and logger.level == logging.NOTSET


@pytest.mark.slow  # torch.compile on a CPU: seconds the first time
def test_a_reduce_overhead_run_on_the_cpu_reports_its_compile_time_and_why_no_cuda_graphs(user_module):
    # Which model is compiled is no part of the report: a conv and a linear layer (mymodels:tiny_net) compile in a
    # third of small-cnn's time with no inductor cache (25 s against 75 s on a loaded 2-core machine).
    events = run_to_end(tiny_config(compile="reduce-overhead", max_steps=12, log_every=2, model="mymodels:tiny_net"))
    (started,) = [e for e in events if isinstance(e, RunStarted)]
    steps = [e for e in events if isinstance(e, StepStats)]
    ended = events[-1]
    assert isinstance(ended, RunEnded) and ended.status == "finished", ended.reason
    assert "compile=reduce-overhead compiles, but its CUDA graphs need a CUDA GPU" in started.notes
    assert steps[0].compile_seconds > 0 and all(s.compile_seconds is None for s in steps[1:])
    summary = ended.summary
    assert summary.compile_seconds == steps[0].compile_seconds and summary.cuda_graphs == ON_CPU
    # The compiling window is the warm-up: images/sec is over the windows after it.
    later = sum(s.samples_seen - p.samples_seen for p, s in zip(steps, steps[1:]))
    assert summary.images_per_sec == pytest.approx(later / sum(s.window_seconds for s in steps[1:]))


def test_an_uncompiled_run_has_no_compile_figures():
    ended = run_to_end(tiny_config())[-1]
    assert ended.summary.compile_seconds is None and ended.summary.cuda_graphs is None


def test_the_fused_optimizer_is_fused_on_cuda_and_said_to_be_ignored_on_the_cpu():
    model = torch.nn.Linear(4, 2)
    fused = RunConfig(fused_optimizer=True)
    assert build_optimizer(fused, model, "cuda").defaults["fused"] is True
    assert not build_optimizer(fused, model, "cpu").defaults.get("fused")
    assert not build_optimizer(fused.replace(optimizer="adamw"), model, "cpu").defaults.get("fused")
    from workbench.engine.device import probe_device

    notes = inactive_setting_notes(fused, probe_device("cpu"))
    reasons = inactive_settings(fused, on_cpu=True)  # the form greys them out, saying why: the notes say the same
    assert f"fused_optimizer does nothing in this run: {reasons['fused_optimizer']}" in notes
    assert f"pin_memory and non_blocking do nothing in this run: {reasons['pin_memory']}" in notes
    assert f"cudnn_benchmark does nothing in this run: {reasons['cudnn_benchmark']}" in notes
    resident = inactive_setting_notes(RunConfig(pipeline="gpu-resident"), probe_device("cpu"))
    assert any(note.startswith("pin_memory, non_blocking and persistent_workers do nothing")
               for note in resident)  # num_workers, prefetch_factor left at their defaults: not said
    assert not any("cudnn_benchmark" in note for note in inactive_setting_notes(
        RunConfig(pipeline="gpu-resident", cudnn_benchmark=False), probe_device("cpu")))
    assert "fused_optimizer" not in inactive_settings(fused, on_cpu=False)


def test_old_compile_rows_migrate_to_the_mode_they_ran(tmp_path):
    path = tmp_path / "history.sqlite3"
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:4]:  # a schema-4 history, as the last release left it
        migration(conn)
    old = {**RunConfig().to_dict()}
    for name, compiled in (("compiled", True), ("eager", False)):
        old["compile"] = compiled
        conn.execute("INSERT INTO runs (name, status, source, started_at, config_json) VALUES (?, 'finished', "
                     "'cli', 1.0e9, ?)", (name, json.dumps(old)))
    conn.execute("INSERT INTO sweeps (kind, name, created_at, plan_json) VALUES ('tune', 't', 1.0e9, ?)",
                 (json.dumps({"base": old, "knobs": ["compile"]}),))
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    with HistoryStore.open(tmp_path) as store:
        modes = {record.name: record.config.compile for record in store.list_runs()}
        assert all(not record.config_dropped for record in store.list_runs())
    assert modes == {"compiled": "default", "eager": "off"}
    conn = sqlite3.connect(path)
    stored = [json.loads(text)["compile"] for (text,) in conn.execute("SELECT config_json FROM runs ORDER BY id")]
    (plan,) = [json.loads(text) for (text,) in conn.execute("SELECT plan_json FROM sequences")]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    conn.close()
    assert stored == ["default", "off"] and plan["base"]["compile"] == "off" and version == SCHEMA_VERSION


def test_the_run_carries_an_interval_around_its_images_per_sec():
    summary = run_to_end(tiny_config(max_steps=12, log_every=2))[-1].summary
    assert summary.images_per_sec_low <= summary.images_per_sec <= summary.images_per_sec_high
    short = run_to_end(tiny_config(max_steps=4, log_every=2))[-1].summary  # one steady window: no interval
    assert short.images_per_sec is not None and short.images_per_sec_low is None


def test_the_json_summary_and_csv_carry_the_interval(tmp_path, capsys):
    assert main(["--home", str(tmp_path), "run", "--dataset", "synthetic", "--synthetic-size", "256",
                 "--batch-size", "32", "--max-steps", "12", "--log-every", "2", "--num-workers", "0",
                 "--device", "cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["images_per_sec_low"] <= data["images_per_sec"] <= data["images_per_sec_high"]
    assert main(["--home", str(tmp_path), "export", "--out", str(tmp_path / "runs.csv")]) == 0
    header = (tmp_path / "runs.csv").read_text().splitlines()[0].split(",")
    assert {"images_per_sec_low", "images_per_sec_high", "compile_seconds", "cuda_graphs"} <= set(header)


def test_fp16_skipped_steps_are_counted_by_the_optimizers_own_step_hook():
    """The GradScaler skips a step whose gradients hold inf/NaN by not calling optimizer.step: a public step hook
    counts the steps taken, no private scaler state read (here on the CPU, whose autocast has fp16 too)."""
    from workbench.engine.train_step import TrainStep

    model = torch.nn.Linear(4, 2)
    poisoned = {2, 5}
    calls = {"n": 0}

    def criterion(logits, labels):
        calls["n"] += 1
        loss = torch.nn.functional.cross_entropy(logits.float(), labels)
        return loss * float("inf") if calls["n"] in poisoned else loss

    step = TrainStep(model, torch.optim.SGD(model.parameters(), lr=0.1), criterion, "cpu", "fp16")
    for _ in range(6):
        step(torch.randn(8, 4), torch.randint(0, 2, (8,)))
    assert step.read_skipped_steps() == 2
    assert step.read_loss_scale() == 65536.0 / 4  # halved at each skip


def test_max_autotune_counts_as_asking_for_cuda_graphs_and_torchs_own_skip_lines_are_read():
    """issue 31 item 3: both modes turn triton.cudagraphs on; torch 2.14 writes "skipping cudagraphs due to"
    and, for the re-recording limit, "skipping cudagraph due to" (cudagraph_trees)."""
    from torch._inductor.cudagraph_utils import format_default_skip_message, log_cudagraph_skip_and_bump_counter

    assert _Watching.run("max-autotune", []) == "on"
    with CudaGraphWatch("max-autotune", "cuda") as watch:
        log_cudagraph_skip_and_bump_counter(format_default_skip_message("mutated inputs (2 instances)"))
        log_cudagraph_skip_and_bump_counter("skipping cudagraph due to function 0 exceeding max re-recording "
                                            "limit (=8) on cudagraph node 3 due to new shape.")
    assert watch.report() == ("skipped: mutated inputs (2 instances); function 0 exceeding max re-recording limit "
                              "(=8) on cudagraph node 3 due to new shape.")
    notes = inactive_setting_notes(RunConfig(compile="max-autotune"), _cpu())
    assert "compile=max-autotune compiles, but its CUDA graphs need a CUDA GPU" in notes


def _cpu():
    from workbench.engine.device import probe_device

    return probe_device("cpu")


class _SkipsAtItsThirdCall(torch.nn.Module):
    """What torch.compile returns, standing in for it: the model, and torch's own skip report at its third call
    (a CUDA-graph tree re-recording past its limit: a skip long after the first, compiling step)."""

    def __init__(self, model, mode=None):
        super().__init__()
        self.model, self.calls = model, 0

    def forward(self, images):
        from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

        self.calls += 1
        if self.calls == 3:
            log_cudagraph_skip_and_bump_counter("skipping cudagraph due to function 1 exceeding max re-recording "
                                                "limit (=8) on cudagraph node 0 due to new shape.")
        return self.model(images)


def test_a_skip_after_the_compiling_step_is_read_at_the_runs_end_and_the_compiler_reset_before_freeing(monkeypatch):
    """issue 31 items 3 and 8 through a whole run: the watch (made to think it is on CUDA) listens to the end; the
    run, once its session is closed, resets torch's compiler state and only then frees the device's memory."""
    from workbench.engine import one_process, session

    monkeypatch.setattr(torch, "compile", _SkipsAtItsThirdCall)
    monkeypatch.setattr(session, "CudaGraphWatch", lambda mode, device_type: CudaGraphWatch(mode, "cuda"))
    calls = []
    closing = session.TrainingSession.close
    monkeypatch.setattr(session.TrainingSession, "close", lambda self: (calls.append("session closed"), closing(self)))
    monkeypatch.setattr(torch.compiler, "reset", lambda: calls.append("compiler reset"))
    monkeypatch.setattr(one_process, "free_device_memory", lambda: calls.append("memory freed"))
    events = run_to_end(tiny_config(compile="reduce-overhead", max_steps=6, log_every=2))
    ended = events[-1]
    assert ended.status == "finished", ended.reason
    steps = [e for e in events if isinstance(e, StepStats)]
    assert [s.cuda_graphs for s in steps] == ["on", "skipped: function 1 exceeding max re-recording limit (=8) on "
                                              "cudagraph node 0 due to new shape.", None]
    assert ended.summary.cuda_graphs == steps[1].cuda_graphs
    assert calls == ["session closed", "compiler reset", "memory freed"]
    assert "compiler reset" not in _calls_of_an_eager_run(monkeypatch)


def _calls_of_an_eager_run(monkeypatch):
    from workbench.engine import one_process

    calls = []
    monkeypatch.setattr(torch.compiler, "reset", lambda: calls.append("compiler reset"))
    monkeypatch.setattr(one_process, "free_device_memory", lambda: calls.append("memory freed"))
    assert run_to_end(tiny_config(max_steps=2))[-1].status == "finished"
    return calls
