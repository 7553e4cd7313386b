"""The form's logic without a window: groups, derived facts, greyed-out fields, hardware choices."""

import numpy as np
import pytest
from builders import CPU, GPU, OLD_GPU

from workbench.config import GROUPS, SETTINGS, RunConfig
from workbench.gui import settings_model


def test_every_field_has_a_tooltip_and_the_groups_come_from_the_declarations():
    assert all(len(declared.tooltip) > 30 for declared in SETTINGS.values())
    assert all(name in GROUPS[declared.group] for name, declared in SETTINGS.items())


def test_derived_facts_follow_batch_accumulation_and_max_steps():
    config = RunConfig(synthetic_size=1000, batch_size=64, accumulation_steps=4, epochs=3)
    facts = settings_model.derive(config)
    assert (facts.effective_batch_size, facts.train_size, facts.steps_per_epoch, facts.total_steps) == (
        256, 1000, 15, 45)  # the engine drops the last partial batch: 1000 // 64
    assert "Effective batch 256 (64 × 4 accumulated)" in facts.describe(config)
    assert settings_model.derive(config.replace(max_steps=10)).total_steps == 10
    assert settings_model.derive(config.replace(max_steps=100)).total_steps == 100  # past the epochs too


def test_npz_size_is_read_from_the_header(tmp_path):
    path = tmp_path / "tiny.npz"
    images = np.zeros((70, 32, 32, 3), np.uint8)
    np.savez(path, train_images=images, train_labels=np.zeros(70, np.uint8),
             test_images=images[:10], test_labels=np.zeros(10, np.uint8))
    assert settings_model.dataset_size(RunConfig(dataset="npz", data_path=str(path))) == 70
    assert settings_model.dataset_size(RunConfig(dataset="npz", data_path=str(tmp_path / "missing.npz"))) is None
    (tmp_path / "junk.npz").write_text("not a zip")
    assert settings_model.dataset_size(RunConfig(dataset="npz", data_path=str(tmp_path / "junk.npz"))) is None


def test_batch_larger_than_the_dataset_is_a_problem():
    found = settings_model.problems(RunConfig(synthetic_size=100, batch_size=128), None)
    assert found == ["batch_size 128 is larger than the training set (100 images)"]


def test_hardware_choices_cpu_disables_cuda_fp16_and_bf16():
    unavailable = settings_model.unavailable_choices(CPU)
    assert set(unavailable["precision"]) == {"fp16", "bf16"}
    assert "needs a CUDA GPU" in unavailable["precision"]["fp16"]
    assert set(unavailable["device"]) == {"cuda"}
    assert settings_model.unavailable_choices(None) == {}


def test_hardware_choices_old_gpu_disables_only_bf16():
    assert settings_model.unavailable_choices(GPU) == {}
    unavailable = settings_model.unavailable_choices(OLD_GPU)
    assert list(unavailable) == ["precision"] and list(unavailable["precision"]) == ["bf16"]
    assert "7.5" in unavailable["precision"]["bf16"]


@pytest.mark.parametrize(
    "config, device, inactive, active",
    [
        (RunConfig(dataset="synthetic"), None, {"data_path"}, {"synthetic_size"}),
        (RunConfig(dataset="npz"), None, {"synthetic_size"}, {"data_path"}),
        (RunConfig(pipeline="gpu-resident"), None, {"num_workers", "pin_memory", "prefetch_factor"}, set()),
        (RunConfig(num_workers=0), None, {"persistent_workers", "prefetch_factor"}, {"num_workers", "pin_memory"}),
        (RunConfig(num_workers=2), CPU, {"pin_memory", "non_blocking"}, {"prefetch_factor"}),
        (RunConfig(num_workers=2), GPU, set(), {"pin_memory", "non_blocking", "prefetch_factor"}),
        (RunConfig(max_steps=200), None, {"epochs"}, {"max_steps"}),  # max_steps is the run's length
        (RunConfig(max_steps=None), None, set(), {"epochs"}),
    ],
)
def test_inactive_settings(config, device, inactive, active):
    found = settings_model.inactive_settings(config, device)
    assert inactive <= set(found)
    assert not active & set(found)


def test_problem_sentences_name_their_fields():
    config = RunConfig(pipeline="gpu-resident", augment="cpu", device="cpu", precision="fp16")
    assert settings_model.fields_named_in("augment=cpu needs pipeline=dataloader (the workers …)", config, None) == {
        "augment", "pipeline"}
    assert settings_model.fields_named_in("lr must be greater than 0 (got 0.0)", config, None) == {"lr"}
    # A hardware problem names the value, not the field: the field is marked when the machine lacks that choice.
    assert settings_model.fields_named_in("fp16 needs a CUDA GPU", config, CPU) == {"precision"}
    assert settings_model.fields_named_in("fp16 needs a CUDA GPU", config, None) == set()
