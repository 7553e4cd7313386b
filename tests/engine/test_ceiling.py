"""The compute ceiling on a CPU: measured, cached per settings, and a run's efficiency against it."""

import json
import os
import re
import signal
import threading

import pytest
import torch
from engine_helpers import run_to_end, tiny_config
from stopped_probe import STEP_BLOCKS_AT_MOST_S, counting_steps, stopped_in_step

from workbench.cli import main
from workbench.engine import probe_device
from workbench.engine.ceiling import WARMUP_STEPS, measure_ceiling
from workbench.engine.ceiling_cache import Ceiling, ProbeStopped, cache_path, cached_ceiling, ceiling_key, store_ceiling
from workbench.engine.failures import ModelError
from workbench.engine.interruptible import wait_for_abandoned

CPU_FLAGS = ["--device", "cpu", "--batch-size", "8", "--budget", "1"]


def test_the_ceiling_probe_runs_on_a_cpu_and_is_cached_per_settings(isolated_workbench_home):
    config = tiny_config(batch_size=8)
    device = probe_device("cpu")
    ceiling = measure_ceiling(config, device, budget_seconds=1.0)
    assert ceiling.images_per_sec > 0 and ceiling.timed_steps >= 1 and not ceiling.cached
    assert ceiling.key == ceiling_key(config, device, 10)
    assert ceiling.key["channels_last"] is False and ceiling.key["torch_version"] == device.torch_version
    store_ceiling(ceiling)
    assert cache_path() == isolated_workbench_home / "ceilings.json"
    again = cached_ceiling(config, device, 10)
    assert again.cached and again.images_per_sec == ceiling.images_per_sec
    # Another batch, precision or memory format is another ceiling.
    assert cached_ceiling(config.replace(batch_size=16), device, 10) is None
    assert cached_ceiling(config.replace(channels_last=True), device, 10) is None


def test_the_probe_clips_gradients_as_the_run_does(monkeypatch):
    """The probe builds its model and step where the run does (train_step.build_training): a run that clips is
    bounded by a ceiling that clips too (the probe's own copy of the setup never clipped)."""
    clipped = []
    clip = torch.nn.utils.clip_grad_norm_

    def counting_clip(parameters, max_norm, *args, **kwargs):
        clipped.append(max_norm)
        return clip(parameters, max_norm, *args, **kwargs)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", counting_clip)
    measure_ceiling(tiny_config(batch_size=8, max_grad_norm=0.5), probe_device("cpu"), budget_seconds=0.2)
    assert clipped and set(clipped) == {0.5}
    clipped.clear()
    measure_ceiling(tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=0.2)
    assert clipped == []


@pytest.mark.parametrize("stop_after_steps, words", [
    (0, "stopped before the model was built"),
    (1, "stopped while warming up ("),  # how many it says are done depends on when the stop was seen: in flight or after
    (3, "stopped while warming up ("),
    (WARMUP_STEPS + 2, "stopped while timing"),  # the first step of the second chunk (short chunks double): mid-chunk
])
def test_a_stop_ends_the_probe_at_the_next_step_and_gives_no_figure(monkeypatch, stop_after_steps, words):
    """The warm-up never asked stop(): a resnet18 probe on a CPU ran its five warm-up steps, many seconds, after
    Stop (or the window closing); a stop while timing gave a rough figure the cache kept as the model's ceiling.
    Nor did a timed chunk: its remaining steps ran after the stop."""
    steps = counting_steps(monkeypatch)

    def stop():
        return len(steps) >= stop_after_steps

    with pytest.raises(ProbeStopped, match=re.escape(words)):
        measure_ceiling(tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=30.0, stop=stop)
    assert wait_for_abandoned(30.0)
    assert len(steps) == stop_after_steps  # not one step after the stop


@pytest.mark.parametrize("blocked_step, words", [
    (1, "stopped while warming up (0 of 5 warm-up steps done)"),
    (WARMUP_STEPS + 2, "stopped while timing"),
])
def test_a_stop_ends_the_probe_without_waiting_for_the_step_in_flight(monkeypatch, blocked_step, words):
    """One step of a large model on a CPU (or the first, compiling, one) takes many seconds: the stop landed only
    once it ended. The probe's step here blocks until the test releases it, after the probe has answered the stop;
    the abandoned probe then starts no other step, and frees what it made."""
    steps, stop, stopper, released = stopped_in_step(monkeypatch, blocked_step)
    try:
        with pytest.raises(ProbeStopped, match=re.escape(words)):
            measure_ceiling(tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=30.0, stop=stop)
        answered_in_flight = not released.is_set()
    finally:
        released.set()
        stopper.join()
    assert answered_in_flight, "the probe waited for its step in flight"
    assert wait_for_abandoned(30.0)
    assert len(steps) == blocked_step


def test_a_probe_started_after_a_stop_waits_for_the_stopped_ones_step_in_flight(monkeypatch):
    """The stopped probe's step runs on in the background: a probe started meanwhile (Measure clicked again) would
    time its chunks against it on the same cores or GPU. It says it waits, and starts no step until that one ends."""
    steps, stop, stopper, released = stopped_in_step(monkeypatch, 1)
    said: list[str] = []
    waiting = threading.Event()
    second: list = []

    def say(message: str) -> None:
        said.append(message)
        if message.startswith("waiting for a stopped ceiling probe's last step to end"):
            waiting.set()

    def measure_again() -> None:
        second.append(measure_ceiling(tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=0.2,
                                      progress=say))

    again = threading.Thread(target=measure_again)
    try:
        with pytest.raises(ProbeStopped):
            measure_ceiling(tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=30.0, stop=stop)
        again.start()
        assert waiting.wait(STEP_BLOCKS_AT_MOST_S), said
        assert len(steps) == 1  # the second probe has built nothing and run no step
    finally:
        released.set()
        stopper.join()
    again.join(60.0)
    assert second and second[0].images_per_sec > 0
    assert wait_for_abandoned(30.0)


def test_a_run_reports_its_efficiency_once_a_ceiling_is_known():
    config = tiny_config(batch_size=32, max_steps=6)
    device = probe_device("cpu")
    assert run_to_end(config)[-1].summary.pipeline_efficiency is None
    ceiling = measure_ceiling(config, device, budget_seconds=0.5)
    store_ceiling(ceiling)
    summary = run_to_end(config)[-1].summary
    assert summary.ceiling_images_per_sec == ceiling.images_per_sec
    assert summary.pipeline_efficiency == pytest.approx(summary.images_per_sec / ceiling.images_per_sec)


def test_an_unreadable_cache_is_no_ceiling(isolated_workbench_home):
    cache_path().write_text("{not json", encoding="utf-8")
    assert cached_ceiling(tiny_config(), probe_device("cpu"), 10) is None


@pytest.mark.timeout(60)  # the old read blocked on the FIFO for good
def test_a_cache_that_is_a_fifo_or_nested_past_the_stack_is_no_ceiling(isolated_workbench_home):
    """Every run reads the cache: a FIFO there blocked each before its first step, and JSON nested 100,000 deep
    failed each with a RecursionError, where a ceiling is an extra, never a reason to fail."""
    import os

    os.mkfifo(cache_path())
    assert cached_ceiling(tiny_config(), probe_device("cpu"), 10) is None
    cache_path().unlink()
    cache_path().write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    assert cached_ceiling(tiny_config(), probe_device("cpu"), 10) is None


def test_workbench_ceiling_json_last_line_then_cached(capsys):
    assert main(["ceiling", *CPU_FLAGS, "--json"]) == 0
    out, err = capsys.readouterr()
    first = json.loads(out.strip().splitlines()[-1])
    assert first["ceiling_images_per_sec"] > 0 and first["cached"] is False
    assert first["key"]["batch_size"] == 8 and first["key"]["model"] == "small-cnn"
    assert "warming up small-cnn" in err
    assert main(["ceiling", *CPU_FLAGS, "--json"]) == 0
    second = json.loads(capsys.readouterr()[0].strip().splitlines()[-1])
    assert second["cached"] is True and second["ceiling_images_per_sec"] == first["ceiling_images_per_sec"]
    assert main(["ceiling", *CPU_FLAGS]) == 0
    assert capsys.readouterr()[0].startswith("ceiling  ")


class SignalNotTaken(Exception):
    """The signal reached the handler the test put before the command: the command never took it."""


def not_taken(signum, frame):
    raise SignalNotTaken(signal.Signals(signum).name)


@pytest.mark.parametrize("name, by", [("SIGTERM", "SIGTERM"), ("SIGHUP", "SIGHUP"), ("SIGINT", "the user")])
def test_sigterm_sighup_or_a_first_ctrl_c_stops_workbench_ceiling_with_no_figure(
        monkeypatch, capsys, isolated_workbench_home, name, by):
    """`workbench ceiling` left SIGTERM and SIGHUP to their default (killed mid-step, saying nothing) and took the
    first Ctrl-C as an abort (exit 130), where `workbench run` stops: it stops as the run does, exit 1, one line.
    The signal comes while the first warm-up step is in flight, which blocks until the command has answered."""
    in_step, released = threading.Event(), threading.Event()

    def signal_then_block(steps):
        if len(steps) == 1:
            in_step.set()
            os.kill(os.getpid(), getattr(signal, name))
            released.wait(STEP_BLOCKS_AT_MOST_S)

    steps = counting_steps(monkeypatch, signal_then_block)
    before = {signum: signal.signal(signum, not_taken) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        code = main(["ceiling", "--device", "cpu", "--batch-size", "8", "--budget", "30"])
    finally:
        released.set()
        for signum, handler in before.items():
            signal.signal(signum, handler)
    out, err = capsys.readouterr()
    assert in_step.is_set()
    assert code == 1, err
    assert out == ""
    assert err.splitlines()[-1] == (f"workbench ceiling: stopped by {by} while warming up (0 of {WARMUP_STEPS} "
                                    "warm-up steps done): no ceiling measured, nothing cached"), err
    assert "Traceback" not in err
    assert wait_for_abandoned(30.0)
    assert steps == [1]  # the probe started no step after the stop
    assert not (isolated_workbench_home / "ceilings.json").exists()


def test_workbench_ceiling_refuses_bad_settings_in_one_line(capsys):
    assert main(["ceiling", "--device", "cpu", "--precision", "fp16"]) == 2
    assert capsys.readouterr()[1].strip() == "workbench ceiling: fp16 needs a CUDA GPU"


def test_a_ceiling_is_kept_per_image_size_and_model_kwargs(isolated_workbench_home):
    # A 32×32 ceiling says nothing about 64×64 images (4× the pixels per image), nor one model's width about
    # another's: each is its own entry.
    device = probe_device("cpu")
    config = tiny_config(model="resnet34", batch_size=8)
    ceiling = Ceiling(images_per_sec=1000.0, steady=True, timed_steps=10, timed_seconds=1.0,
                      key=ceiling_key(config, device, 10), measured_at=0.0)
    store_ceiling(ceiling)
    assert cached_ceiling(config, device, 10).images_per_sec == 1000.0
    assert cached_ceiling(config.replace(image_size=64), device, 10) is None
    assert cached_ceiling(config.replace(model_kwargs='{"width_per_group": 32}'), device, 10) is None
    wide = config.replace(model_kwargs='{"width_per_group": 32}')
    store_ceiling(Ceiling(images_per_sec=500.0, steady=True, timed_steps=10, timed_seconds=1.0,
                          key=ceiling_key(wide, device, 10), measured_at=0.0))
    # The same kwargs written another way are the same model.
    assert cached_ceiling(config.replace(model_kwargs='{ "width_per_group":32 }'), device, 10).images_per_sec == 500.0


@pytest.mark.parametrize("spec, words", [
    ("mymodels:wrong_logits", "model mymodels:wrong_logits gives logits of shape (2, 11) for 2 images of 3×32×32"),
    ("mymodels:raises", "model mymodels:raises: raises(num_classes=10) raised ValueError: width must be even"),
    ("nosuchmodule:net", "model nosuchmodule:net: no module named 'nosuchmodule'"),
])
def test_a_model_spec_the_run_would_refuse_is_refused_by_the_ceiling_in_one_line(user_module, isolated_workbench_home,
                                                                                   capsys, spec, words):
    # Measured, a model with one logit too many would give a ceiling (the loss takes it) for a model no run trains.
    assert main(["ceiling", "--dataset", "synthetic", *CPU_FLAGS, "--model", spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"workbench ceiling: {words}"), err
    assert not (isolated_workbench_home / "ceilings.json").exists()
    with pytest.raises(ModelError, match="gives logits of shape"):
        measure_ceiling(tiny_config(model="mymodels:wrong_logits"), probe_device("cpu"), budget_seconds=0.5)


def test_a_ceiling_of_the_users_own_model_is_not_one_of_the_model_once_its_module_is_edited(
        user_module, isolated_workbench_home):
    """The key held the spec only: a ceiling measured before an edit of mymodels.py was read back after it, for a
    model the user had changed (and a run's efficiency was worked out against it). The module's content is in it."""
    device = probe_device("cpu")
    config = tiny_config(model="mymodels:tiny_net", model_kwargs='{"width": 4}', batch_size=8)
    store_ceiling(Ceiling(images_per_sec=1000.0, steady=True, timed_steps=10, timed_seconds=1.0,
                          key=ceiling_key(config, device, 10), measured_at=0.0))
    assert cached_ceiling(config, device, 10).images_per_sec == 1000.0
    source = user_module / "mymodels.py"
    source.write_text(source.read_text() + "\n\nWIDER = True  # an edit\n")
    assert cached_ceiling(config, device, 10) is None
    assert "model_source" not in ceiling_key(tiny_config(model="resnet18"), device, 10)  # built-ins keep their key


def read_only_file_system(monkeypatch):
    """Every write, rename and removal fails as on a read-only mount (EROFS), as root's writes do there too."""
    import errno
    import os
    from pathlib import Path

    def refused(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    for target, name in ((Path, "write_text"), (Path, "unlink"), (os, "replace")):
        monkeypatch.setattr(target, name, refused)


def test_a_home_that_cannot_take_the_ceiling_keeps_the_measurement_and_says_why(capsys, monkeypatch,
                                                                                 isolated_workbench_home):
    """On a read-only or full home `workbench ceiling` measured for its budget, then ended in a traceback (the
    temporary file's removal failed too, hiding the first error) and printed no figure."""
    from workbench.engine.ceiling_cache import CeilingNotKept

    ceiling = measure_ceiling(tiny_config(batch_size=8), probe_device("cpu"), budget_seconds=0.2)
    read_only_file_system(monkeypatch)
    with pytest.raises(CeilingNotKept, match=f"not kept in {cache_path()}: read-only file system"):
        store_ceiling(ceiling)
    assert main(["ceiling", *CPU_FLAGS]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("ceiling  ")  # the figure measured
    assert (f"workbench ceiling: note: the ceiling was measured but not kept in {cache_path()}: read-only file "
            "system; runs will not show their pipeline efficiency against it") in err
