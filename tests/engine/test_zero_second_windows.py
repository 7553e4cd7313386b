"""A log window or an epoch that lasts 0 s on the clock (a clock that did not advance: a coarse timer, a fake one)
measured no images/sec and no share of time waiting for data. Its StepStats and EpochStats read 0.0 img/s and
0 % data wait, figures nobody measured that the plot, the history and the CSV took as a run that trained nothing
and never waited; now None, said as "n/a (… lasted 0 s on the clock)" by every line that prints them, left out of
the plot and the CSV, and ignored by the run's summary."""

from __future__ import annotations

import io
import math
import time
import types

import pytest
from builders import step
from engine_helpers import run_to_end, tiny_config

from workbench.engine import session
from workbench.engine.events import EpochStats, RunStarted, StepStats
from workbench.engine.summary import SummaryBuilder


@pytest.fixture(scope="module")
def events():
    """A tiny run on a CPU whose clock never advances: every window and epoch lasts 0 s."""
    stopped_clock = types.SimpleNamespace(perf_counter=lambda: 1000.0, time=time.time)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(session, "time", stopped_clock)
        return run_to_end(tiny_config(max_steps=4, log_every=2, evaluate=False))


def of_type(events, kind):
    return [event for event in events if isinstance(event, kind)]


def test_a_window_and_an_epoch_of_zero_seconds_read_no_rate(events):
    windows, epochs = of_type(events, StepStats), of_type(events, EpochStats)
    assert len(windows) == 2 and epochs
    assert [(stats.window_seconds, stats.images_per_sec, stats.data_wait_fraction) for stats in windows] == [
        (0.0, None, None)] * 2
    assert [(stats.train_seconds, stats.images_per_sec, stats.data_wait_fraction) for stats in epochs] == [
        (0.0, None, None)] * len(epochs)
    assert events[-1].status == "finished" and events[-1].summary.images_per_sec is None


def test_the_progress_lines_say_why_there_is_no_rate(events):
    from workbench.cli.progress_line import ProgressLine
    from workbench.controller.messages import epoch_text, progress_text

    window, epoch = of_type(events, StepStats)[-1], of_type(events, EpochStats)[-1]
    assert "· images/s n/a (the window lasted 0 s on the clock)" in progress_text(window, ceiling=2000.0)
    assert epoch_text(epoch).endswith("images/s n/a (the epoch lasted 0 s on the clock), waiting for data n/a")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    line = ProgressLine(terminal)
    for event in events[:-1]:
        line.show(event)
    assert "img/s n/a (the window lasted 0 s on the clock) wait n/a ETA" in terminal.getvalue()
    assert "img/s n/a (the epoch lasted 0 s on the clock), data wait n/a (the whole epoch" in terminal.getvalue()
    assert " 0 img/s" not in terminal.getvalue() and "wait 0%" not in terminal.getvalue()


def test_the_history_keeps_no_rate_for_them_and_the_csv_has_no_row(events, tmp_path):
    from workbench.history.export import export_steps_csv
    from workbench.history.store import HistoryStore

    started = of_type(events, RunStarted)[0]
    with HistoryStore.open(tmp_path / "home") as store:
        recorder = store.start_run(started.config, name="stopped clock")
        for event in events:
            recorder.record(event)
        windows, epochs = store.step_metrics(recorder.run_id), store.epoch_metrics(recorder.run_id)
        for name in ("images_per_sec", "data_wait_fraction"):
            assert len(windows[name]) == 2 and all(math.isnan(value) for value in windows[name])
            assert math.isnan(epochs[name][0])
        export_steps_csv(store, tmp_path / "steps.csv")
    metrics = {line.split(",")[2] for line in (tmp_path / "steps.csv").read_text().splitlines()[1:]}
    assert "loss" in metrics and "data_wait_seconds" in metrics
    assert not metrics & {"images_per_sec", "epoch_images_per_sec", "data_wait_fraction", "epoch_data_wait_fraction"}


def test_the_summary_ignores_a_window_without_a_rate():
    """The run's rate is its steady windows' samples over their seconds: a 0 s window's images count, its missing
    rate is never averaged in (a coarse clock gives its time to the next window)."""
    import dataclasses

    builder = SummaryBuilder()
    stopped = dataclasses.replace(step(3), window_seconds=0.0, images_per_sec=None)
    for stats in (step(1), step(2), stopped, step(4)):
        builder.add(stats)
    summary = builder.build("finished")
    assert summary.images_per_sec == pytest.approx(3 * 32 / (2 * 0.04))


def test_ranks_merged_over_zero_seconds_read_no_rate():
    """Two ranks' windows of 0 s merge to no rate (it read 0.0); an epoch where one rank read none has no known sum
    of images, so none either (it read the other rank's images over the epoch's seconds), and no highest data wait
    (that rank's may be the highest)."""
    import dataclasses

    from workbench.engine.distributed.aggregate import combine_epochs, combine_steps

    stopped = dataclasses.replace(step(2), window_seconds=0.0, images_per_sec=None)
    merged = combine_steps([stopped, stopped], [32, 32])
    assert merged.images_per_sec is None and [rank.images_per_sec for rank in merged.ranks] == [None, None]
    timed = EpochStats(epoch=1, epochs=1, step=2, train_loss=1.0, train_accuracy=0.5, test_loss=1.0,
                       test_accuracy=0.5, images_per_sec=100.0, data_wait_fraction=0.1, train_seconds=2.0,
                       eval_seconds=0.5)
    assert combine_epochs([timed, timed]).images_per_sec == pytest.approx(100.0 * 2)
    untimed = dataclasses.replace(timed, images_per_sec=None, train_seconds=0.0)
    untimed = dataclasses.replace(untimed, data_wait_fraction=None)
    for ranks in ([timed, untimed], [untimed, untimed]):
        merged_epoch = combine_epochs(ranks)
        assert (merged_epoch.images_per_sec, merged_epoch.data_wait_fraction) == (None, None)
    assert combine_epochs([timed, timed]).data_wait_fraction == 0.1
