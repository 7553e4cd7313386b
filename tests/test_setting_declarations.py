"""Each setting is declared once, on its RunConfig field (workbench/setting.py), and every list of settings is derived
from those declarations: adding a setting touches its field and the place it acts, and a missed list fails here."""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass, fields
from pathlib import Path
from typing import get_args

import pytest

from workbench import config as config_module
from workbench.config import (
    FIELD_NAMES, FIELD_TYPES, GROUPS, KERNEL_SETTINGS, NOT_SPEED_SETTINGS, RANGES, SETTINGS, SPEED_SETTINGS, RunConfig,
    inactive_settings,
)
from workbench.device_info import DeviceInfo
from workbench.engine.ceiling_cache import ceiling_key
from workbench.experiments.tune_knobs import ALLOWABLE, KNOBS, OPTIONAL_KNOBS, candidates
from workbench.history.measured_changes import speed_settings
from workbench.setting import GROUP_ORDER, KERNELS, SPEED, ActsOn, Setting, setting

PACKAGE = Path(config_module.__file__).resolve().parent


def undeclared_fields(cls: type) -> list[str]:
    """The dataclass's fields that carry no setting declaration."""
    return [f.name for f in fields(cls) if not isinstance(f.metadata.get("setting"), Setting)]


def test_every_runconfig_field_is_declared_and_classified():
    assert undeclared_fields(RunConfig) == []
    assert list(SETTINGS) == list(FIELD_NAMES)
    for name, declared in SETTINGS.items():
        assert declared.acts_on in get_args(ActsOn), name
        assert declared.group in GROUP_ORDER, name
        assert declared.label and declared.help and "\n" not in declared.help, name
        assert declared.tooltip.startswith(declared.help), name


def test_a_field_without_a_declaration_is_found():
    """What the test above catches: a field added bare, or one whose declaration was removed."""

    @dataclass(frozen=True)
    class Grown:
        lr: float = setting(0.1, acts_on="values", group="Model & optimiser", label="Learning rate", help="The rate.")
        new_knob: int = 3
        stripped: bool = dataclasses.field(default=False)

    assert undeclared_fields(Grown) == ["new_knob", "stripped"]


def test_the_forms_groups_hold_every_setting_once_in_the_declared_order():
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(FIELD_NAMES)
    assert tuple(GROUPS) == GROUP_ORDER


def test_ranges_come_from_the_declarations_and_bound_numbers_only():
    assert RANGES == {name: declared.range for name, declared in SETTINGS.items() if declared.range is not None}
    for name in RANGES:
        assert {int, float} & {FIELD_TYPES[name], *get_args(FIELD_TYPES[name])}, name
    assert RunConfig(label_smoothing=1.5).validate() == ["label_smoothing must be between 0 and 0.99 (got 1.5)"]


def test_speed_settings_are_those_declared_to_act_on_speed():
    assert set(SPEED_SETTINGS) | set(NOT_SPEED_SETTINGS) == set(FIELD_NAMES)
    assert not set(SPEED_SETTINGS) & set(NOT_SPEED_SETTINGS)
    assert set(SPEED_SETTINGS) == {name for name, declared in SETTINGS.items() if declared.acts_on in SPEED}
    assert {"weight_decay", "label_smoothing", "max_grad_norm", "num_workers", "devices"} <= set(SPEED_SETTINGS)
    assert {"epochs", "max_steps", "seed", "lr", "log_every", "profile"} <= set(NOT_SPEED_SETTINGS)
    assert set(speed_settings(RunConfig())) == set(SPEED_SETTINGS)


def _device(device_type: str = "cuda") -> DeviceInfo:
    return DeviceInfo(type=device_type, name="NVIDIA H100 80GB HBM3" if device_type == "cuda" else "cpu",
                      torch_version="2.14.1", cuda_available=device_type == "cuda")


@pytest.mark.parametrize("change", [{"max_grad_norm": 1.0}, {"weight_decay": 0.0}, {"label_smoothing": 0.1}])
def test_clipping_weight_decay_and_label_smoothing_key_the_ceiling(change):
    """A run that clips, decays or smooths differently runs other kernels: it must not read its efficiency against
    a ceiling measured without them."""
    base = RunConfig()
    assert ceiling_key(base.replace(**change), _device(), 10) != ceiling_key(base, _device(), 10)


def test_every_kernel_setting_keys_the_ceiling_and_nothing_else_does():
    key = ceiling_key(RunConfig(), _device(), 10)
    assert set(KERNEL_SETTINGS) <= set(key)
    # The loader, the length, lr: not the model's speed. The device is the one the run resolved to, by name.
    assert set(key) & (set(FIELD_NAMES) - set(KERNEL_SETTINGS)) == set()
    assert key["device_name"] == "NVIDIA H100 80GB HBM3"
    assert KERNEL_SETTINGS == tuple(name for name, declared in SETTINGS.items() if declared.acts_on == KERNELS)


def test_a_setting_that_does_nothing_on_the_device_shares_one_ceiling():
    cpu = _device("cpu")
    assert ceiling_key(RunConfig(fused_optimizer=True), cpu, 10) == ceiling_key(RunConfig(), cpu, 10)
    assert ceiling_key(RunConfig(fused_optimizer=True), _device(), 10) != ceiling_key(RunConfig(), _device(), 10)


def test_the_tunes_knobs_are_the_declared_ones_each_with_its_candidates():
    tuned = {name: declared.tune for name, declared in SETTINGS.items() if declared.tune is not None}
    assert set(KNOBS) | set(OPTIONAL_KNOBS) == {tune.knob or name for name, tune in tuned.items()}
    assert set(ALLOWABLE) == {name for name, tune in tuned.items() if tune.if_allowed}
    assert KNOBS[0] == "placement" and KNOBS[-1] == "compile"  # the input work first, compile (slow) last
    base = RunConfig(pipeline="dataloader", num_workers=2)
    for knob in KNOBS + OPTIONAL_KNOBS:  # a knob declared without its candidates raises ValueError here
        candidates(knob, base, _device(), cores=4)
    for name in set(tuned) - set(ALLOWABLE):
        assert SETTINGS[name].speed, name  # the search compares speed: a knob must decide it


def test_inactive_settings_come_from_the_declarations():
    resident = inactive_settings(RunConfig(pipeline="gpu-resident", max_steps=10), on_cpu=False)
    assert set(resident) == {"data_path", "decode", "skip_bad_images", "epochs", "num_workers", "pin_memory",
                             "non_blocking", "persistent_workers", "prefetch_factor", "worker_start_method"}
    on_cpu = inactive_settings(RunConfig(dataset="folder", data_path="x"), on_cpu=True)
    assert set(on_cpu) == {"synthetic_size", "pin_memory", "non_blocking", "fused_optimizer", "cudnn_benchmark"}


# A literal of setting names outside config.py is a list a newcomer would have to find; these few only order what
# is derived elsewhere (every other setting follows them).
ORDERING_ONLY = {("gui/sequence_dialogs.py", "COMMON_SWEEPS")}


def hand_written_setting_lists(package: Path = PACKAGE) -> list[str]:
    """"path name" for each module-level tuple, list, set or dict of three or more setting names outside config.py."""
    names = set(FIELD_NAMES)
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative == "config.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            value = node.value
            items = [k for k in value.keys if k is not None] if isinstance(value, ast.Dict) else \
                value.elts if isinstance(value, (ast.Tuple, ast.List, ast.Set)) else []
            strings = [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]
            if len(strings) >= 3 and len(strings) == len(items) and set(strings) <= names:
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if (relative, ast.unparse(target)) not in ORDERING_ONLY:
                    found.append(f"{relative} {ast.unparse(target)}")
    return found


def test_no_product_module_keeps_its_own_list_of_settings():
    assert hand_written_setting_lists() == []


def test_the_check_finds_a_hand_written_list(tmp_path):
    (tmp_path / "config.py").write_text('ALL = ("lr", "seed", "epochs")\n')
    (tmp_path / "speed.py").write_text('NOT_SPEED = ("lr", "seed", "epochs")\nOTHER = ("lr", "x", "seed")\n')
    assert hand_written_setting_lists(tmp_path) == ["speed.py NOT_SPEED"]
