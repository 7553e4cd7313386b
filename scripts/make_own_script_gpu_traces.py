"""Take the GPU traces the own-script findings are tested on: one user-style training loop per case, each
profiled the way docs/own-script.md tells a user to, each case built to provoke one finding (or to show a fix
removing it).

    python scripts/make_own_script_gpu_traces.py OUT_FOLDER [--device cuda] [--only CASE ...]

Every case is a plain PyTorch loop, nothing of the workbench in it (these stand for a user's own script):

| case | what the loop does | the finding it should give |
| --- | --- | --- |
| input-bound | a ResNet-18 on 32×32 images, DataLoader(num_workers=0) over samples that cost real CPU time | input-bound |
| input-workers | the same samples, DataLoader(num_workers=8, pin_memory=True, persistent_workers=True) | no input-bound |
| launch-bound | a 24-layer MLP of width 256 at batch 32, data already on the GPU | launch-bound, no sync named |
| sync-in-loop | the same loop with loss.item() every step | sync-in-loop, naming aten::item / _local_scalar_dense |
| sync-ahead | a ResNet-50 at batch 128, loss.item() and 30 ms of host work every step | sync-in-loop |
| sync-ahead-removed | the same without the loss.item() | (what it measures) |
| launch-larger-batch | the launch-bound MLP at batch 8192 (the "larger batch" change) | (what it measures) |
| launch-graphs | the launch-bound MLP under torch.compile(mode="reduce-overhead") (CUDA graphs) | (what it measures) |
| launch-graphs-fused | the same, and torch.optim.AdamW(..., fused=True) | (what it measures) |
| copy-bound | 64×3×224×224 float32 batches in pageable host memory, .to("cuda"), little compute | copy-bound |
| copy-pinned | the same batches pinned, .to("cuda", non_blocking=True) (the change copy-bound names) | (what it measures) |
| copy-uint8 | the same pinned, as uint8 images converted on the GPU (a quarter of the bytes) | (what it measures) |
| copy-prefetch | the pinned float32 batches copied on a side stream while the step before computes | (what it measures) |
| compute-fp32 | a ResNet-50 at batch 256, 224×224 images on the GPU, float32 | compute-bound, naming torch.autocast |
| compute-bf16 | the same under torch.autocast(bfloat16) | compute-bound, naming torch.compile |
| compute-bf16-compiled | the same, and torch.compile(model) (the change compute-bound names for 16-bit) | (what it measures) |

    python scripts/make_own_script_gpu_traces.py --trim FILE ...

``--trim`` rewrites traces in place without their flow arrows and nested host ops (each thread's outermost ops
stay, and those whose names the report reads: steps, compiled regions, the optimizer): what the findings read
(kernels, runtime calls, steps, a sync's caller, what the script already does) in under half the bytes, for the
large ResNet-50 traces kept in the repository. Host ops' self times are then their nested ops' too.

Each writes OUT_FOLDER/h100-CASE.pt.trace.json.gz (``tensorboard_trace_handler`` with ``use_gzip``; named by the
GPU when it is not an H100). With ``--device cpu`` the same loops run on the CPU (a quick check of the script
itself; those traces hold no GPU work). Needs torch and torchvision; CUDA for the traces that matter.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torch.utils.data import DataLoader, Dataset

WAIT, WARMUP, ACTIVE = 5, 2, 5  # as docs/own-script.md's snippet
STEPS = WAIT + WARMUP + ACTIVE


class CostlySamples(Dataset):
    """Each sample costs real CPU time (sorting random numbers: about 1.5 ms on a 2-core Xeon VM), as decoding
    and augmenting an image does; 8 workers load a batch in less time than a ResNet-18 step takes."""

    def __len__(self) -> int:
        return 1 << 20

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(index)
        work = torch.randn(4, 4096, generator=generator).sort(dim=1).values
        image = work[:3, :1024].reshape(3, 32, 32)
        return image, index % 10


def strided_cnn() -> nn.Module:
    """Little compute on a large image (an 8×8 stride-8 conv first): the copy of the batch is most of the step."""
    return nn.Sequential(nn.Conv2d(3, 16, 8, stride=8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(16, 10))


def deep_mlp(width: int = 256, depth: int = 24) -> nn.Module:
    layers: list[nn.Module] = [nn.Linear(64, width)]
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def train(model: nn.Module, batches: Iterator, device: torch.device, out: Path, *, item_every_step: bool = False,
          autocast: bool = False, non_blocking: bool = False, fused_optimizer: bool = False,
          host_seconds: float = 0.0) -> None:
    """The user's loop: forward, loss, backward, step, profiler.step(), under the documented profiler settings."""
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **({"fused": True} if fused_optimizer else {}))
    losses: list[float] = []
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities, schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(out), use_gzip=True), record_shapes=False) as profiler:
        for step, (inputs, labels) in enumerate(batches):
            if step >= STEPS:
                break
            inputs = inputs.to(device, non_blocking=non_blocking)
            labels = labels.to(device, non_blocking=non_blocking)
            if inputs.dtype == torch.uint8:
                inputs = inputs.float().div_(255)  # on the GPU: the copy moved a quarter of the bytes
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = nn.functional.cross_entropy(model(inputs), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if item_every_step:
                losses.append(loss.item())  # the sync a user's logging adds
            if host_seconds:
                time.sleep(host_seconds)  # the host's own work between steps (logging, a checkpoint's bookkeeping)
            profiler.step()
    if device.type == "cuda":
        torch.cuda.synchronize()


def in_host_memory(shape: tuple[int, ...], batch: int, pinned: bool, dtype: torch.dtype = torch.float32) -> Iterator:
    """The same batch every step, in host memory (pageable, or pinned), for the loop to copy to the GPU; uint8
    images are a quarter of float32's bytes (the loop converts them on the GPU)."""
    inputs = torch.randn(batch, *shape) if dtype == torch.float32 else torch.randint(0, 256, (batch, *shape),
                                                                                      dtype=dtype)
    labels = torch.randint(0, 10, (batch,))
    if pinned and torch.cuda.is_available():
        inputs, labels = inputs.pin_memory(), labels.pin_memory()
    while True:
        yield inputs, labels


def prefetched(batches: Iterator, device: torch.device) -> Iterator:
    """The next batch copied on a side stream while the current one computes (the usual CUDA prefetcher)."""
    if device.type != "cuda":
        yield from batches
        return
    stream = torch.cuda.Stream()

    def copied(batch: tuple) -> tuple:
        with torch.cuda.stream(stream):
            return tuple(tensor.to(device, non_blocking=True) for tensor in batch)

    coming = copied(next(batches))
    for batch in batches:
        torch.cuda.current_stream().wait_stream(stream)
        current = coming
        for tensor in current:
            tensor.record_stream(torch.cuda.current_stream())
        coming = copied(batch)
        yield current


def on_gpu(shape: tuple[int, ...], batch: int, device: torch.device) -> Iterator:
    inputs = torch.randn(batch, *shape, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    while True:
        yield inputs, labels


def resnet(depth: int) -> nn.Module:
    import torchvision

    return getattr(torchvision.models, f"resnet{depth}")(num_classes=10)


def compiled(model: nn.Module, mode: str = "reduce-overhead") -> nn.Module:
    return torch.compile(model, mode=mode)  # reduce-overhead: CUDA graphs, the change launch-bound names


def cases(device: torch.device) -> dict[str, Callable[[Path], None]]:
    cuda = device.type == "cuda"
    return {
        "input-bound": lambda out: train(resnet(18), iter(DataLoader(CostlySamples(), batch_size=64,
                                                                     num_workers=0)), device, out),
        "input-workers": lambda out: train(resnet(18), iter(DataLoader(
            CostlySamples(), batch_size=64, num_workers=8, pin_memory=cuda, persistent_workers=True)), device, out,
            non_blocking=True),
        "launch-bound": lambda out: train(deep_mlp(), on_gpu((64,), 32, device), device, out),
        "sync-in-loop": lambda out: train(deep_mlp(), on_gpu((64,), 32, device), device, out, item_every_step=True),
        "sync-ahead": lambda out: train(resnet(50), on_gpu((3, 224, 224), 128, device), device, out,
                                        item_every_step=True, host_seconds=0.03),
        "sync-ahead-removed": lambda out: train(resnet(50), on_gpu((3, 224, 224), 128, device), device, out,
                                                host_seconds=0.03),
        "launch-larger-batch": lambda out: train(deep_mlp(), on_gpu((64,), 8192, device), device, out),
        "launch-graphs": lambda out: train(compiled(deep_mlp()), on_gpu((64,), 32, device), device, out),
        "launch-graphs-fused": lambda out: train(compiled(deep_mlp()), on_gpu((64,), 32, device), device, out,
                                                 fused_optimizer=True),
        "copy-bound": lambda out: train(strided_cnn(), in_host_memory((3, 224, 224), 64, pinned=False), device, out),
        "copy-pinned": lambda out: train(strided_cnn(), in_host_memory((3, 224, 224), 64, pinned=True), device, out,
                                         non_blocking=True),
        "copy-uint8": lambda out: train(strided_cnn(), in_host_memory((3, 224, 224), 64, True, torch.uint8), device,
                                        out, non_blocking=True),
        "copy-prefetch": lambda out: train(strided_cnn(), prefetched(in_host_memory((3, 224, 224), 64, pinned=True),
                                                                     device), device, out),
        "compute-fp32": lambda out: train(resnet(50), on_gpu((3, 224, 224), 256, device), device, out),
        "compute-bf16": lambda out: train(resnet(50), on_gpu((3, 224, 224), 256, device), device, out,
                                          autocast=True),
        "compute-bf16-compiled": lambda out: train(compiled(resnet(50), "default"), on_gpu((3, 224, 224), 256, device),
                                                   device, out, autocast=True),
    }


def gpu_label(device: torch.device) -> str:
    if device.type != "cuda":
        return "cpu"
    name = torch.cuda.get_device_name(device).lower()
    for label in ("h100", "h200", "a100", "l40s", "a10g", "v100", "t4"):
        if label in name:
            return label
    return "cuda"


KEPT_HOST_OPS = ("ProfilerStep#", "Torch-Compiled Region", "CompiledFunction", "Optimizer.step#", "aten::_fused_")


def trim(path: Path) -> None:
    """Without flow arrows and nested ops: each thread's outermost ops stay (a sync's caller is still named), with
    the annotations and the ops whose names the report reads (compiled regions, the fused optimizer)."""
    with gzip.open(path, "rt", encoding="utf-8") as file:
        trace = json.load(file)
    host = sorted((event for event in trace["traceEvents"] if event.get("cat") == "cpu_op"),
                  key=lambda event: (event.get("tid"), event["ts"], -event.get("dur", 0)))
    outermost, reach = set(), {}
    for event in host:
        if event["ts"] >= reach.get(event.get("tid"), float("-inf")):
            outermost.add(id(event))
            reach[event.get("tid")] = event["ts"] + event.get("dur", 0)
    trace["traceEvents"] = [
        event for event in trace["traceEvents"]
        if event.get("ph") not in ("s", "f") and (event.get("cat") != "cpu_op" or id(event) in outermost
                                                  or str(event.get("name", "")).startswith(KEPT_HOST_OPS))]
    with gzip.open(path, "wt", encoding="utf-8") as file:
        json.dump(trace, file, separators=(",", ":"))
    print(f"trimmed {path} ({path.stat().st_size:,} bytes)")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--trim"]:
        for name in argv[1:]:
            trim(Path(name))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    torch.manual_seed(0)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # as most training scripts set it
    args.out.mkdir(parents=True, exist_ok=True)
    label = gpu_label(device)
    for name, case in cases(device).items():
        if args.only and name not in args.only:
            continue
        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            case(Path(folder))
            (written,) = Path(folder).glob("*.pt.trace.json.gz")
            target = args.out / f"{label}-{name}.pt.trace.json.gz"
            shutil.copyfile(written, target)
        print(f"{name}: {target} ({target.stat().st_size:,} bytes, {time.perf_counter() - began:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
