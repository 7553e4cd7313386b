"""What a setting is, declared once on its RunConfig field: ``name: type = setting(default, acts_on=…, …)``.

The declaration holds the setting's words (the form's label, the CLI flag's help, the tooltip's details), its range,
the form group it sits in, what it acts on, whether the search for faster settings may change it, and when it does
nothing. The ceiling's key, the speed settings a measured change must share with a run, the tune's knobs, the form's
groups, the greying-out and the run's notes are all read from it (config.py derives the tables). Importing this
module is cheap (no torch, no Qt): the CLI builds its parser from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Final, Literal, Optional

if TYPE_CHECKING:
    from workbench.config import RunConfig

# What a setting acts on. The first three decide how fast a step runs (a measured change must share them with a
# run to speak for it); KERNELS also decide what the model alone can do, so they key the compute ceiling.
KERNELS: Final = "kernels"  # the kernels a training step runs: the model, its precision, batch, optimizer, loss, clipping
LOADER: Final = "loader"  # how batches reach the model: the data, the pipeline, the workers, the copies
DEVICE: Final = "device"  # where it trains: the device and the processes (the ceiling keys the device it resolves to)
LENGTH: Final = "length"  # how long the run is, not how fast its steps are
VALUES: Final = "values"  # the numbers a step computes, not the work it does: learning rate, seed
BOOKKEEPING: Final = "bookkeeping"  # what the run measures and records
ActsOn = Literal["kernels", "loader", "device", "length", "values", "bookkeeping"]
SPEED: frozenset[str] = frozenset({KERNELS, LOADER, DEVICE})

# The form's groups, in the order it shows them: what a user changes between two runs first.
Group = Literal["Run", "Data", "Loader", "Precision & kernels", "Model & optimiser", "Measurement"]
GROUP_ORDER: tuple[Group, ...] = ("Run", "Model & optimiser", "Data", "Loader", "Precision & kernels", "Measurement")

# Why a setting does nothing given the other settings (``on_cpu``: the run trains on the CPU), or None.
InactiveRule = Callable[["RunConfig", bool], Optional[str]]


@dataclass(frozen=True)
class Tune:
    """The setting is a knob of the search for faster settings (experiments/tune_knobs.py says which values)."""

    order: int  # the knob's place in a search pass: where the input work runs first, compile last (slow to try)
    knob: str = ""  # the knob it is tried under when that is not its own name (pipeline and augment: "placement")
    if_allowed: bool = False  # it changes what is learned: searched only when the user allows it


@dataclass(frozen=True)
class Setting:
    acts_on: ActsOn
    group: Group
    label: str  # the form's row label
    help: str  # one line: the CLI flag's help and the tooltip's first line
    details: str = ""  # more lines for the tooltip
    range: Optional[tuple[float, float]] = None  # inclusive; a number outside it is refused by validate()
    tune: Optional[Tune] = None
    inactive: Optional[InactiveRule] = None

    @property
    def tooltip(self) -> str:
        return self.help + ("\n" + self.details if self.details else "")

    @property
    def speed(self) -> bool:
        """Whether it decides how fast a step runs."""
        return self.acts_on in SPEED


def setting(default: Any, *, acts_on: ActsOn, group: Group, label: str, help: str, details: str = "",
            range: Optional[tuple[float, float]] = None, tune: Optional[Tune] = None,
            inactive: Optional[InactiveRule] = None) -> Any:
    """A RunConfig field with its declaration (``dataclasses.fields(RunConfig)[i].metadata["setting"]``)."""
    declared = Setting(acts_on, group, label, help, details, range, tune, inactive)
    return dataclasses.field(default=default, metadata={"setting": declared})


# -- when a setting does nothing ---------------------------------------------------
def unused_with_synthetic_data(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return "not used with dataset=synthetic (made in memory)" if config.dataset == "synthetic" else None


def only_with_synthetic_data(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return None if config.dataset == "synthetic" else "only used with dataset=synthetic"


def only_with_a_folder(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return (None if config.dataset == "folder"
            else "only used with dataset=folder (the other datasets are decoded already)")


def max_steps_set(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return (None if config.max_steps is None
            else "max steps is set: the run takes that many steps, for as many epochs as they need")


def needs_a_dataloader(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return "pipeline=gpu-resident uses no DataLoader" if config.pipeline == "gpu-resident" else None


def needs_workers(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return needs_a_dataloader(config, on_cpu) or (
        "needs num_workers ≥ 1 (batches load in the training thread)" if config.num_workers == 0 else None)


def needs_a_copy_to_a_gpu(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return needs_a_dataloader(config, on_cpu) or (
        "on the CPU no batch is copied to a GPU (the value is kept for GPU runs)" if on_cpu else None)


def cuda_only_optimizer(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return ("the fused optimizer kernels are a CUDA remedy for launch-bound steps: a CPU run uses the default "
            "optimizer (the value is kept for GPU runs)") if on_cpu else None


def cuda_only_cudnn(config: RunConfig, on_cpu: bool) -> Optional[str]:
    return "cuDNN is NVIDIA's: a CPU run has no cuDNN algorithms to time" if on_cpu else None
