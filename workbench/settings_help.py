"""What each RunConfig field is called and what it does, in words: one source for the form and the CLI.

``help`` is one line: it is `workbench run --help`'s text for the flag and the first line of the
form's tooltip. ``details`` (optional) follows it in the tooltip only. Importing this module is
cheap (no Qt, no torch, no numpy): the CLI builds its parser from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.config import RunConfig


@dataclass(frozen=True)
class FieldSpec:
    label: str  # the form's row label
    help: str  # one line: the CLI flag's help and the tooltip's first line
    details: str = ""  # more lines for the tooltip

    @property
    def tooltip(self) -> str:
        return self.help + ("\n" + self.details if self.details else "")


SPECS: dict[str, FieldSpec] = {
    "dataset": FieldSpec(
        "Dataset",
        "Where the training images come from: synthetic, npz, cifar10, cifar100, or a folder of your own images.",
        "• synthetic: CIFAR-shaped images made in memory (learnable colour templates plus noise): fast, "
        "offline, good for measuring the pipeline.\n"
        "• npz: a .npz file with train_images, train_labels, test_images, test_labels (uint8, N×32×32×3); "
        "`workbench make-npz` writes one from an image folder or the CIFAR-10 tarball.\n"
        "• cifar10 / cifar100: the torchvision datasets, from the data folder.\n"
        "• folder: your own images (JPEG, PNG, …) at any size: one sub-folder per class, with train/ and val/ "
        "splits if the folder has them (else a fifth of each class is held out, by the seed). The DataLoader "
        "workers read and decode them and bring them to the image size: where num_workers and augmentation "
        "placement decide the speed.",
    ),
    "data_path": FieldSpec(
        "Data file / folder",
        "The .npz file (dataset=npz), the image folder (dataset=folder) or the CIFAR folder (empty = the "
        "datasets folder in the workbench home).",
    ),
    "synthetic_size": FieldSpec(
        "Synthetic images",
        "How many synthetic training images to make; the test split is a fifth of this.",
    ),
    "skip_bad_images": FieldSpec(
        "Skip unreadable images",
        "dataset=folder: train without the files that cannot be read as images (counted in the run's summary); "
        "off: the run is refused, listing them all.",
        "Before a run starts, every image of the folder is checked (each file's header; a JPEG cut off before its "
        "end is decoded to confirm). Off, any bad file refuses the run before it is recorded, with the list; on, "
        "the run leaves them out and its summary says how many (skipped_bad_images).",
    ),
    "pipeline": FieldSpec(
        "Pipeline",
        "How batches reach the model: a DataLoader on the host, or the whole set resident on the device.",
        "• dataloader: a torch DataLoader prepares batches on the host (in worker processes when "
        "num_workers > 0) and each batch is copied to the device. The usual setup.\n"
        "• gpu-resident: the whole dataset is copied to the device once and batches are sliced there: no "
        "workers, no per-step copies. The fastest choice when the dataset fits in device memory.",
    ),
    "decode": FieldSpec(
        "JPEG decoding",
        "Where a folder's JPEGs are decoded: in the DataLoader workers (cpu), or on the GPU with nvJPEG (gpu).",
        "• cpu: the workers read, decode and resize each image: the CPU work that can leave a GPU waiting.\n"
        "• gpu: the workers only read the files; the training thread decodes the whole batch on the GPU "
        "(torchvision.io.decode_jpeg). JPEG files only, a CUDA GPU, and augmentation on the GPU or none.",
    ),
    "augment": FieldSpec(
        "Augmentation",
        "Where random crop + flip runs: per image in the CPU workers, on whole batches on the training device "
        "(the GPU; the CPU without one), or none.",
        "• cpu: per image in the DataLoader workers. Costs CPU time for every image and can leave a fast "
        "GPU waiting for data.\n"
        "• gpu: on whole batches on the training device after the copy. On a GPU it frees the CPU and is usually "
        "far cheaper; without a CUDA GPU the same batched crop + flip runs on the CPU, in the training thread.\n"
        "• none: no augmentation, the baseline that shows what augmentation costs.\n"
        "The Sample batch tab shows what the model sees.",
    ),
    "num_workers": FieldSpec(
        "Loader workers",
        "DataLoader worker processes preparing batches while the model trains (0 = in the training thread).",
        "0 is simple, but the device waits for every batch. More workers help until the CPU cores are busy; "
        "beyond the core count they only compete with each other.\n"
        "If the data-wait plot is high, add workers or move augmentation to the GPU.",
    ),
    "pin_memory": FieldSpec(
        "Pin memory",
        "Put batches in page-locked host memory for faster, asynchronous copies to a CUDA GPU.",
        "Copies from pinned memory can overlap with compute (see non_blocking). No effect without a CUDA GPU.",
    ),
    "non_blocking": FieldSpec(
        "Non-blocking copies",
        "Copy batches to the GPU with non_blocking=True, so copies from pinned memory overlap with compute.",
        "Needs pin_memory to help; no effect without a CUDA GPU.",
    ),
    "persistent_workers": FieldSpec(
        "Persistent workers",
        "Keep the DataLoader workers alive between epochs instead of starting new ones each epoch.",
        "Starting workers costs seconds with big datasets or the spawn start method. Needs num_workers ≥ 1.",
    ),
    "prefetch_factor": FieldSpec(
        "Prefetch per worker",
        "Batches each DataLoader worker prepares ahead (needs num_workers ≥ 1).",
        "Higher values smooth out uneven loading at the cost of host memory.",
    ),
    "worker_start_method": FieldSpec(
        "Worker start method",
        "How DataLoader worker processes start: fork, forkserver or spawn.",
        "• fork: fastest to start; the worker is a copy of this process (Linux).\n"
        "• spawn / forkserver: a fresh interpreter per worker: slower to start, safe with threads and CUDA. "
        "Matters most when persistent_workers is off.",
    ),
    "model": FieldSpec(
        "Model",
        "The network to train: a built-in, any torchvision classification model by name (resnet50, vit_b_16, …), "
        "or your own as package.module:function.",
        "Your own: a function returning a torch.nn.Module, importable from the working directory or PYTHONPATH; it "
        "gets num_classes when it takes it, and model_kwargs. Importing it runs your module's code, as running "
        "your training script would. Before a run starts the model is built and given a batch of 2 images of "
        "the run's size: it must return one logit per class.\n"
        "• small-cnn: a few convolution layers; quick, so the input pipeline shows clearly.\n"
        "• small-cnn-gn: the same with GroupNorm instead of BatchNorm: its result does not depend on how "
        "the batch is split, so N devices train exactly as one device on the whole batch (BatchNorm "
        "normalises each device's slice on its own); also the choice for very small batches.\n"
        "• resnet18: a real workload of about 11 M parameters (with CIFAR's stem at 32×32).\n"
        "• mobilenet_v3_small: light, many small kernels: often limited by launch overhead, not compute.",
    ),
    "model_kwargs": FieldSpec(
        "Model arguments",
        "Keyword arguments for a torchvision model or your own function, as a JSON object ({\"width\": 64}).",
        "Empty for none. The built-in models take none. Stored with the run, so the history can rerun it.",
    ),
    "image_size": FieldSpec(
        "Image size",
        "Images reach the model as image_size × image_size pixels (32 is CIFAR's own size).",
        "Folders of your images are decoded and brought to this size in the loader; 32×32 datasets (CIFAR, "
        ".npz, synthetic) are scaled on the device. Larger images make every step, and the input pipeline, "
        "costlier: 224 is ImageNet's.",
    ),
    "optimizer": FieldSpec(
        "Optimiser",
        "sgd (Nesterov momentum 0.9) or adamw (wants a smaller learning rate, about 1e-3).",
    ),
    "lr": FieldSpec(
        "Learning rate",
        "Peak learning rate: linear warm-up over the first tenth of the optimiser steps, then linear decay to 0.",
        "About 0.05–0.1 suits sgd, 1e-3 adamw; scale it with the effective batch.",
    ),
    "weight_decay": FieldSpec(
        "Weight decay",
        "Pulls weights towards zero each step (decoupled for adamw); 5e-4 is typical for CIFAR, 0 turns it off.",
    ),
    "label_smoothing": FieldSpec(
        "Label smoothing",
        "Share of each target's probability spread over the other classes (0.1 is common, 0 turns it off).",
        "Mild regularisation. Test loss is always plain cross-entropy.",
    ),
    "precision": FieldSpec(
        "Precision",
        "fp32, or mixed precision with fp16 (gradient scaler) or bf16 (compute capability 8.0+); AMP needs CUDA.",
        "• fp32: full precision everywhere.\n"
        "• fp16: mixed precision (autocast) with a gradient scaler: on tensor-core GPUs often 2–3× faster "
        "with about half the activation memory.\n"
        "• bf16: mixed precision with fp32's range, so no scaler; needs native support (Ampere or newer).",
    ),
    "channels_last": FieldSpec(
        "Channels last",
        "Store images and activations as NHWC, which tensor cores prefer for fp16/bf16 convolutions.",
        "Often 10–30 % faster with AMP; little effect in fp32 or on a CPU.",
    ),
    "compile": FieldSpec(
        "torch.compile",
        "Compile the model: off, default (fused kernels), reduce-overhead (also CUDA graphs) or max-autotune.",
        "Compiling takes tens of seconds (max-autotune minutes), kept out of images/sec and reported as compile "
        "time. reduce-overhead replays each step's kernels as one CUDA graph: the remedy for a launch-bound GPU; "
        "torch skips the graphs in some models, and the run says whether they were used.",
    ),
    "fused_optimizer": FieldSpec(
        "Fused optimizer",
        "Update every weight in one fused kernel per step (SGD/AdamW fused=True) instead of a few per tensor.",
        "Fewer launches per step: helps a launch-bound GPU. CUDA only: a CPU run ignores it and says so.",
    ),
    "cudnn_benchmark": FieldSpec(
        "cuDNN benchmark",
        "Let cuDNN time its convolution algorithms on the first steps and keep the fastest for each shape.",
        "Faster steps after a slower start when shapes stay fixed; off for bit-for-bit repeatable kernels. CUDA only.",
    ),
    "max_grad_norm": FieldSpec(
        "Clip gradient norm",
        "Scale the gradients down when their total norm exceeds this, before each optimiser step; unset = off.",
        "1.0 is a common choice. Guards against a spike that would blow the weights up (fp16: clipped after "
        "unscaling, so the loss scale does not enter the norm).",
    ),
    "epochs": FieldSpec(
        "Epochs",
        "Passes over the training set, each ending with an evaluation on the test split (ignored when max "
        "steps is set).",
        "The evaluations are the circles on the loss plot.",
    ),
    "max_steps": FieldSpec(
        "Max steps",
        "Train exactly this many steps (micro-batches), for as many epochs as that takes; unset = use epochs.",
        "Handy for short timing runs. The last epoch may be partial; an evaluation still ends it.",
    ),
    "batch_size": FieldSpec(
        "Batch size",
        "Images per step (per micro-batch).",
        "Bigger batches keep a GPU busier until memory runs out; the learning rate usually scales with the "
        "batch.",
    ),
    "accumulation_steps": FieldSpec(
        "Accumulation steps",
        "Micro-batches whose gradients add up before each optimiser step (effective batch = batch × this).",
        "The optimisation of a large batch with the memory of a small one, but no faster.",
    ),
    "seed": FieldSpec(
        "Seed",
        "Seeds the weights, the data order, augmentation and synthetic data, so runs stay comparable.",
        "The same seed makes a change of one setting show its own effect.",
    ),
    "device": FieldSpec(
        "Device",
        "auto (the CUDA GPU if there is one, else the CPU), cuda (the GPU or fail), or cpu.",
    ),
    "devices": FieldSpec(
        "Devices (processes)",
        "Train data-parallel in this many processes, one per GPU (0 = every visible GPU); 1 = one process.",
        "Each process trains on its own share of every batch with PyTorch's DistributedDataParallel and the "
        "gradients are averaged after each backward pass (NCCL between GPUs, gloo on the CPU), so the "
        "effective batch is batch × devices × accumulation. Rank 0 evaluates.\n"
        "On the CPU, several processes share the same cores: it checks a multi-process setup, it is not "
        "faster. Under torchrun the processes come from torchrun and this setting follows them.",
    ),
    "evaluate": FieldSpec(
        "Evaluate",
        "Measure test loss and accuracy at the end of each epoch (off: training figures only, no evaluation pass).",
        "Off for runs that only measure speed or memory: max-batch trials and benchmarks train a few steps and "
        "would otherwise pay a whole pass over the test split; their test accuracy is then not measured.",
    ),
    "log_every": FieldSpec(
        "Measure every",
        "Report every this many steps: one point on the plots.",
        "Reading the loss waits for the GPU to finish, so very small values slow a fast GPU down.",
    ),
    "profile": FieldSpec(
        "Profile GPU time",
        "Sample the kernel timeline with torch.profiler: GPU busy, copies, and what the idle time waited for.",
        "A sample is a few steps after warm-up, then one every profile_every steps: the GPU's own timeline "
        "says how much of the time kernels ran and whether the idle time waited for data or for the host "
        "to launch the next kernel (an event span around a step cannot tell). Each sample keeps its Chrome "
        "trace (opens in Perfetto). The sampled steps run a little slower and are left out of images/sec.",
    ),
    "profile_every": FieldSpec(
        "Profile every",
        "Steps between two profiler samples when profile is on.",
        "A sample costs about a dozen slower steps plus a fraction of a second to analyse and save.",
    ),
}


def inactive_fields(config: RunConfig, on_cpu: bool) -> dict[str, str]:
    """field → why it does nothing with the other settings (``on_cpu``: the run trains on the CPU). One list for
    the form (greyed out, the value kept) and the runs comparison ("not used")."""
    inactive: dict[str, str] = {}
    if config.dataset == "synthetic":
        inactive["data_path"] = "only used with dataset=npz, cifar10 or cifar100"
    else:
        inactive["synthetic_size"] = "only used with dataset=synthetic"
    if config.dataset != "folder":
        inactive["decode"] = "only used with dataset=folder (the other datasets are decoded already)"
        inactive["skip_bad_images"] = "only used with dataset=folder (the other datasets are decoded already)"
    if config.max_steps is not None:
        inactive["epochs"] = "max steps is set: the run takes that many steps, for as many epochs as they need"
    if config.pipeline == "gpu-resident":
        for name in ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "worker_start_method"):
            inactive[name] = "pipeline=gpu-resident uses no DataLoader"
    elif config.num_workers == 0:
        for name in ("persistent_workers", "prefetch_factor", "worker_start_method"):
            inactive[name] = "needs num_workers ≥ 1 (batches load in the training thread)"
    if on_cpu:
        inactive.setdefault("pin_memory", "on the CPU no batch is copied to a GPU, so there is nothing to pin memory "
                                          "for (the value is kept for GPU runs)")
        inactive.setdefault("non_blocking", "on the CPU there is no copy to a GPU to overlap with compute (the value "
                                            "is kept for GPU runs)")
        inactive["fused_optimizer"] = ("the fused optimizer kernels are a CUDA remedy for launch-bound steps: a CPU run "
                                       "uses the default optimizer (the value is kept for GPU runs)")
        inactive["cudnn_benchmark"] = "cuDNN is NVIDIA's: a CPU run has no cuDNN algorithms to time"
    return inactive


def cli_help(name: str, default: object) -> str:
    """The flag's help in `workbench run --help`: the field's one line and its default."""
    spec = SPECS.get(name)
    text = spec.help if spec is not None else name.replace("_", " ")
    return f"{text} (default: {_default_text(default)})".replace("%", "%%")  # argparse formats help with %


def _default_text(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if value == "":
        return "empty"
    return str(value)
