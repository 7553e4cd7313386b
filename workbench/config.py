"""RunConfig: the one frozen record of a run's settings.

Its field names are a contract: they are the CLI flags (in --kebab-case), the keys stored
with every run in the history, and the CSV columns of an export. Importing this module
must stay cheap (no torch): the GUI builds its form from it before the first paint.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import re
import shlex
from dataclasses import dataclass, fields
from typing import Any, Literal, Optional, get_args, get_type_hints

from workbench.device_info import DeviceInfo
from workbench.regular_file import folder_problem, regular_file_problem

Dataset = Literal["synthetic", "npz", "cifar10", "cifar100", "folder"]
# Where a folder's JPEGs are decoded: in the DataLoader workers, or by nvJPEG on the GPU (the workers then only
# read the files).
Decode = Literal["cpu", "gpu"]
# The models built in (engine/models.py). ``model`` also takes any torchvision classification model by name,
# or "package.module:function" for the user's own (imported from the working directory or PYTHONPATH).
BUILTIN_MODELS: tuple[str, ...] = ("small-cnn", "small-cnn-gn", "resnet18", "mobilenet_v3_small")
# "package.module:function", the form Python entry points, uvicorn and gunicorn use.
MODEL_FUNCTION = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
TORCHVISION_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
Pipeline = Literal["dataloader", "gpu-resident"]
Augment = Literal["none", "cpu", "gpu"]
StartMethod = Literal["fork", "forkserver", "spawn"]
Precision = Literal["fp32", "fp16", "bf16"]
Optimizer = Literal["sgd", "adamw"]
# torch.compile's modes; "off" runs the model eagerly. reduce-overhead captures CUDA graphs (one launch replays a
# whole step's kernels: the remedy for launch-bound steps); max-autotune also searches kernel configurations.
CompileMode = Literal["off", "default", "reduce-overhead", "max-autotune"]
DeviceChoice = Literal["auto", "cuda", "cpu"]


DEFAULT_START_METHOD: StartMethod = (
    "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
)


class ConfigError(ValueError):
    """Settings that cannot make a run; ``problems`` lists every one, in words."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True)
class RunConfig:
    # Data
    dataset: Dataset = "synthetic"
    data_path: str = ""  # cifar: folder ("" = the datasets folder in the workbench home); npz: file; folder: folder
    synthetic_size: int = 10_000  # training images for dataset=synthetic (test split: a fifth)
    # Loader
    pipeline: Pipeline = "dataloader"
    augment: Augment = "gpu"
    decode: Decode = "cpu"  # dataset=folder: where JPEGs are decoded
    skip_bad_images: bool = False  # dataset=folder: leave out the files that cannot be read as images (counted)
    num_workers: int = 2
    pin_memory: bool = True
    non_blocking: bool = True
    persistent_workers: bool = True
    prefetch_factor: int = 2
    # DataLoader workers start from a forkserver: a small process with nothing running. fork() here would
    # copy a process with Qt's, the training and the pin-memory threads and CUDA, where a lock one of
    # them held stays locked in the child forever (pytorch#15808, pytorch#130610; Python 3.12 warns,
    # 3.14 makes forkserver the POSIX default). spawn where there is no forkserver (Windows).
    worker_start_method: StartMethod = DEFAULT_START_METHOD
    # Model & optimiser
    model: str = "small-cnn"  # a built-in, a torchvision classification model, or "package.module:function"
    model_kwargs: str = ""  # a JSON object of keyword arguments for the model's function ("" = none)
    optimizer: Optimizer = "sgd"
    lr: float = 0.05
    weight_decay: float = 5e-4
    label_smoothing: float = 0.0
    # Precision
    precision: Precision = "fp32"
    channels_last: bool = False
    compile: CompileMode = "off"  # true/false from settings before compile modes read as default/off
    fused_optimizer: bool = False  # SGD/AdamW fused=True: one kernel per step for the whole update (CUDA)
    cudnn_benchmark: bool = True  # cuDNN times its convolution algorithms on the first steps and keeps the fastest
    max_grad_norm: Optional[float] = None  # clip gradients to this total norm before each optimizer step
    # Run
    epochs: int = 2
    max_steps: Optional[int] = None
    batch_size: int = 128
    accumulation_steps: int = 1
    seed: int = 0
    image_size: int = 32  # images reach the model as image_size × image_size (32: CIFAR's own size)
    device: DeviceChoice = "auto"
    devices: int = 1  # processes, one per GPU (DistributedDataParallel); 0 = every visible GPU
    log_every: int = 10
    evaluate: bool = True  # test-split loss and accuracy at each epoch's end (max-batch trials and benchmarks skip it)
    # Measurement
    profile: bool = False  # profiler-sampled GPU timeline (workbench.engine.profiling)
    profile_every: int = 1000

    def __post_init__(self) -> None:
        for name, modes in SWITCHES_BECAME_CHOICES.items():  # compile=True from code or settings of before
            value = getattr(self, name)
            if isinstance(value, bool):
                object.__setattr__(self, name, modes[value])

    # -- derived -----------------------------------------------------------------
    @property
    def effective_batch_size(self) -> Optional[int]:
        """Images per optimiser step: batch × devices × accumulation; None for devices=0 (every visible
        GPU), whose count only the machine knows (RunStarted.effective_batch_size has it)."""
        if self.devices == 0:
            return None
        return self.batch_size * self.devices * self.accumulation_steps

    # -- validation --------------------------------------------------------------
    def validate(self, device: DeviceInfo | None = None) -> list[str]:
        """Every problem with these settings, in words a user understands.

        Hardware checks (CUDA present, fp16/bf16 support) run only when ``device`` is
        given: probing it imports torch, which callers may want to keep off a hot path.
        """
        problems: list[str] = []
        for name, allowed in CHOICES.items():
            value = getattr(self, name)
            if value not in allowed:
                problems.append(f"{name} must be one of {', '.join(allowed)} (got {value!r})")
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if value is None and name in OPTIONAL_FIELDS:
                continue
            if not (low <= value <= high):
                problems.append(f"{name} must be between {_num(low)} and {_num(high)} (got {_num(value)})")
        if not (self.lr > 0):
            problems.append(f"lr must be greater than 0 (got {self.lr})")
        problems.extend(model_problems(self.model, self.model_kwargs))

        if self.max_steps is not None and 1 <= self.max_steps < self.accumulation_steps <= RANGES["accumulation_steps"][1]:
            problems.append(
                f"max_steps {self.max_steps:,} is fewer steps than accumulation_steps={self.accumulation_steps}: "
                "the run would end before its first optimizer step; lower accumulation_steps or train longer"
            )
        if self.augment == "cpu" and self.pipeline != "dataloader":
            problems.append("augment=cpu needs pipeline=dataloader (the workers do the CPU augmentation)")
        if self.decode == "gpu":
            if self.dataset != "folder":
                problems.append(f"decode=gpu decodes an image folder's JPEGs; dataset={self.dataset} holds decoded "
                                "images already: use decode=cpu")
            elif self.augment == "cpu":
                problems.append("decode=gpu leaves the workers only the files' bytes, so they cannot augment: use "
                                "augment=gpu (crop and flip on the GPU) or augment=none")
            elif self.pipeline != "dataloader":
                problems.append("decode=gpu needs pipeline=dataloader (gpu-resident decodes the whole folder once)")
        if self.dataset == "folder":
            if not self.data_path:
                problems.append("dataset=folder needs data_path: a folder with one sub-folder of images per class")
            else:
                problem = folder_problem(self.data_path)  # os.stat only: a FIFO must not block
                if problem is not None:
                    problems.append(f"data_path {self.data_path!r} {problem}: dataset=folder needs a folder with one "
                                    "sub-folder of images per class")
        if self.dataset == "npz":
            if not self.data_path:
                problems.append("dataset=npz needs data_path: the .npz file to train on")
            elif folder_problem(self.data_path) is None:
                problems.append(f"data_path {self.data_path!r} is a folder: dataset=npz trains on an .npz file; "
                                "choose dataset=folder to train on its images directly, or make an .npz from it "
                                f"with `{make_npz_command(self.data_path)}`")
            else:
                problem = regular_file_problem(self.data_path)  # os.stat only: a FIFO must not block
                if problem is not None:
                    problems.append(f"data_path {self.data_path!r} {problem}: dataset=npz needs an .npz file")
        if self.pipeline == "dataloader" and self.num_workers > 0:
            available = multiprocessing.get_all_start_methods()
            if self.worker_start_method in CHOICES["worker_start_method"] and self.worker_start_method not in available:
                problems.append(
                    f"worker_start_method={self.worker_start_method} is not available on this platform "
                    f"(choose {', '.join(available)})"
                )

        if device is not None:
            problems.extend(self.hardware_problems(device))
        return problems

    def hardware_problems(self, device: DeviceInfo) -> list[str]:
        """Settings this machine cannot run: the reasons the GUI disables a choice."""
        problems = []
        if self.device == "cuda" and not device.cuda_available:
            # The probe's reason starts with the same words; say them once, then what it adds and what to do.
            detail = (device.cpu_fallback_reason or "").removeprefix("no CUDA GPU found").lstrip(": ")
            cpu_build = "CPU-only build" in detail
            problems.append(
                "device=cuda but no CUDA GPU was found" + (f" ({detail})" if detail else "")
                + ": choose device=auto or device=cpu to train on the CPU"
                + (", or install a CUDA build of torch" if cpu_build else "")
            )
        on_cuda = device.cuda_available and self.device != "cpu"
        problems.extend(self._devices_problems(device, on_cuda))
        if self.decode == "gpu" and not on_cuda:
            problems.append("decode=gpu needs a CUDA GPU (nvJPEG): use decode=cpu")
        if self.precision == "fp16" and not on_cuda:
            problems.append("fp16 needs a CUDA GPU")
        if self.precision == "bf16":
            if not on_cuda:
                problems.append("bf16 needs a CUDA GPU with native bf16 (compute capability 8.0+)")
            elif not device.bf16_supported:
                problems.append(
                    f"bf16 needs a GPU with native bf16 (compute capability 8.0+); "
                    f"{device.name} is {device.compute_capability}"
                )
        return problems

    def _devices_problems(self, device: DeviceInfo, on_cuda: bool) -> list[str]:
        if self.devices == 1 or (self.device == "cuda" and not device.cuda_available):  # the latter said above
            return []
        if not device.distributed_backends:
            return [f"devices={self.devices} needs torch.distributed, which this torch build lacks: use devices=1"]
        if not on_cuda:
            if self.devices == 0:
                return ["devices=0 means every visible GPU, and this run is on the CPU: give a number of "
                        "processes instead (devices=2 trains in 2 CPU processes over gloo), or 1"]
            if "gloo" not in device.distributed_backends:
                return [f"devices={self.devices} on the CPU needs the gloo backend, which this torch build "
                        "lacks: use devices=1"]
            return []
        if self.devices > device.gpu_count:
            visible = f"only {device.gpu_count} CUDA GPU{' is' if device.gpu_count == 1 else 's are'} visible"
            return [f"devices={self.devices} but {visible} (CUDA_VISIBLE_DEVICES decides which): choose "
                    f"devices between 1 and {device.gpu_count}, or 0 for every visible GPU"]
        return []

    # -- round trips -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Build from a (possibly partial) dict; unknown keys and wrong types are refused by name."""
        if not isinstance(data, dict):
            raise ConfigError([f"settings must be a JSON object, not {type(data).__name__}"])
        unknown = sorted(set(data) - set(FIELD_TYPES))
        problems = [f"unknown setting{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}"] if unknown else []
        values = {}
        for name, value in data.items():
            if name not in FIELD_TYPES:
                continue
            try:
                values[name] = _coerce(name, value)
            except ValueError as error:
                problems.append(str(error))
        if problems:
            raise ConfigError(problems)
        return cls(**values)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ConfigError([f"settings are not valid JSON: {error}"]) from None
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> RunConfig:
        return dataclasses.replace(self, **changes)


# Field facts derived from the dataclass, so adding a field needs no second list.
FIELD_TYPES: dict[str, Any] = get_type_hints(RunConfig)
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunConfig))
CHOICES: dict[str, tuple[str, ...]] = {
    name: get_args(hint) for name, hint in FIELD_TYPES.items() if getattr(hint, "__origin__", None) is Literal
}
# Settings that were on/off switches before they had modes: a JSON true/false (an older --config file, an older
# history row) still reads as the mode it meant.
SWITCHES_BECAME_CHOICES: dict[str, dict[bool, str]] = {"compile": {True: "default", False: "off"}}
OPTIONAL_FIELDS = frozenset(name for name, hint in FIELD_TYPES.items() if type(None) in get_args(hint))
RANGES: dict[str, tuple[float, float]] = {
    "synthetic_size": (1, 10_000_000),
    "num_workers": (0, 64),
    "prefetch_factor": (1, 64),
    "lr": (0.0, 10.0),
    "weight_decay": (0.0, 1.0),
    "label_smoothing": (0.0, 0.99),
    "max_grad_norm": (1e-6, 1e6),
    "epochs": (1, 10_000),
    "max_steps": (1, 100_000_000),
    "batch_size": (1, 65_536),
    "accumulation_steps": (1, 1024),
    "seed": (0, 2**31 - 1),
    "image_size": (16, 1024),
    "devices": (0, 1024),  # fits a Qt spin box and every RNG the engine seeds
    "log_every": (1, 1_000_000),
    "profile_every": (20, 100_000_000),  # a sample spans about a dozen steps
}


def make_npz_command(folder: str) -> str:
    """The command that makes a dataset file of an image folder: `workbench make-npz pets --out pets.npz`."""
    source = folder.rstrip("/\\") or folder
    return shlex.join(["workbench", "make-npz", source, "--out", f"{source}.npz"])



def model_kwargs_of(text: str) -> dict[str, Any]:
    """``model_kwargs`` as a dict ({} for ""); ValueError with the reason when it is not a JSON object."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ValueError(f"model_kwargs is not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise ValueError(f"model_kwargs must be a JSON object such as {{\"width\": 64}}, not {type(value).__name__}")
    return value


def model_problems(model: str, model_kwargs: str) -> list[str]:
    """What is wrong with a model spec that can be told without importing anything (the engine's model check,
    engine/models.py, builds it and runs a dummy batch before a run starts)."""
    problems = []
    if model not in BUILTIN_MODELS and not MODEL_FUNCTION.match(model) and not TORCHVISION_NAME.match(model):
        problems.append(f"model {model!r} is not a built-in ({', '.join(BUILTIN_MODELS)}), a torchvision model name "
                        "or package.module:function")
    try:
        model_kwargs_of(model_kwargs)
    except ValueError as error:
        problems.append(str(error))
    else:
        if model_kwargs.strip() and model in BUILTIN_MODELS:
            problems.append(f"model_kwargs apply to a torchvision model or your own function, not to the built-in "
                            f"{model}")
    return problems


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _coerce(name: str, value: Any) -> Any:
    """Check a JSON value against the field's type; ints are accepted for floats."""
    hint = FIELD_TYPES[name]
    if name in OPTIONAL_FIELDS:
        if value is None:
            return None
        hint = next(arg for arg in get_args(hint) if arg is not type(None))
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"{name} must be true or false (got {value!r})")
    if name in SWITCHES_BECAME_CHOICES and isinstance(value, bool):
        return SWITCHES_BECAME_CHOICES[name][value]
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{name} must be a whole number (got {value!r})")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"{name} must be a number (got {value!r})")
    if isinstance(value, str):  # str and the Literal choices; validate() checks the choice
        return value
    raise ValueError(f"{name} must be text (got {value!r})")
