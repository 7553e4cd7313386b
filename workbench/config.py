"""RunConfig: the one frozen record of a run's settings, each declared once on its field (setting.py says what a
declaration holds; the tables below are derived from them). The checks of a value against files or text (the model
spec, data_path, save_model), which validation calls, are setting_checks.py's.

Its field names are a contract: they are the CLI flags (in --kebab-case), the keys stored
with every run in the history, and the CSV columns of an export. Importing this module
must stay cheap (no torch): the GUI builds its form from it before the first paint.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
from dataclasses import dataclass, fields
from typing import Any, Literal, Optional, get_args, get_type_hints

from workbench.device_info import DeviceInfo
from workbench.setting import (
    BOOKKEEPING, DEVICE, GROUP_ORDER, KERNELS, LENGTH, LOADER, VALUES, Group, Setting, Tune, cuda_only_cudnn,
    cuda_only_optimizer, max_steps_set, needs_a_copy_to_a_gpu, needs_a_dataloader, needs_workers, only_with_a_folder,
    only_with_synthetic_data, setting, unused_with_synthetic_data,
)
from workbench.setting_checks import data_path_problems, model_problems, save_model_problem

Dataset = Literal["synthetic", "npz", "cifar10", "cifar100", "folder"]
# Where a folder's JPEGs are decoded: in the DataLoader workers, or by nvJPEG on the GPU (the workers then only
# read the files).
Decode = Literal["cpu", "gpu"]
Pipeline = Literal["dataloader", "gpu-resident"]
Augment = Literal["none", "cpu", "gpu"]
StartMethod = Literal["fork", "forkserver", "spawn"]
Precision = Literal["fp32", "fp16", "bf16"]
Optimizer = Literal["sgd", "adamw"]
# torch.compile's modes; "off" runs the model eagerly. reduce-overhead captures CUDA graphs (one launch replays a
# whole step's kernels: the remedy for launch-bound steps); max-autotune also searches kernel configurations.
CompileMode = Literal["off", "default", "reduce-overhead", "max-autotune"]
# The modes whose inductor options turn CUDA graphs on (torch._inductor.list_mode_options(): triton.cudagraphs).
CUDA_GRAPH_MODES: tuple[str, ...] = ("reduce-overhead", "max-autotune")
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
    dataset: Dataset = setting(
        "synthetic", acts_on=LOADER, group="Data", label="Dataset",
        help=("Where the training images come from: synthetic, npz, cifar10, cifar100, or a folder of your own "
              "images."),
        details=("• synthetic: CIFAR-shaped images made in memory (learnable colour templates plus noise): fast, "
                 "offline, good for measuring the pipeline.\n"
                 "• npz: a .npz file with train_images, train_labels, test_images, test_labels (uint8, N×32×32×3); "
                 "`workbench make-npz` writes one from an image folder or the CIFAR-10 tarball.\n"
                 "• cifar10 / cifar100: the torchvision datasets, from the data folder.\n"
                 "• folder: your own images (JPEG, PNG, …) at any size: one sub-folder per class, with train/ and "
                 "val/ splits if the folder has them (else a fifth of each class is held out, by the seed). The "
                 "DataLoader workers read and decode them and bring them to the image size: where num_workers and "
                 "augmentation placement decide the speed."),
    )
    data_path: str = setting(
        "", acts_on=LOADER, group="Data", label="Data file / folder",
        help=("The .npz file (dataset=npz), the image folder (dataset=folder) or the CIFAR folder (empty = the "
              "datasets folder in the workbench home)."),
        inactive=unused_with_synthetic_data,
    )
    synthetic_size: int = setting(
        10_000, acts_on=LOADER, group="Data", label="Synthetic images",
        help="How many synthetic training images to make; the test split is a fifth of this.",
        range=(1, 10_000_000),
        inactive=only_with_synthetic_data,
    )
    pipeline: Pipeline = setting(
        "dataloader", acts_on=LOADER, group="Loader", label="Pipeline",
        help="How batches reach the model: a DataLoader on the host, or the whole set resident on the device.",
        details=("• dataloader: a torch DataLoader prepares batches on the host (in worker processes when "
                 "num_workers > 0) and each batch is copied to the device. The usual setup.\n"
                 "• gpu-resident: the whole dataset is copied to the device once and batches are sliced there: no "
                 "workers, no per-step copies. The fastest choice when the dataset fits in device memory."),
        tune=Tune(1, knob="placement"),
    )
    augment: Augment = setting(
        "gpu", acts_on=LOADER, group="Loader", label="Augmentation",
        help=("Where random crop + flip runs: per image in the CPU workers, on whole batches on the training device "
              "(the GPU; the CPU without one), or none."),
        details=("• cpu: per image in the DataLoader workers. Costs CPU time for every image and can leave a fast "
                 "GPU waiting for data.\n"
                 "• gpu: on whole batches on the training device after the copy. On a GPU it frees the CPU and is "
                 "usually far cheaper; without a CUDA GPU the same batched crop + flip runs on the CPU, in the "
                 "training thread.\n"
                 "• none: no augmentation, the baseline that shows what augmentation costs.\n"
                 "The Sample batch tab shows what the model sees."),
        tune=Tune(1, knob="placement"),
    )
    decode: Decode = setting(
        "cpu", acts_on=LOADER, group="Data", label="JPEG decoding",
        help="Where a folder's JPEGs are decoded: in the DataLoader workers (cpu), or on the GPU with nvJPEG (gpu).",
        details=("• cpu: the workers read, decode and resize each image: the CPU work that can leave a GPU "
                 "waiting.\n"
                 "• gpu: the workers only read the files; the training thread decodes the whole batch on the GPU "
                 "(torchvision.io.decode_jpeg). JPEG files only, a CUDA GPU, and augmentation on the GPU or none."),
        inactive=only_with_a_folder,
    )
    skip_bad_images: bool = setting(
        False, acts_on=VALUES, group="Data", label="Skip unreadable images",
        help=("dataset=folder: train without the files that cannot be read as images (counted in the run's summary); "
              "off: the run is refused, listing them all."),
        details=("Before a run starts, every image of the folder is checked (each file's header; a JPEG cut off "
                 "before its end is decoded to confirm). Off, any bad file refuses the run before it is recorded, "
                 "with the list; on, the run leaves them out and its summary says how many (skipped_bad_images)."),
        inactive=only_with_a_folder,
    )
    num_workers: int = setting(
        2, acts_on=LOADER, group="Loader", label="Loader workers",
        help="DataLoader worker processes preparing batches while the model trains (0 = in the training thread).",
        details=("0 is simple, but the device waits for every batch. More workers help until the CPU cores are "
                 "busy; beyond the core count they only compete with each other.\n"
                 "If the data-wait plot is high, add workers or move augmentation to the GPU."),
        range=(0, 64),
        inactive=needs_a_dataloader,
        tune=Tune(4),
    )
    pin_memory: bool = setting(
        True, acts_on=LOADER, group="Loader", label="Pin memory",
        help="Put batches in page-locked host memory for faster, asynchronous copies to a CUDA GPU.",
        details=("Copies from pinned memory can overlap with compute (see non_blocking). No effect without a CUDA "
                 "GPU."),
        inactive=needs_a_copy_to_a_gpu,
        tune=Tune(5),
    )
    non_blocking: bool = setting(
        True, acts_on=LOADER, group="Loader", label="Non-blocking copies",
        help="Copy batches to the GPU with non_blocking=True, so copies from pinned memory overlap with compute.",
        details="Needs pin_memory to help; no effect without a CUDA GPU.",
        inactive=needs_a_copy_to_a_gpu,
        tune=Tune(6),
    )
    persistent_workers: bool = setting(
        True, acts_on=LOADER, group="Loader", label="Persistent workers",
        help="Keep the DataLoader workers alive between epochs instead of starting new ones each epoch.",
        details="Starting workers costs seconds with big datasets or the spawn start method. Needs num_workers ≥ 1.",
        inactive=needs_workers,
        tune=Tune(7),
    )
    prefetch_factor: int = setting(
        2, acts_on=LOADER, group="Loader", label="Prefetch per worker",
        help="Batches each DataLoader worker prepares ahead (needs num_workers ≥ 1).",
        details="Higher values smooth out uneven loading at the cost of host memory.",
        range=(1, 64),
        inactive=needs_workers,
        tune=Tune(8),
    )
    # DataLoader workers start from a forkserver: a small process with nothing running. fork() here would
    # copy a process with Qt's, the training and the pin-memory threads and CUDA, where a lock one of
    # them held stays locked in the child forever (pytorch#15808, pytorch#130610; Python 3.12 warns,
    # 3.14 makes forkserver the POSIX default). spawn where there is no forkserver (Windows).
    worker_start_method: StartMethod = setting(
        DEFAULT_START_METHOD, acts_on=LOADER, group="Loader", label="Worker start method",
        help="How DataLoader worker processes start: fork, forkserver or spawn.",
        details=("• fork: fastest to start; the worker is a copy of this process (Linux).\n"
                 "• spawn / forkserver: a fresh interpreter per worker: slower to start, safe with threads and "
                 "CUDA. Matters most when persistent_workers is off."),
        inactive=needs_workers,
    )
    model: str = setting(
        "small-cnn", acts_on=KERNELS, group="Model & optimiser", label="Model",
        help=("The network to train: a built-in, any torchvision classification model by name (resnet50, vit_b_16, "
              "…), or your own as package.module:function."),
        details=("Your own: a function returning a torch.nn.Module, importable from the working directory or "
                 "PYTHONPATH; it gets num_classes when it takes it, and model_kwargs. Importing it runs your "
                 "module's code, as running your training script would. Before a run starts the model is built and "
                 "given a batch of 2 images of the run's size: it must return one logit per class.\n"
                 "• small-cnn: a few convolution layers; quick, so the input pipeline shows clearly.\n"
                 "• small-cnn-gn: the same with GroupNorm instead of BatchNorm: its result does not depend on how "
                 "the batch is split, so N devices train exactly as one device on the whole batch (BatchNorm "
                 "normalises each device's slice on its own); also the choice for very small batches.\n"
                 "• resnet18: a real workload of about 11 M parameters (with CIFAR's stem at 32×32).\n"
                 "• mobilenet_v3_small: light, many small kernels: often limited by launch overhead, not compute."),
    )
    model_kwargs: str = setting(
        "", acts_on=KERNELS, group="Model & optimiser", label="Model arguments",
        help="Keyword arguments for a torchvision model or your own function, as a JSON object ({\"width\": 64}).",
        details="Empty for none. The built-in models take none. Stored with the run, so the history can rerun it.",
    )
    optimizer: Optimizer = setting(
        "sgd", acts_on=KERNELS, group="Model & optimiser", label="Optimiser",
        help="sgd (Nesterov momentum 0.9) or adamw (wants a smaller learning rate, about 1e-3).",
    )
    lr: float = setting(
        0.05, acts_on=VALUES, group="Model & optimiser", label="Learning rate",
        help=("Peak learning rate: linear warm-up over the first tenth of the optimiser steps, then linear decay to "
              "0."),
        details="About 0.05–0.1 suits sgd, 1e-3 adamw; scale it with the effective batch.",
        range=(0.0, 10.0),
        tune=Tune(12, knob="batch_size", if_allowed=True),
    )
    weight_decay: float = setting(
        5e-4, acts_on=KERNELS, group="Model & optimiser", label="Weight decay",
        help=("Pulls weights towards zero each step (decoupled for adamw); 5e-4 is typical for CIFAR, 0 turns it "
              "off."),
        range=(0.0, 1.0),
    )
    label_smoothing: float = setting(
        0.0, acts_on=KERNELS, group="Model & optimiser", label="Label smoothing",
        help="Share of each target's probability spread over the other classes (0.1 is common, 0 turns it off).",
        details="Mild regularisation. Test loss is always plain cross-entropy.",
        range=(0.0, 0.99),
    )
    precision: Precision = setting(
        "fp32", acts_on=KERNELS, group="Precision & kernels", label="Precision",
        help=("fp32, or mixed precision with fp16 (gradient scaler) or bf16 (compute capability 8.0+); AMP needs "
              "CUDA."),
        details=("• fp32: full precision everywhere.\n"
                 "• fp16: mixed precision (autocast) with a gradient scaler: on tensor-core GPUs often 2–3× faster "
                 "with about half the activation memory.\n"
                 "• bf16: mixed precision with fp32's range, so no scaler; needs native support (Ampere or newer)."),
        tune=Tune(2),
    )
    channels_last: bool = setting(
        False, acts_on=KERNELS, group="Precision & kernels", label="Channels last",
        help="Store images and activations as NHWC, which tensor cores prefer for fp16/bf16 convolutions.",
        details="Often 10–30 % faster with AMP; little effect in fp32 or on a CPU.",
        tune=Tune(3),
    )
    # true/false from settings before compile modes read as default/off
    compile: CompileMode = setting(
        "off", acts_on=KERNELS, group="Precision & kernels", label="torch.compile",
        help="Compile the model: off, default (fused kernels), reduce-overhead (also CUDA graphs) or max-autotune.",
        details=("Compiling takes tens of seconds (max-autotune minutes), kept out of images/sec and reported as "
                 "compile time. reduce-overhead replays each step's kernels as one CUDA graph: the remedy for a "
                 "launch-bound GPU; torch skips the graphs in some models, and the run says whether they were used. "
                 "max-autotune uses CUDA graphs too; neither runs with accumulation_steps > 1 (a replay overwrites the "
                 "accumulated gradients)."),
        tune=Tune(10),
    )
    fused_optimizer: bool = setting(
        False, acts_on=KERNELS, group="Precision & kernels", label="Fused optimizer",
        help="Update every weight in one fused kernel per step (SGD/AdamW fused=True) instead of a few per tensor.",
        details="Fewer launches per step: helps a launch-bound GPU. CUDA only: a CPU run ignores it and says so.",
        inactive=cuda_only_optimizer,
        tune=Tune(9),
    )
    cudnn_benchmark: bool = setting(
        True, acts_on=KERNELS, group="Precision & kernels", label="cuDNN benchmark",
        help="Let cuDNN time its convolution algorithms on the first steps and keep the fastest for each shape.",
        details=("Faster steps after a slower start when shapes stay fixed; off for bit-for-bit repeatable kernels. "
                 "CUDA only."),
        inactive=cuda_only_cudnn,
    )
    max_grad_norm: Optional[float] = setting(
        None, acts_on=KERNELS, group="Model & optimiser", label="Clip gradient norm",
        help="Scale the gradients down when their total norm exceeds this, before each optimiser step; unset = off.",
        details=("1.0 is a common choice. Guards against a spike that would blow the weights up (fp16: clipped "
                 "after unscaling, so the loss scale does not enter the norm)."),
        range=(1e-06, 1000000.0),
    )
    epochs: int = setting(
        2, acts_on=LENGTH, group="Run", label="Epochs",
        help=("Passes over the training set, each ending with an evaluation on the test split (ignored when max "
              "steps is set)."),
        details="The evaluations are the circles on the loss plot.",
        range=(1, 10_000),
        inactive=max_steps_set,
    )
    max_steps: Optional[int] = setting(
        None, acts_on=LENGTH, group="Run", label="Max steps",
        help="Train exactly this many steps (micro-batches), for as many epochs as that takes; unset = use epochs.",
        details="Handy for short timing runs. The last epoch may be partial; an evaluation still ends it.",
        range=(1, 100_000_000),
    )
    batch_size: int = setting(
        128, acts_on=KERNELS, group="Run", label="Batch size",
        help="Images per step (per micro-batch).",
        details=("Bigger batches keep a GPU busier until memory runs out; the learning rate usually scales with the "
                 "batch."),
        range=(1, 65_536),
        tune=Tune(11, if_allowed=True),
    )
    accumulation_steps: int = setting(
        1, acts_on=KERNELS, group="Run", label="Accumulation steps",
        help="Micro-batches whose gradients add up before each optimiser step (effective batch = batch × this).",
        details="The optimisation of a large batch with the memory of a small one, but no faster.",
        range=(1, 1024),
        tune=Tune(13, if_allowed=True),
    )
    seed: int = setting(
        0, acts_on=VALUES, group="Run", label="Seed",
        help="Seeds the weights, the data order, augmentation and synthetic data, so runs stay comparable.",
        details="The same seed makes a change of one setting show its own effect.",
        range=(0, 2_147_483_647),
    )
    image_size: int = setting(
        32, acts_on=KERNELS, group="Data", label="Image size",
        help="Images reach the model as image_size × image_size pixels (32 is CIFAR's own size).",
        details=("Folders of your images are decoded and brought to this size in the loader; 32×32 datasets (CIFAR, "
                 ".npz, synthetic) are scaled on the device. Larger images make every step, and the input pipeline, "
                 "costlier: 224 is ImageNet's."),
        range=(16, 1024),
    )
    device: DeviceChoice = setting(
        "auto", acts_on=DEVICE, group="Run", label="Device",
        help="auto (the CUDA GPU if there is one, else the CPU), cuda (the GPU or fail), or cpu.",
    )
    devices: int = setting(
        1, acts_on=DEVICE, group="Run", label="Devices (processes)",
        help="Train data-parallel in this many processes, one per GPU (0 = every visible GPU); 1 = one process.",
        details=("Each process trains on its own share of every batch with PyTorch's DistributedDataParallel and "
                 "the gradients are averaged after each backward pass (NCCL between GPUs, gloo on the CPU), so the "
                 "effective batch is batch × devices × accumulation. Rank 0 evaluates.\n"
                 "On the CPU, several processes share the same cores: it checks a multi-process setup, it is not "
                 "faster. Under torchrun the processes come from torchrun and this setting follows them."),
        range=(0, 1024),
    )
    log_every: int = setting(
        10, acts_on=BOOKKEEPING, group="Run", label="Measure every",
        help="Report every this many steps: one point on the plots.",
        details="Reading the loss waits for the GPU to finish, so very small values slow a fast GPU down.",
        range=(1, 1_000_000),
    )
    evaluate: bool = setting(
        True, acts_on=LENGTH, group="Run", label="Evaluate",
        help=("Measure test loss and accuracy at the end of each epoch (off: training figures only, no evaluation "
              "pass)."),
        details=("Off for runs that only measure speed or memory: max-batch trials and benchmarks train a few steps "
                 "and would otherwise pay a whole pass over the test split; their test accuracy is then not "
                 "measured."),
    )
    profile: bool = setting(
        False, acts_on=BOOKKEEPING, group="Measurement", label="Profile GPU time",
        help="Sample the kernel timeline with torch.profiler: GPU busy, copies, and what the idle time waited for.",
        details=("A sample is a few steps after warm-up, then one every profile_every steps: the GPU's own timeline "
                 "says how much of the time kernels ran and whether the idle time waited for data or for the host "
                 "to launch the next kernel (an event span around a step cannot tell). Each sample keeps its Chrome "
                 "trace (opens in Perfetto). The sampled steps run a little slower and are left out of images/sec."),
    )
    profile_every: int = setting(
        1000, acts_on=BOOKKEEPING, group="Measurement", label="Profile every",
        help="Steps between two profiler samples when profile is on.",
        details="A sample costs about a dozen slower steps plus a fraction of a second to analyse and save.",
        range=(20, 100_000_000),
    )
    save_model: str = setting(
        "", acts_on=BOOKKEEPING, group="Measurement", label="Save the model to",
        help=("A file to write the trained model's weights to when the run ends (finished or stopped), as "
              "torch.save(model.state_dict()); empty: not saved."),
        details=("Load it into the same model spec with model.load_state_dict(torch.load(path)). An existing file "
                 "there is replaced (a temporary file beside it, then renamed); the folder must exist."),
    )

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
        if self.lr == 0:  # the range's low end, which no learning rate is; NaN or one outside it is said above, once
            problems.append(f"lr must be greater than 0 (got {self.lr})")
        problems.extend(model_problems(self.model, self.model_kwargs))

        if self.max_steps is not None and 1 <= self.max_steps < self.accumulation_steps <= RANGES["accumulation_steps"][1]:
            problems.append(
                f"max_steps {self.max_steps:,} is fewer steps than accumulation_steps={self.accumulation_steps}: "
                "the run would end before its first optimizer step; lower accumulation_steps or train longer"
            )
        graphs_problem = cuda_graphs_problem(self)
        if graphs_problem is not None:
            problems.append(graphs_problem)
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
        problems.extend(data_path_problems(self.dataset, self.data_path))
        if self.save_model:
            problem = save_model_problem(self.save_model, self.dataset, self.data_path, self.model)
            if problem is not None:
                problems.append(f"save_model {self.save_model!r} {problem}")
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
SETTINGS: dict[str, Setting] = {f.name: f.metadata["setting"] for f in fields(RunConfig) if "setting" in f.metadata}
FIELD_TYPES: dict[str, Any] = get_type_hints(RunConfig)
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunConfig))
CHOICES: dict[str, tuple[str, ...]] = {
    name: get_args(hint) for name, hint in FIELD_TYPES.items() if getattr(hint, "__origin__", None) is Literal
}
# Settings that were on/off switches before they had modes: a JSON true/false (an older --config file, an older
# history row) still reads as the mode it meant.
SWITCHES_BECAME_CHOICES: dict[str, dict[bool, str]] = {"compile": {True: "default", False: "off"}}
OPTIONAL_FIELDS = frozenset(name for name, hint in FIELD_TYPES.items() if type(None) in get_args(hint))
RANGES: dict[str, tuple[float, float]] = {name: declared.range for name, declared in SETTINGS.items()
                                           if declared.range is not None}

# What a setting acts on decides where it counts (setting.py): the ceiling's key, a measured change's baseline.
KERNEL_SETTINGS: tuple[str, ...] = tuple(name for name, declared in SETTINGS.items() if declared.acts_on == KERNELS)
SPEED_SETTINGS: tuple[str, ...] = tuple(name for name, declared in SETTINGS.items() if declared.speed)
NOT_SPEED_SETTINGS: tuple[str, ...] = tuple(name for name, declared in SETTINGS.items() if not declared.speed)
GROUPS: dict[Group, tuple[str, ...]] = {
    group: tuple(name for name, declared in SETTINGS.items() if declared.group == group) for group in GROUP_ORDER
}


def cuda_graphs_problem(config: RunConfig) -> Optional[str]:
    """Why CUDA graphs cannot train with these settings (None where they can): the one rule that validation,
    the findings' remedies and the tune's candidates share.

    A replay writes its outputs into the same memory as the replay before it, gradients included: with
    accumulation, the next micro-batch's replay overwrites the .grad the last one left before the optimizer
    step reads it (torch raises "accessing tensor output of CUDAGraphs that has been overwritten"; pytorch
    #169545). Refused on every device, so a setting that validates on a laptop also runs on the GPU.
    """
    if config.compile in CUDA_GRAPH_MODES and config.accumulation_steps > 1:
        return (f"compile={config.compile} with accumulation_steps={config.accumulation_steps}: CUDA graphs "
                "replay each micro-batch into the same memory, so the next one overwrites the gradients being "
                "accumulated (pytorch #169545); use compile=default, or accumulation_steps=1")
    return None


def inactive_settings(config: RunConfig, on_cpu: bool) -> dict[str, str]:
    """setting → why it does nothing with the other settings (``on_cpu``: the run trains on the CPU). The one answer
    for the form (greyed out, the value kept), the runs comparison ("not used"), verify and the run's notes."""
    inactive = {}
    for name, declared in SETTINGS.items():
        reason = declared.inactive(config, on_cpu) if declared.inactive is not None else None
        if reason is not None:
            inactive[name] = reason
    return inactive


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
