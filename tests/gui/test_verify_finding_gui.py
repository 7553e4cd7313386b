"""The GPU time tab's Verify: a button beside each finding's Apply; clicked on a finished tiny CPU run's finding it
runs the verification on the training thread, and the finding then reads its measurement (Apply stays)."""

from __future__ import annotations

import dataclasses
import re
import sqlite3

import pytest
from builders import TINY_RUN

from workbench.engine.events import RunEnded
from workbench.engine.run_summary import Finding, MeasuredChange
from workbench.gui.breakdown_view import BreakdownView

HEAD = "Compute-bound: kernels ran 90% of the sampled time."
FINDING = Finding(kind="compute-bound", headline=HEAD, text=f"{HEAD} Try channels_last=true: the tensor cores' layout.",
                  figure=0.9, figure_name="kernel_busy_fraction", threshold=0.8, field="channels_last", value=True)
NO_SETTING = Finding(kind="compute-bound", headline=HEAD, text=f"{HEAD} Only a faster GPU is left.", figure=0.9,
                     figure_name="kernel_busy_fraction", threshold=0.8)


def test_a_verify_button_beside_each_apply_asks_for_that_finding(qtbot):
    view = BreakdownView()
    qtbot.addWidget(view)
    measured = dataclasses.replace(FINDING, measured=MeasuredChange(speedup=0.86, low=0.8, high=0.9, verdict="slower",
                                                                 baseline_trials=3, changed_trials=3))
    view.set_findings((measured, NO_SETTING))
    assert [button.text() for button in view.verify_buttons] == ["Verify"]
    assert len(view.apply_buttons) == 1  # the finding without a setting has neither
    assert "Measured here before: measured 0.86×: slower here, not recommended" in view.verify_buttons[0].toolTip()
    with qtbot.waitSignal(view.verify_requested) as signal:
        view.verify_buttons[0].click()
    assert signal.args == [measured]


def with_the_finding(config, stop):
    """The real engine's run, its findings led by one that names a setting (a CPU run's rules name none)."""
    from workbench.gui.engine_calls import engine_run

    for event in engine_run(config, stop):
        if isinstance(event, RunEnded) and event.status == "finished":
            summary = dataclasses.replace(event.summary, findings=(FINDING, *event.summary.findings))
            event = dataclasses.replace(event, summary=summary)
        yield event


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_verify_on_a_finished_tiny_cpu_run_measures_the_finding(qtbot, make_window, isolated_workbench_home,
                                                                monkeypatch):
    from real_runs import run_to_end

    monkeypatch.setattr("workbench.experiments.verify.MAX_TRIALS", 3)  # the window's budget, kept short here

    from workbench.engine import probe_device
    from workbench.experiments.recording import HistoryRecording

    window = make_window(run_function=with_the_finding, probe_function=lambda: probe_device("cpu"),
                         recordings=lambda: HistoryRecording(source="gui"))
    window.show()
    qtbot.waitUntil(lambda: window.controller.device is not None, timeout=30_000)
    ended = run_to_end(qtbot, window, TINY_RUN)
    assert ended.status == "finished"
    qtbot.waitUntil(lambda: len(window.breakdown.verify_buttons) == 1, timeout=10_000)

    with qtbot.waitSignal(window.training_thread.finished, timeout=300_000):
        window.breakdown.verify_buttons[0].click()
        assert window.stop_button.isEnabled()  # Stop ends it, as any job

    def remedy() -> str:  # a measured loss ranks last: find the finding by its words
        return next(label.text() for label in window.breakdown.remedy_labels if "channels_last" in label.text())

    qtbot.waitUntil(lambda: "measured" in remedy(), timeout=30_000)
    remedy = remedy()
    # 3 trials of each side, or more where the interval had not decided (up to the budget of 8)
    trials = re.search(r"(\d)\+(\d) trials", remedy)
    assert remedy.startswith("• Try channels_last=true: the tensor cores' layout; measured ") and trials
    each = int(trials.group(1))
    assert trials.group(1) == trials.group(2) and 3 <= each <= 8
    assert [button.text() for button in window.breakdown.apply_buttons] == ["Apply channels_last=true"]  # Apply stays
    assert window.status_line.text().startswith("Verification finished: channels_last=on measured ")
    with sqlite3.connect(isolated_workbench_home / "history.sqlite3") as conn:
        assert conn.execute("SELECT kind, COUNT(*) FROM sequences GROUP BY kind").fetchall() == [("verify", 1)]
        assert conn.execute("SELECT COUNT(*) FROM runs WHERE sequence_id IS NOT NULL").fetchone()[0] == 2 * each
        assert conn.execute("SELECT field, value_json FROM measured_changes").fetchall() == [("channels_last", "true")]
