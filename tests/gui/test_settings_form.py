"""The settings form: RunConfig ⇄ widgets both ways, inline problems, hardware-disabled choices."""

import html
from dataclasses import fields

import pytest
from builders import CPU, GPU, OLD_GPU
from own_images import zip_of_user_models
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox, QWidget

from workbench.config import FIELD_NAMES, RANGES, RunConfig
from workbench.gui.settings_form import SettingsForm

# Every field away from its default, each value valid.
CHANGED = RunConfig(
    dataset="cifar100", data_path="/data/cifar", synthetic_size=777, pipeline="gpu-resident", augment="none",
    num_workers=3, pin_memory=False, non_blocking=False, persistent_workers=False, prefetch_factor=5,
    worker_start_method="fork", decode="gpu", skip_bad_images=True, model="mymodels:tiny_net", model_kwargs='{"width": 8}', image_size=64, optimizer="adamw", lr=0.00125, weight_decay=0.0001,
    label_smoothing=0.1, max_grad_norm=0.5, precision="bf16", channels_last=True, compile="reduce-overhead",
    fused_optimizer=True, cudnn_benchmark=False, epochs=7,
    max_steps=300, batch_size=96, accumulation_steps=3, seed=1234, device="cuda", devices=4, log_every=25, evaluate=False,
    profile=True,
    profile_every=250, save_model="/tmp/model.pt",
)


@pytest.fixture
def form(qtbot):
    widget = SettingsForm()
    qtbot.addWidget(widget)
    return widget


def test_every_field_has_a_named_widget_with_a_tooltip(form):
    for name in FIELD_NAMES:
        editor = form.findChild(QWidget, name)
        assert isinstance(editor, (QComboBox, QCheckBox, QSpinBox, QDoubleSpinBox, QLineEdit)), name
        assert editor is form.editor(name)
        assert name in editor.toolTip() and len(editor.toolTip()) > 60


def test_changed_config_moves_every_field_from_its_default():
    assert all(getattr(CHANGED, f.name) != f.default for f in fields(RunConfig))


@pytest.mark.parametrize("config", [RunConfig(), CHANGED, RunConfig(max_steps=None, lr=0.5, weight_decay=0.0)])
def test_config_to_form_to_config(form, config):
    form.set_config(config)
    assert form.config() == config


@pytest.mark.parametrize("awkward", [1 / 3, 1e-11, 0.00012345678901])
def test_every_float_setting_comes_back_from_the_form_exactly(form, awkward):
    """Load settings rounded each float to 10 decimals: weight_decay 1e-11 came back 0 (weight decay off), lr 1/30
    came back 0.0333333333, and the status still said "Settings loaded"."""
    floats = [f.name for f in fields(RunConfig) if isinstance(form.editor(f.name), QDoubleSpinBox)]
    assert {"lr", "weight_decay", "label_smoothing", "max_grad_norm"} <= set(floats)
    for name in floats:
        low, high = RANGES[name]
        config = RunConfig().replace(**{name: min(max(awkward, low), high)})
        form.set_config(config)
        assert getattr(form.config(), name) == getattr(config, name), name


def test_an_arrow_step_lands_on_a_short_number(form):
    lr = form.editor("lr")
    lr.setValue(0.05)
    lr.stepBy(1)
    assert form.config().lr == 0.051 and lr.text() == "0.051"
    lr.stepBy(-1)
    assert form.config().lr == 0.05


def test_form_edits_make_the_config(form, qtbot):
    form.editor("batch_size").setValue(256)
    form.editor("accumulation_steps").setValue(2)
    form.editor("model").setCurrentIndex(form.editor("model").findData("mobilenet_v3_small"))
    form.editor("channels_last").setChecked(True)
    with qtbot.waitSignal(form.config_changed) as changed:
        form.editor("max_steps").setValue(50)
    assert changed.args[0] == form.config()
    assert form.config() == RunConfig(batch_size=256, accumulation_steps=2, model="mobilenet_v3_small",
                                      channels_last=True, max_steps=50)
    form.editor("max_steps").setValue(0)  # the spin box's bottom is "no limit"
    assert form.editor("max_steps").text() == "no limit" and form.config().max_steps is None


def test_float_fields_show_short_numbers_and_accept_typed_ones(form, qtbot):
    form.set_config(RunConfig(lr=0.05, weight_decay=5e-4))
    assert form.editor("lr").text() == "0.05"
    assert form.editor("weight_decay").text() == "0.0005"
    lr = form.editor("lr")
    lr.lineEdit().selectAll()
    qtbot.keyClicks(lr.lineEdit(), "2e-3")
    lr.interpretText()
    assert form.config().lr == pytest.approx(0.002)


def test_derived_facts_update_live(form):
    form.set_config(RunConfig(synthetic_size=1000, batch_size=100, accumulation_steps=1, epochs=2))
    assert "Effective batch 100" in form.derived_label.text()
    assert "10 steps per epoch" in form.derived_label.text() and "20 steps in all" in form.derived_label.text()
    form.editor("accumulation_steps").setValue(4)
    assert "Effective batch 400 (100 × 4 accumulated)" in form.derived_label.text()


def test_invalid_combination_is_shown_inline_and_marks_the_fields(form):
    form.set_config(RunConfig(pipeline="gpu-resident", augment="cpu"))
    assert form.problems() == ["augment=cpu needs pipeline=dataloader (the workers do the CPU augmentation)"]
    assert not form.problems_label.isHidden()
    assert "augment=cpu needs pipeline=dataloader" in form.problems_label.text()
    assert form.editor("augment").property("invalid") and form.editor("pipeline").property("invalid")
    assert not form.editor("batch_size").property("invalid")
    form.editor("augment").setCurrentIndex(form.editor("augment").findData("gpu"))
    assert form.problems() == [] and form.problems_label.isHidden()
    assert not form.editor("augment").property("invalid")


def test_fields_without_effect_are_greyed_with_the_reason(form):
    form.set_config(RunConfig(dataset="synthetic", num_workers=0))
    assert not form.editor("data_path").isEnabled()
    assert not form.editor("prefetch_factor").isEnabled()
    assert "needs num_workers ≥ 1" in form.editor("prefetch_factor").toolTip()
    form.editor("num_workers").setValue(2)
    assert form.editor("prefetch_factor").isEnabled()


def test_cpu_disables_fp16_bf16_and_cuda_with_reasons(form):
    form.set_device(CPU)
    precision = form.editor("precision").model()
    states = {precision.item(i).data(256): precision.item(i) for i in range(precision.rowCount())}
    assert states["fp32"].isEnabled()
    assert not states["fp16"].isEnabled() and "needs a CUDA GPU" in states["fp16"].toolTip()
    assert not states["bf16"].isEnabled() and "bf16" in states["bf16"].toolTip()
    device = form.editor("device").model()
    assert [device.item(i).isEnabled() for i in range(device.rowCount())] == [True, False, True]
    # A stored choice the machine cannot run stays selected and blocks the start, with the reason.
    form.set_config(RunConfig(precision="fp16"))
    assert form.config().precision == "fp16"
    assert form.problems() == ["fp16 needs a CUDA GPU"]
    assert form.editor("precision").property("invalid")


def test_gpu_without_native_bf16_disables_only_bf16(form):
    form.set_device(OLD_GPU)
    model = form.editor("precision").model()
    assert [model.item(i).isEnabled() for i in range(model.rowCount())] == [True, True, False]
    form.set_device(GPU)
    assert all(model.item(i).isEnabled() for i in range(model.rowCount()))


@pytest.mark.parametrize("contents, words", [
    ("text", "is not a valid npz archive"),
    ("wrong keys", "has images, labels; it needs train_images"),
])
def test_a_bad_npz_is_refused_from_its_headers_before_start(form, tmp_path, contents, words):
    """Checked as the path is typed, without loading the arrays: the form says why and marks the field."""
    import numpy as np

    path = tmp_path / "data.npz"
    if contents == "text":
        path.write_text("not an archive")
    else:
        np.savez(path, images=np.zeros((8, 32, 32, 3), np.uint8), labels=np.zeros(8, np.uint8))
    form.set_config(RunConfig(dataset="npz", data_path=str(path), batch_size=4))
    [problem] = form.problems()
    assert words in problem
    assert not form.problems_label.isHidden() and words in form.problems_label.text()
    assert form.editor("data_path").property("invalid") is True
    np.savez(path, train_images=np.zeros((8, 32, 32, 3), np.uint8), train_labels=np.zeros(8, np.uint8),
             test_images=np.zeros((2, 32, 32, 3), np.uint8), test_labels=np.zeros(2, np.uint8))
    form.editor("data_path").setText(str(path) + " ")  # an edit re-checks the (now good) file
    assert form.problems() == [] and form.editor("data_path").property("invalid") is False


def test_saving_the_model_over_the_zip_its_module_is_imported_from_is_refused_in_the_form(form, tmp_path,
                                                                                         monkeypatch):
    """The form's check is the CLI's (exit 2 there): a zip on the path holding the model's module was not seen,
    and the run replaced the archive with the weights."""
    archive = zip_of_user_models(tmp_path, "zipped_form_victim", monkeypatch)
    form.set_config(RunConfig(model="zipped_form_victim:tiny_net", save_model=str(archive)))
    [problem] = form.problems()
    words = f"is the zip archive the model's module is imported from ({archive}): the weights would replace your code"
    assert words in problem
    assert not form.problems_label.isHidden() and html.escape(words) in form.problems_label.text()
    assert form.editor("save_model").property("invalid") is True


def test_typing_past_the_maximum_is_said_and_set_to_the_maximum_never_cut(form, qtbot):
    """A plain spin box drops the keystroke that goes past 65,536: 70000 silently became 7,000."""
    from PySide6.QtCore import Qt

    form.show()
    qtbot.waitExposed(form)
    batch = form.editor("batch_size")
    batch.setFocus()
    batch.selectAll()
    qtbot.keyClicks(batch, "70000")
    assert batch.text() == "70000"  # what was typed stays in view ...
    assert form.range_notices == ["Batch size: 70,000 is above the largest allowed, 65,536; it will be set to 65,536."]
    assert form.range_notice_label.isVisible() and batch.property("outOfRange") is True
    qtbot.keyClick(batch, Qt.Key.Key_Return)
    assert batch.value() == 65_536 and form.config().batch_size == 65_536  # ... then the maximum, said
    assert form.range_notices == ["Batch size: 70,000 is above the largest allowed, 65,536: set to 65,536."]
    assert batch.property("outOfRange") is False
    batch.selectAll()
    qtbot.keyClicks(batch, "256")  # a good number clears the notice
    assert form.range_notices == [] and form.range_notice_label.isHidden()
    assert form.config().batch_size == 256


def test_a_float_typed_out_of_range_is_set_to_the_limit_with_a_message_not_reverted(form, qtbot):
    from PySide6.QtCore import Qt

    form.show()
    qtbot.waitExposed(form)
    lr = form.editor("lr")
    lr.setFocus()
    lr.selectAll()
    qtbot.keyClicks(lr, "20")
    qtbot.keyClick(lr, Qt.Key.Key_Return)
    assert lr.value() == 10.0
    assert form.range_notices == ["Learning rate: 20 is above the largest allowed, 10: set to 10."]


def test_an_optional_float_is_off_at_its_minimum(form):
    """max_grad_norm: None shows "off"; a value round-trips; back at the minimum it is None again."""
    editor = form.editor("max_grad_norm")
    form.set_config(RunConfig())
    assert editor.text() == "off" and form.config().max_grad_norm is None
    form.set_config(RunConfig(max_grad_norm=1.5))
    assert form.config().max_grad_norm == 1.5
    editor.setValue(editor.minimum())
    assert form.config().max_grad_norm is None


def test_a_set_to_the_limit_notice_goes_once_the_value_moves_off_it(qtbot):
    """Issue 22: "Batch size: 0 … set to 1" stayed after the batch size was 64 again (loaded settings, Apply)."""
    from PySide6.QtTest import QTest

    form = SettingsForm()
    qtbot.addWidget(form)
    form.show()
    box = form.editor("batch_size")
    box.setFocus()
    box.selectAll()
    QTest.keyClicks(box, "0")
    box.interpretText()
    box.editingFinished.emit()
    box.clearFocus()
    assert form.range_notices == ["Batch size: 0 is below the smallest allowed, 1: set to 1."] and box.value() == 1
    form.set_config(form.config())  # still 1: still true
    assert form.range_notices
    form.set_config(form.config().replace(batch_size=64))  # Load settings, Apply best settings…
    assert form.range_notices == [] and not form.range_notice_label.isVisibleTo(form)


def test_on_a_cpu_each_setting_says_what_it_does_there(qtbot):
    """Issue 22: on a CPU the default augment=gpu said "on the GPU"; Pin memory and Non-blocking showed checked and
    greyed out with no word on screen."""
    form = SettingsForm(RunConfig(device="auto", augment="gpu", pin_memory=True, non_blocking=True))
    qtbot.addWidget(form)
    form.set_device(CPU)
    augment = form.editor("augment")
    assert augment.currentText() == "gpu (on the CPU here)" and augment.currentData() == "gpu"
    assert "On this machine:</b> no CUDA GPU here: augment=gpu runs the same random crop + flip on whole batches " \
           "on the CPU" in augment.toolTip()
    for name in ("pin_memory", "non_blocking"):
        box = form.editor(name)
        assert not box.isEnabled() and box.text() == "does nothing on the CPU"
        assert "on the CPU" in box.toolTip() and "kept for GPU runs" in box.toolTip()
    assert form.config().augment == "gpu" and form.config().pin_memory  # the values are kept for a GPU run

    form.set_device(GPU)
    assert augment.currentText() == "gpu" and "On this machine" not in augment.toolTip()
    assert form.editor("pin_memory").isEnabled() and form.editor("pin_memory").text() == ""
    form.set_config(form.config().replace(num_workers=0))
    assert form.editor("persistent_workers").text() == "not used"


def test_a_folder_s_training_images_are_counted_off_the_gui_thread_and_shown(form, qtbot, tmp_path):
    """The summary said "dataset size known once the data loads" for every folder: the count needs the folder's
    directories listed, which may take seconds, so it runs in the background and the summary follows it."""
    from workbench.folder_layout import training_image_count

    def folder(name, per_class):
        for label in ("cat", "dog", "owl"):
            (tmp_path / name / label).mkdir(parents=True)
            for index in range(per_class):
                (tmp_path / name / label / f"{index}.jpg").write_bytes(b"")  # listed, never opened
        return str(tmp_path / name)

    small, large = folder("small", 10), folder("large", 40)
    form.set_config(RunConfig(dataset="folder", data_path=small, batch_size=4, epochs=1, max_steps=None))
    expected = training_image_count(small)
    qtbot.waitUntil(lambda: f"{expected:,} training images" in form.derived_label.text())
    assert f"{expected // 4:,} steps per epoch" in form.derived_label.text()
    form.editor("data_path").setText(large)  # another folder: counted anew
    assert "counting the folder's images" in form.derived_label.text() or (
        f"{training_image_count(large):,} training images" in form.derived_label.text())
    qtbot.waitUntil(lambda: f"{training_image_count(large):,} training images" in form.derived_label.text())
    form.editor("data_path").setText(str(tmp_path / "missing"))
    qtbot.waitUntil(lambda: "dataset size known once the data loads" in form.derived_label.text())


def test_a_refused_setting_is_scrolled_into_view_and_the_model_group_comes_second(qtbot, make_window):
    """Issue 30 §8: the form put Model and Profile below the fold, so a refused field could not be seen without
    scrolling. Model now comes second; a refusal scrolls the field it names into view."""
    from workbench.setting import GROUP_ORDER

    assert GROUP_ORDER[:2] == ("Run", "Model & optimiser")
    window = make_window()
    window.resize(1024, 330)  # as small as the window goes: the Measurement group is below the fold
    window.show()
    qtbot.waitExposed(window)
    form = window.form
    editor = form.editor("profile_every")
    assert editor.visibleRegion().isEmpty()
    config = form.config().replace(profile=True)
    form.set_config(config)
    form.show_refused(config, "profile_every 1000 leaves no profiler sample in a run of 78 steps")
    qtbot.waitUntil(lambda: not editor.visibleRegion().isEmpty())
    assert editor.property("invalid")
