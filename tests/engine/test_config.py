import json

import pytest

from workbench.config import FIELD_NAMES, ConfigError, RunConfig
from workbench.device_info import DeviceInfo

CPU = DeviceInfo(type="cpu", name="test cpu", cuda_available=False, cpu_fallback_reason="no CUDA GPU found")
CPU_ONLY_TORCH = DeviceInfo(type="cpu", name="test cpu", cuda_available=False,
                            cpu_fallback_reason="no CUDA GPU found: this torch 2.x+cpu is a CPU-only build")
OLD_GPU = DeviceInfo(type="cuda", name="Tesla T4", cuda_available=True, compute_capability="7.5", bf16_supported=False)
NEW_GPU = DeviceInfo(type="cuda", name="H100", cuda_available=True, compute_capability="9.0", bf16_supported=True)


def test_defaults_are_valid_on_a_cpu_machine():
    assert RunConfig().validate(CPU) == []


def test_validate_reports_every_problem_at_once():
    problems = RunConfig(batch_size=0, model="my model", pipeline="gpu-resident", augment="cpu", lr=0.0).validate()
    assert "batch_size must be between 1 and 65536 (got 0)" in problems
    assert any(p.startswith("model 'my model' is not a built-in") for p in problems)
    assert any("augment=cpu needs pipeline=dataloader" in p for p in problems)
    assert "lr must be greater than 0 (got 0.0)" in problems
    assert len(problems) == 4


@pytest.mark.parametrize("lr, words", [(float("nan"), "lr must be between 0 and 10 (got nan)"),
                                       (-1.0, "lr must be between 0 and 10 (got -1)"),
                                       (float("inf"), "lr must be between 0 and 10 (got inf)"),
                                       (0.0, "lr must be greater than 0 (got 0.0)")])
def test_a_learning_rate_out_of_its_range_is_one_problem(lr, words):
    """NaN (``lr: NaN`` in a --config) and -1 were two problems, "must be between 0 and 10" and "must be greater
    than 0"."""
    assert [problem for problem in RunConfig(lr=lr).validate() if problem.startswith("lr ")] == [words]


@pytest.mark.parametrize(
    "changes, device, expected",
    [
        (dict(precision="fp16"), CPU, "fp16 needs a CUDA GPU"),
        (dict(precision="bf16"), CPU, "bf16 needs a CUDA GPU with native bf16 (compute capability 8.0+)"),
        (dict(precision="bf16"), OLD_GPU, "bf16 needs a GPU with native bf16 (compute capability 8.0+); Tesla T4 is 7.5"),
        (dict(device="cuda"), CPU,
         "device=cuda but no CUDA GPU was found: choose device=auto or device=cpu to train on the CPU"),
        (dict(device="cuda"), CPU_ONLY_TORCH,
         "device=cuda but no CUDA GPU was found (this torch 2.x+cpu is a CPU-only build): choose device=auto or "
         "device=cpu to train on the CPU, or install a CUDA build of torch"),
        (dict(precision="fp16", device="cpu"), NEW_GPU, "fp16 needs a CUDA GPU"),
    ],
)
def test_hardware_problems(changes, device, expected):
    config = RunConfig(**changes)
    assert config.validate() == []  # hardware is checked only when a device is given
    assert expected in config.validate(device)


def test_precisions_the_gpu_supports_are_valid():
    for precision in ("fp32", "fp16", "bf16"):
        assert RunConfig(precision=precision).validate(NEW_GPU) == []


def test_npz_needs_an_existing_file(tmp_path):
    assert "dataset=npz needs data_path: the .npz file to train on" in RunConfig(dataset="npz").validate()
    missing = str(tmp_path / "missing.npz")
    assert any("does not exist" in p for p in RunConfig(dataset="npz", data_path=missing).validate())


def test_dict_and_json_round_trip():
    config = RunConfig(model="resnet18", max_steps=7, lr=0.1, pin_memory=False, precision="bf16")
    assert RunConfig.from_dict(config.to_dict()) == config
    assert RunConfig.from_json(config.to_json()) == config
    assert list(config.to_dict()) == list(FIELD_NAMES)
    assert json.loads(config.to_json())["max_steps"] == 7


def test_from_dict_fills_missing_fields_with_defaults():
    assert RunConfig.from_dict({"batch_size": 64}) == RunConfig(batch_size=64)


def test_unknown_keys_are_rejected_by_name():
    with pytest.raises(ConfigError) as caught:
        RunConfig.from_dict({"batch_size": 64, "bacth_size": 3, "colour": "red"})
    assert str(caught.value) == "unknown settings: bacth_size, colour"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"batch_size": "64"}, "batch_size must be a whole number (got '64')"),
        ({"pin_memory": 1}, "pin_memory must be true or false (got 1)"),
        ({"lr": "fast"}, "lr must be a number (got 'fast')"),
        ({"model": 3}, "model must be text (got 3)"),
    ],
)
def test_wrong_types_are_refused(data, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RunConfig.from_dict(data)


def test_ints_are_accepted_for_floats_and_none_for_optional():
    config = RunConfig.from_dict({"lr": 1, "max_steps": None, "epochs": 3.0})
    assert config.lr == 1.0 and isinstance(config.lr, float)
    assert config.max_steps is None and config.epochs == 3


def test_config_is_frozen():
    with pytest.raises(Exception):
        RunConfig().batch_size = 3  # type: ignore[misc]
    assert RunConfig().replace(batch_size=3).batch_size == 3
    assert RunConfig(batch_size=64, accumulation_steps=4).effective_batch_size == 256
