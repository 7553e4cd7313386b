"""What does the workbench engine cost over a plain PyTorch training loop?

The engine (`workbench.engine.run`) against a loop written the way PyTorch's tutorials write one
(DataLoader over a TensorDataset, `.to(device)`, zero_grad, forward, loss, backward, step), with the
same model, data, batch size, precision, optimizer and seed. The plain loop takes no `.item()` per
step (the tutorials' `running_loss += loss.item()` syncs the GPU every step; leaving it out makes the
baseline faster, so the ratio is the conservative one). Both measure the same steady state: samples ÷
seconds over every step after the first `log_every` (warm-up), on the host's wall clock, the device
synchronised at the ends. Runs are interleaved (engine, plain; then plain, engine; ...) so drift in
the machine's speed hits both alike. Target: engine ÷ plain ≥ 0.97.

    python benchmarks/engine_overhead.py --quick            # this CPU, about a minute
    python benchmarks/engine_overhead.py                    # resnet18 on a GPU (small-cnn on a CPU)
    python benchmarks/engine_overhead.py --precision bf16 --pipeline gpu-resident
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from _common import RESULTS, Deadline, machine, write_results
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from workbench.config import RunConfig
from workbench.engine import probe_device, run
from workbench.engine.data import CIFAR_MEAN, CIFAR_STD, load_arrays
from workbench.engine.events import RunEnded
from workbench.engine.models import build_model

TARGET = 0.97


def engine_rate(config: RunConfig) -> float:
    ended = None
    for event in run(config):
        if isinstance(event, RunEnded):
            ended = event
    if ended.status != "finished":
        raise RuntimeError(f"engine run {ended.status}: {ended.reason}")
    return ended.summary.images_per_sec


def plain_rate(config: RunConfig) -> float:
    """The tutorial loop, timed over the steps after the first ``log_every``."""
    device = torch.device("cuda") if probe_device(config.device).type == "cuda" else torch.device("cpu")
    on_cuda = device.type == "cuda"
    torch.manual_seed(config.seed)
    if on_cuda:
        torch.backends.cudnn.benchmark = True
    arrays = load_arrays(config)
    model = build_model(config.model, arrays.num_classes).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9, nesterov=True,
                                weight_decay=config.weight_decay)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(config.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=amp_dtype is torch.float16)
    mean = torch.tensor(CIFAR_MEAN, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(CIFAR_STD, device=device).view(1, 3, 1, 1) * 255

    if config.pipeline == "gpu-resident":
        images_on_device = arrays.train_images.to(device)
        labels_on_device = arrays.train_labels.to(device)

        def batches():
            order = torch.randperm(len(labels_on_device), device=device)
            for step in range(len(order) // config.batch_size):
                index = order[step * config.batch_size:(step + 1) * config.batch_size]
                yield images_on_device[index], labels_on_device[index]
    else:
        options = dict(batch_size=config.batch_size, shuffle=True, drop_last=True, num_workers=config.num_workers,
                       pin_memory=on_cuda and config.pin_memory)
        if config.num_workers > 0:
            options.update(persistent_workers=True, prefetch_factor=config.prefetch_factor)
        loader = DataLoader(TensorDataset(arrays.train_images, arrays.train_labels), **options)

        def batches():
            return iter(loader)

    model.train()
    warmup, steps = config.log_every, config.max_steps
    began = None
    for step, (images, labels) in enumerate(batches()):
        if step == warmup:
            if on_cuda:
                torch.cuda.synchronize()
            began = time.perf_counter()
        if step == steps:
            break
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        images = (images.float() - mean) / std
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            outputs = model(images)
            loss = criterion(outputs, labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    if on_cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    return (steps - warmup) * config.batch_size / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run (small-cnn, few steps, 2 pairs)")
    parser.add_argument("--model", default=None, help="default: resnet18 on a GPU, small-cnn on a CPU")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--pipeline", default="dataloader", choices=("dataloader", "gpu-resident"))
    parser.add_argument("--workers", type=int, default=None,
                        help="DataLoader workers (default: 8 on a GPU, 0 on a CPU)")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="steps per run, warm-up included")
    parser.add_argument("--repeats", type=int, default=None, help="engine/plain pairs")
    parser.add_argument("--budget-seconds", type=float, default=540, help="start no new pair after this")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    device = probe_device("auto")
    on_cuda = device.type == "cuda"
    model = args.model or ("resnet18" if on_cuda and not args.quick else "small-cnn")
    batch = args.batch_size or (256 if on_cuda else 128)
    steps = args.steps or (24 if args.quick else 300 if on_cuda else 80)
    repeats = args.repeats or (2 if args.quick else 5)
    workers = args.workers if args.workers is not None else (min(8, device.cpu_count) if on_cuda else 0)
    log_every = max(2, steps // 6)
    config = RunConfig(
        dataset="synthetic", synthetic_size=batch * (steps + 2), model=model, batch_size=batch, max_steps=steps,
        log_every=log_every, precision=args.precision, pipeline=args.pipeline, augment="none", num_workers=workers,
        persistent_workers=True, device="auto", seed=0,
    )
    problems = config.validate(device)
    if problems:
        raise SystemExit("engine_overhead: " + "; ".join(problems))

    deadline = Deadline(args.budget_seconds)
    pairs = []
    for repeat in range(repeats):
        if deadline.passed():
            print(f"budget of {args.budget_seconds:g} s spent after {len(pairs)} pairs")
            break
        order = ("engine", "plain") if repeat % 2 == 0 else ("plain", "engine")
        rates = {}
        for which in order:
            rates[which] = engine_rate(config) if which == "engine" else plain_rate(config)
        pairs.append({"order": list(order), **rates, "ratio": rates["engine"] / rates["plain"]})
        print(f"pair {repeat + 1}: engine {rates['engine']:,.0f} img/s, plain {rates['plain']:,.0f} img/s, "
              f"ratio {rates['engine'] / rates['plain']:.3f}", flush=True)

    ratios = [pair["ratio"] for pair in pairs]
    median_ratio = statistics.median(ratios) if ratios else None
    print(f"\n{model}, batch {batch}, {args.precision}, {args.pipeline}, {workers} workers, {steps} steps "
          f"(first {log_every} = warm-up) on {device.name} [{device.type}], torch {device.torch_version}")
    print(f"{'pair':>4}  {'engine img/s':>13}  {'plain img/s':>12}  {'ratio':>6}")
    for index, pair in enumerate(pairs, 1):
        print(f"{index:>4}  {pair['engine']:>13,.0f}  {pair['plain']:>12,.0f}  {pair['ratio']:>6.3f}")
    if median_ratio is not None:
        verdict = "meets" if median_ratio >= TARGET else "misses"
        print(f"median ratio {median_ratio:.3f} ({verdict} the target ≥ {TARGET})")
    out = write_results(
        RESULTS / (args.out or f"engine_overhead-{device.type}{'-quick' if args.quick else ''}.json"),
        {"machine": machine(device), "config": config.to_dict(), "pairs": pairs, "median_ratio": median_ratio,
         "target": TARGET},
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
