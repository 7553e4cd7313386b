"""Issue 30 item 3: a run has one throughput figure, img/s (samples ÷ seconds over the steady windows), the same in
the window's banner, the Runs table and the CLI, with its definition one hover away and its interval labelled as
within the run."""

from builders import TINY_RUN, ended, run_once, started
from PySide6.QtCore import Qt

from workbench.cli.run_summary_text import images_per_sec_text
from workbench.engine.run_summary import IMAGES_PER_SEC_MEANS, WITHIN_ONE_RUN, RunSummary
from workbench.gui.runs_table import COLUMNS, RunsTableModel
from workbench.history.metrics import format_metric

# Issue 30's run #7: its median window read 52 img/s, its samples ÷ seconds 36.
FIGURES = dict(images_per_sec=36.4, images_per_sec_low=30.2, images_per_sec_high=41.9)


def run_with_one_figure(config, stop):
    yield started(config)
    yield ended("finished", **FIGURES)


def test_the_banner_shows_the_runs_one_figure_and_says_what_it_is(qtbot, make_window):
    window = make_window(run_function=run_with_one_figure)
    run_once(qtbot, window, TINY_RUN)
    banner = window.run_message
    assert "36 img/s" in banner.text() and "median" not in banner.text()
    assert IMAGES_PER_SEC_MEANS in banner.toolTip() and WITHIN_ONE_RUN in banner.toolTip()


def test_the_runs_table_says_the_same_figure_under_the_same_definition():
    column = next(column for column in COLUMNS if column.title == "Img/s")
    header = RunsTableModel().headerData(COLUMNS.index(column), Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
    assert header == IMAGES_PER_SEC_MEANS
    assert format_metric("rate", FIGURES["images_per_sec"]) == "36"


def test_the_cli_labels_the_interval_within_the_run():
    text = images_per_sec_text(RunSummary(status="finished", **FIGURES))
    assert text.startswith("36 over the steady windows")
    assert "within this run 30–42" in text and "the next run may differ by more" in text and "median" not in text

