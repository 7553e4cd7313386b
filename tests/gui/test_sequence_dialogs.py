"""The dialogs that start a sweep, a search and a largest-batch search: what they ask, what they refuse."""

from builders import TINY_RUN
from PySide6.QtWidgets import QDialogButtonBox

from workbench.experiments.sweep import SweepAxis
from workbench.gui.sequence_dialogs import MaxBatchDialog, SweepDialog, TuneDialog, suggested_values


def ok_button(dialog):
    return dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)


def choose(row, field: str, values: str) -> None:
    row.field.setCurrentIndex(row.field.findData(field))
    row.values.setText(values)


def test_a_sweep_of_one_setting_over_steps(qtbot):
    dialog = SweepDialog(TINY_RUN)
    qtbot.addWidget(dialog)
    assert dialog.first.values.text() == "0,1,2,4"  # num_workers first, with a starting list
    choose(dialog.first, "batch_size", "16, 32,64")
    dialog.steps.setValue(30)
    request, problems = dialog.request()
    assert problems == [] and ok_button(dialog).isEnabled()
    assert request.axes == (SweepAxis("batch_size", (16, 32, 64)),) and request.length == {"max_steps": 30}
    assert request.repeats == 1
    dialog.repeats.setValue(3)  # every value 3 times, interleaved: error bars and a verdict
    assert dialog.request()[0].repeats == 3


def test_a_grid_over_whole_epochs(qtbot):
    dialog = SweepDialog(TINY_RUN)
    qtbot.addWidget(dialog)
    assert not dialog.second.isEnabled()
    dialog.second_check.setChecked(True)
    choose(dialog.second, "precision", "fp32,bf16")
    dialog.by_epochs.setChecked(True)
    dialog.epochs.setValue(2)
    request, problems = dialog.request()
    assert problems == []
    assert [axis.field for axis in request.axes] == ["num_workers", "precision"]
    assert request.length == {"epochs": 2, "max_steps": None}


def test_bad_values_disable_the_sweep_and_say_why(qtbot):
    dialog = SweepDialog(TINY_RUN)
    qtbot.addWidget(dialog)
    choose(dialog.first, "batch_size", "16,abc")
    assert not ok_button(dialog).isEnabled()
    assert "batch_size takes whole numbers (got 'abc')" in dialog.problems.text()
    choose(dialog.first, "batch_size", "16,32")
    dialog.second_check.setChecked(True)
    choose(dialog.second, "batch_size", "8")
    assert not ok_button(dialog).isEnabled() and "must differ" in dialog.problems.text()


def test_suggested_values_follow_the_setting():
    assert suggested_values("precision", TINY_RUN) == "fp32,fp16,bf16"
    assert suggested_values("pin_memory", TINY_RUN) == "off,on"
    assert suggested_values("batch_size", TINY_RUN) == "16,32,64"


def test_the_search_leaves_what_is_learned_alone_unless_ticked(qtbot):
    dialog = TuneDialog()
    qtbot.addWidget(dialog)
    assert dialog.request().allow == frozenset() and dialog.request().budget_seconds == 300
    dialog.allow["batch_size"].setChecked(True)
    dialog.budget.setValue(0)
    assert dialog.request().allow == {"batch_size"} and dialog.request().budget_seconds is None


def test_the_largest_batch_budget_is_optional(qtbot):
    dialog = MaxBatchDialog()
    qtbot.addWidget(dialog)
    assert dialog.budget_bytes() is None
    dialog.budget.setValue(1.5)
    assert dialog.budget_bytes() == 3 * 2**29
