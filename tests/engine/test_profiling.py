"""Profiler samples in a real CPU run: top ops, a trace, on request, nothing outside a sample."""

import gzip
import json
import threading
from pathlib import Path

import pytest
import torch
from engine_helpers import run_to_end, tiny_config

from workbench.engine import run
from workbench.engine.events import ProfileSample, StepStats
from workbench.engine.profiling import (
    CPU_STEPS,
    NEVER,
    OPS_STEPS,
    PACE_WINDOWS,
    TIMELINE_STEPS,
    WARMUP_STEPS,
    ProfileSampler,
    _phase_lengths,
)
from workbench.engine.requests import ProfileRequests


def profiler_on() -> bool:
    return torch._C._autograd._profiler_enabled()


def test_a_cpu_sample_gives_top_ops_a_trace_and_no_gpu_figures(isolated_workbench_home):
    events = run_to_end(tiny_config(max_steps=None, synthetic_size=320, profile=True))  # 10 steps
    [sample] = [e for e in events if isinstance(e, ProfileSample)]
    assert (sample.first_step, sample.last_step, sample.steps) == (7, 9, CPU_STEPS)
    assert sample.window_seconds > 0 and sample.images_per_sec > 0
    names = [op.name for op in sample.top_ops]
    assert any(name.startswith("aten::") for name in names)
    assert not any(name.startswith(("workbench.", "ProfilerStep#")) for name in names)  # markers, not ops
    assert all(op.seconds > 0 and op.count > 0 for op in sample.top_ops)
    assert sample.kernel_busy_seconds is None and sample.idle_waiting_for_host_seconds is None
    assert sample.gpu_unavailable_reason == "a CPU run has no GPU timeline"
    trace = Path(sample.trace_path)
    assert trace.is_relative_to(isolated_workbench_home / "traces") and trace.name.endswith(".trace.json.gz")
    with gzip.open(trace, "rt", encoding="utf-8") as file:
        names_in_trace = {event.get("name") for event in json.load(file)["traceEvents"]}
    assert {"ProfilerStep#7", "workbench.data_wait"} <= names_in_trace
    summary = events[-1].summary
    assert summary.profile_samples == 1 and summary.top_ops and summary.trace_paths == (sample.trace_path,)
    assert summary.kernel_busy_fraction is None
    assert summary.gpu_timeline_unavailable_reason == "a CPU run has no GPU timeline"


def test_the_profiler_runs_only_inside_a_sample():
    states = []
    sample_at = None
    for event in run(tiny_config(max_steps=None, synthetic_size=320, log_every=1, profile=True)):
        if isinstance(event, StepStats):
            states.append((event.step, profiler_on()))
        elif isinstance(event, ProfileSample):
            sample_at = (event.first_step, event.last_step)
    assert sample_at == (7, 9)
    on = [step for step, enabled in states if enabled]
    assert on == [7, 8, 9]  # recording from the sample's first step to its last
    assert not profiler_on()


def test_without_profile_no_sample_and_no_profiler():
    events = []
    for event in run(tiny_config(max_steps=None, synthetic_size=320, log_every=1)):
        assert not profiler_on()
        events.append(event)
    assert not any(isinstance(e, ProfileSample) for e in events)
    assert events[-1].summary.profile_samples == 0 and events[-1].summary.gpu_timeline_unavailable_reason is None


def test_a_sample_on_request_from_another_thread():
    requests = ProfileRequests()
    samples = []
    for event in run(tiny_config(max_steps=None, synthetic_size=640), profile_requests=requests):  # 20 steps
        if isinstance(event, StepStats) and event.step == 2:
            thread = threading.Thread(target=requests.request)
            thread.start()
            thread.join()
        if isinstance(event, ProfileSample):
            samples.append(event)
    assert len(samples) == 1
    assert samples[0].first_step == 3  # the next boundary after the request
    assert not requests.pending


def test_stopping_mid_sample_leaves_no_profiler_running():
    stop = threading.Event()
    events = []
    for event in run(tiny_config(max_steps=None, synthetic_size=320, log_every=1, profile=True), stop.is_set):
        events.append(event)
        if isinstance(event, StepStats) and event.step == 8:
            assert profiler_on()
            stop.set()
    assert events[-1].status == "stopped"
    assert not any(isinstance(e, ProfileSample) for e in events)  # a cut sample is dropped, not half-shown
    assert not profiler_on()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):  # free for the next user
        torch.ones(2) + 1


def test_the_summary_leaves_sampled_windows_out_of_images_per_sec():
    events = run_to_end(tiny_config(max_steps=None, synthetic_size=320, log_every=1, profile=True))
    windows = [e for e in events if isinstance(e, StepStats)]
    steady = [w for w in windows[1:] if not 7 <= w.step <= 10]  # the sample's steps and the one after it
    expected = sum(w.images_per_sec * w.window_seconds for w in steady) / sum(w.window_seconds for w in steady)
    assert events[-1].summary.images_per_sec == pytest.approx(expected)


# -- scheduling -----------------------------------------------------------------------------------------


def sampler(device="cuda", steps_per_epoch=100, total_steps=1000, every=300, requests=None):
    return ProfileSampler(torch.device(device), 32, steps_per_epoch, total_steps, every, Path("unused"), requests)


def test_phases_fit_short_epochs():
    full = WARMUP_STEPS + TIMELINE_STEPS + OPS_STEPS
    assert _phase_lengths(True, 100) == [("warmup", WARMUP_STEPS), ("timeline", TIMELINE_STEPS), ("ops", OPS_STEPS)]
    assert sum(n for _, n in _phase_lengths(True, full)) == full - 1  # must end one step before the epoch
    assert _phase_lengths(True, 5) == [("warmup", 1), ("timeline", 2), ("ops", 1)]
    assert _phase_lengths(True, 1) == [("timeline", 1)]
    assert _phase_lengths(False, 100) == [("cpu", CPU_STEPS)]


def test_samples_are_planned_inside_one_epoch():
    s = sampler()
    assert s.next_step == 20  # FIRST_SAMPLE_STEP
    length = s.length
    assert s._next_fit(100 - length) == 200 - 100  # would touch the epoch's end: the next epoch's start
    assert s._next_fit(100 - length - 1) == 100 - length - 1
    assert s._next_fit(1000 - length) == NEVER  # past the run's end
    assert sampler(every=None).next_step == NEVER  # no periodic samples without profile


def test_a_request_wakes_the_loop_at_once():
    requests = ProfileRequests()
    s = sampler(every=None, requests=requests)
    assert s.next_step == NEVER
    requests.request()
    assert s.next_step == 0  # the loop's next compare calls at_step
    s.close()
    assert requests._wake is None



def test_a_sample_carries_the_runs_own_pace_from_the_last_windows_no_sample_touched():
    # log windows of 4 steps: [1-4] warm-up (not a pace), then steady windows until a sample in steps 20-31.
    events = run_to_end(tiny_config(max_steps=None, synthetic_size=640, log_every=4, profile=True,
                                    profile_every=100))
    samples = [e for e in events if isinstance(e, ProfileSample)]
    windows = [e for e in events if isinstance(e, StepStats)]
    assert samples
    sample = samples[0]
    before = [w for w in windows if w.step < sample.first_step]
    steady = before[1:][-PACE_WINDOWS:]
    assert len(steady) >= 2, "the run had steady windows before its first sample"
    assert sample.unprofiled_windows == len(steady)
    assert sample.unprofiled_step_seconds == pytest.approx(sum(w.window_seconds for w in steady) / (4 * len(steady)))
    assert sample.unprofiled_data_wait_seconds == pytest.approx(
        sum(w.data_wait_seconds for w in steady) / (4 * len(steady)))


def test_the_pace_is_seconds_over_steps_of_the_last_few_steady_windows():
    sampler = ProfileSampler(torch.device("cpu"), 8, 100, 100, every=None, trace_dir=Path("/nonexistent"))
    sampler.note_window(1.0, 10, 0.5)  # the first window: cuDNN autotuning, worker start-up
    for seconds in (0.010, 0.012, 0.014):  # one step each: 10, 12 and 14 ms
        sampler.note_window(seconds, 1, 0.001)
    assert sampler.pace() == (pytest.approx(0.012), pytest.approx(0.001), 3)
    sampler.note_window(0.4, 20, 0.0)  # windows weigh by their steps: 20 ms a step over 20 steps
    assert sampler.pace() == (pytest.approx(0.436 / 23), pytest.approx(0.003 / 23), 4)
    sampler.note_window(0.02, 1, 0.0)  # the oldest (10 ms) leaves
    assert sampler.pace()[2] == PACE_WINDOWS == 4
    assert sampler.pace()[0] == pytest.approx(0.446 / 23)


def test_the_sampler_takes_no_pace_from_the_first_window_or_one_a_sample_touched():
    sampler = ProfileSampler(torch.device("cpu"), 8, 100, 100, every=None, trace_dir=Path("/nonexistent"))
    sampler.note_window(1.0, 10, 0.5)  # the first window: cuDNN autotuning, worker start-up
    assert sampler.pace() is None
    sampler.note_window(0.2, 10, 0.1)
    assert sampler.pace() == (pytest.approx(0.02), pytest.approx(0.01), 1)
    sampler._window_touched = True  # a sample ran during the next window
    sampler.note_window(0.9, 10, 0.0)
    assert sampler.pace() == (pytest.approx(0.02), pytest.approx(0.01), 1)


def test_two_runs_in_one_second_keep_their_own_traces_and_deleting_one_leaves_the_other(
        isolated_workbench_home, monkeypatch):
    from workbench.engine import profiling
    from workbench.history.store import HistoryStore

    monkeypatch.setattr(profiling.time, "strftime", lambda *args: "20261124-120000")  # one second for both
    traces = []
    with HistoryStore.open() as store:
        for _ in range(2):  # one process: the same pid
            config = tiny_config(max_steps=None, synthetic_size=320, profile=True)
            recorder = store.start_run(config, source="cli")
            for event in run(config):
                recorder.record(event)
                if isinstance(event, ProfileSample):
                    traces.append((recorder.run_id, Path(event.trace_path)))
        (first_id, first), (_, second) = traces
        assert first.parent != second.parent  # before: both step-0000007.trace.json.gz in one folder
        assert first.exists() and second.exists()
        store.delete(first_id)
    assert not first.exists() and not first.parent.exists()
    assert second.exists()  # before: deleted with the first run
    with gzip.open(second) as file:
        assert json.load(file)
