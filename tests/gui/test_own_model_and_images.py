"""The window with the user's own model and images (issue 21 §2): a model the engine refuses is marked in the
form with its reason and nothing is recorded; torchvision's names join the model list once the device probe
answers; Browse picks a folder for dataset=folder."""

from __future__ import annotations

import html

import pytest
from builders import TINY_RUN, window_probe
from real_runs import real_engine_window, run_to_end

from workbench.experiments.recording import HistoryRecording
from workbench.history.store import HistoryStore


@pytest.mark.parametrize("spec, words", [
    ("mymodels:wrong_logits", "gives logits of shape (2, 11) for 2 images of 3×32×32; the run needs (2, 10)"),
    ("nomodule:net", "no module named 'nomodule'"),
    ("mymodels:exits", "exits(num_classes=10) called sys.exit(3)"),  # before: the window wedged, Stop enabled
])
def test_a_model_the_engine_refuses_is_marked_in_the_form_with_its_reason_and_not_recorded(
        qtbot, make_window, user_module, isolated_workbench_home, spec, words):
    window = real_engine_window(qtbot, make_window, device="cpu",
                                recordings=lambda: HistoryRecording(source="gui", home=isolated_workbench_home))
    config = TINY_RUN.replace(model=spec)
    assert window.form.problems() == []  # nothing the form can tell before the engine builds it
    ended = run_to_end(qtbot, window, config)
    assert (ended.status, ended.kind) == ("failed", "config") and words in ended.reason
    model_field = window.form.editor("model")
    assert model_field.property("invalid") is True
    assert not window.form.editor("batch_size").property("invalid")
    said = html.unescape(window.form.problems_label.text())
    assert f"Refused when it started: model {spec}" in said.replace("<b>", "").replace("</b>", "") and words in said
    assert window.form.problems_label.isVisibleTo(window.form)
    assert window.run_message.text().startswith(f"Run failed: model {spec}")
    assert window.start_button.isEnabled()  # the fix may be in the user's module, not in the form
    with HistoryStore.open(isolated_workbench_home) as store:
        assert store.list_runs() == []
    window.form.editor("model").setCurrentText("mymodels:tiny_net")  # another model: the mark goes
    assert not model_field.property("invalid") and words not in html.unescape(window.form.problems_label.text())


def test_torchvision_names_join_the_model_list_after_the_device_probe(qtbot, make_window):
    window = make_window(probe_function=window_probe(), model_names_function=lambda: ("resnet18", "resnet50", "vit_b_16"))
    combo = window.form.editor("model")
    names = lambda: [combo.itemText(index) for index in range(combo.count())]
    assert "resnet50" not in names()  # torch is not loaded before the probe
    window.show()
    qtbot.waitUntil(lambda: "vit_b_16" in names(), timeout=30_000)
    assert names().count("resnet18") == 1 and names()[:2] == ["small-cnn", "small-cnn-gn"]
    assert window.form.config().model == "small-cnn"  # the model chosen stays chosen


def test_browse_picks_a_folder_for_dataset_folder(qtbot, make_window, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    asked = []
    monkeypatch.setattr(QFileDialog, "getExistingDirectory",
                        staticmethod(lambda *args: asked.append("folder") or str(tmp_path / "pets")))
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *args: asked.append("file") or ("", "")))
    window = make_window()
    form = window.form
    form.set_config(TINY_RUN.replace(dataset="folder"))
    window.findChild(object, "data_pathBrowse").click()
    assert asked == ["folder"] and form.config().data_path == str(tmp_path / "pets")
