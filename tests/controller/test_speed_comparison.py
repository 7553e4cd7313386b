"""The Runs tab's comparison of speed: repeats of one setting read as their median and its interval, a run alone
as its own window interval, and "faster" only where compare_rates' interval says so."""

from __future__ import annotations

import pytest

from builders import complete_run_events
from workbench.config import RunConfig
from workbench.controller.speed_comparison import sides, speed_lines
from workbench.history.store import HistoryStore

FP32 = RunConfig(device="cpu", dataset="synthetic", max_steps=10)
CHANNELS_LAST = FP32.replace(channels_last=True)


@pytest.fixture
def store():
    with HistoryStore.open() as opened:
        yield opened


def record(store, config, rate, sequence_id=None, low=None, high=None) -> int:
    recorder = store.start_run(config, source="cli", sequence_id=sequence_id)
    for event in complete_run_events(config, images_per_sec=rate, images_per_sec_low=low, images_per_sec_high=high):
        recorder.record(event)
    return recorder.run_id


def sweep_with_repeats(store, baseline, changed):
    """A sweep of channels_last with repeats, interleaved: baseline and changed rates, in the order run."""
    sequence = store.create_sequence("sweep", "sweep channels_last", {})
    for a, b in zip(baseline, changed):
        record(store, FP32, a, sequence)
        record(store, CHANNELS_LAST, b, sequence)
    return store.sequence_runs(sequence)


def test_two_groups_of_repeats_read_as_medians_with_intervals_and_a_real_gain_is_faster(store):
    runs = sweep_with_repeats(store, [1000, 1010, 990], [1310, 1300, 1320])
    found = sides(runs)
    assert [side.label for side in found] == [", ".join(f"#{r.id}" for r in runs[0::2]),
                                              ", ".join(f"#{r.id}" for r in runs[1::2])]
    lines = speed_lines(runs)
    assert lines[0] == f"A = {found[0].label}: 1,000 img/s (median of 3 runs, 990–1,010 (75 %))"
    assert lines[1] == f"B = {found[1].label}: 1,310 img/s (median of 3 runs, 1,300–1,320 (75 %))"
    assert lines[2].startswith("B against A: measured 1.31×: faster (") and lines[2].endswith("3+3 trials)")


def test_repeats_two_percent_apart_in_ten_percent_noise_are_within_the_noise(store):
    lines = speed_lines(sweep_with_repeats(store, [1000, 1100, 920], [1020, 940, 1090]))
    assert lines[2].startswith("B against A: measured 1.02×: within the noise (")


def test_one_run_of_each_shows_its_own_interval_and_draws_no_verdict(store):
    first = record(store, FP32, 1000.0, low=990.0, high=1010.0)
    second = record(store, CHANNELS_LAST, 1300.0, low=1290.0, high=1315.0)
    records = [store.get_run(first), store.get_run(second)]
    lines = speed_lines(records)
    assert lines[:2] == [f"A = #{first}: 1,000 img/s (one run; within it 990–1,010: the next run may differ by more)",
                         f"B = #{second}: 1,300 img/s (one run; within it 1,290–1,315: the next run may differ by more)"]
    # The windows' intervals do not overlap, yet one run of each cannot tell a change from run-to-run noise.
    assert lines[2].startswith("B against A: 1.30×, no verdict: one run each") and "faster" not in lines[2]
    assert speed_lines([records[0]]) == [f"Img/s of #{first}: 1,000 img/s (one run; within it 990–1,010: the next run may differ by more)."]
    assert speed_lines([]) == []


def test_repeats_from_two_sequences_are_compared_and_said_to_be_not_interleaved(store):
    first = store.create_sequence("repeats", "fp32 ×3", {})
    second = store.create_sequence("repeats", "channels_last ×3", {})
    for rate in (1000, 1010, 990):
        record(store, FP32, rate, first)
    for rate in (1310, 1300, 1320):
        record(store, CHANNELS_LAST, rate, second)
    lines = speed_lines(store.sequence_runs(first) + store.sequence_runs(second))
    assert lines[2].startswith("B against A: measured 1.31×: faster (")
    assert lines[2].endswith("measured in different sequences, not interleaved: a machine that changed between "
                             "them weighs in")


def test_one_run_picked_from_each_of_two_repeats_sequences_gives_the_sequences_verdict(store):
    """Issue 30 §6: one run from each of two `--repeats 3` said "no verdict: one run each"."""
    first = store.create_sequence("repeats", "fp32 ×3", {})
    second = store.create_sequence("repeats", "channels_last ×3", {})
    for rate in (1000, 1010, 990):
        record(store, FP32, rate, first)
    for rate in (1310, 1300, 1320):
        record(store, CHANNELS_LAST, rate, second)
    table = store.list_runs()
    picked = [store.sequence_runs(first)[1], store.sequence_runs(second)[0]]
    lines = speed_lines(picked, table)
    assert lines[0].startswith("A = ") and "median of 3 runs" in lines[0] and "median of 3 runs" in lines[1]
    assert lines[2].startswith("B against A: measured 1.31×: faster (")
    alone = record(store, FP32, 1200.0)  # a run of no sequence stays alone, whatever else the table holds
    assert [side.label for side in sides([store.get_run(alone)], store.list_runs())] == [f"#{alone}"]


def test_repeats_over_seeds_are_one_side_with_the_accuracy_spread(store):
    """Issue 30 §7: repeats over seeds, grouped in the Runs tab with the accuracy's spread."""
    sequence = store.create_sequence("repeats", "fp32 ×3 seeds", {})
    epochs = FP32.replace(max_steps=None, epochs=1)
    for seed, rate, accuracy in ((0, 1000, 0.41), (1, 1010, 0.45), (2, 990, 0.43)):
        recorder = store.start_run(epochs.replace(seed=seed), source="cli", sequence_id=sequence)
        for event in complete_run_events(epochs.replace(seed=seed), images_per_sec=rate, test_accuracy=accuracy):
            recorder.record(event)
    runs = store.sequence_runs(sequence)
    (side,) = sides(runs)
    assert len(side.records) == 3
    assert speed_lines(runs)[0].endswith("; test accuracy over 3 seeds: median 43.0%, from 41.0% to 45.0%.")


def test_a_side_that_finished_without_a_steady_window_is_not_said_to_have_no_finished_run(store):
    """A 3-step run has no steady window: "a side has no finished run" named a failure that never happened."""
    first = record(store, FP32, 1000.0, low=990.0, high=1010.0)
    short = record(store, CHANNELS_LAST, None)
    lines = speed_lines([store.get_run(first), store.get_run(short)])
    assert lines[1].startswith(f"B = #{short}: no finished run had a steady-state img/s (1 finished; no steady window")
    assert lines[2].startswith(f"B against A: not compared (#{short}: no finished run had a steady-state img/s")
