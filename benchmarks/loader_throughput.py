"""How fast can each input pipeline deliver augmented, normalised batches, with no model at all?

Three ways the engine feeds a run, measured with the engine's own classes, from uint8 images to a
normalised float batch on the device (random crop + flip in all three):
  per-sample    DataLoader workers run torchvision's per-image transforms (augment=cpu)
  batched       DataLoader workers only index and collate; crop + flip run once per batch (augment=gpu)
  gpu-resident  the whole set on the device, batches by randperm, batched crop + flip (no DataLoader)
for workers 0/1/2 and batch 128/512. images/sec = images ÷ seconds over the batches after the first
few (worker start-up left out), the device synchronised before the clock stops. Target on a CPU: the
batched pipeline ≥ 10× per-sample at equal workers.

--folder: the question a user with their own images asks. A JPEG folder made here (10 classes × 300 photo-like
files, _jpeg_folder.py) fed at 224×224 through dataset=folder's pipeline, workers 0/1/2:
  augment=cpu   the workers decode (Pillow), random-resized-crop and flip each image
  augment=gpu   the workers decode and resize; the batch is cropped and flipped on the device
  decode=gpu    the workers only read the files; nvJPEG decodes the batch (CUDA only: skipped with the reason)

    python benchmarks/loader_throughput.py --quick     # a smoke run
    python benchmarks/loader_throughput.py             # the full grid (the device: CUDA when present)
    python benchmarks/loader_throughput.py --folder [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from _common import RESULTS, Deadline, machine, write_results

from workbench.config import RunConfig
from workbench.engine import probe_device
from workbench.engine.data import DevicePreparer, LoaderBatches, ResidentBatches, load_arrays
from workbench.engine.device import resolve

TARGET = 10.0
PIPELINES = ("per-sample", "batched", "gpu-resident")


def timed_rate(source, prepare, batch: int, batches: int, warmup: int, on_cuda: bool) -> float:
    """images/sec of ``batches`` batches from ``source`` through ``prepare``, after ``warmup`` untimed ones
    (epochs restart as needed); the source is closed afterwards."""
    try:
        done, began = 0, None
        while done < warmup + batches:
            for images, labels in source.epoch():
                if done == warmup:
                    if on_cuda:
                        torch.cuda.synchronize()
                    began = time.perf_counter()
                prepare(images, labels)
                done += 1
                if done == warmup + batches:
                    break
        if on_cuda:
            torch.cuda.synchronize()
        return batches * batch / (time.perf_counter() - began)
    finally:
        source.close()


def measure(pipeline: str, workers: int, batch: int, batches: int, warmup: int, device_info, size: int) -> float:
    device = resolve(device_info)
    on_cuda = device.type == "cuda"
    config = RunConfig(
        dataset="synthetic", synthetic_size=size, batch_size=batch, num_workers=workers, persistent_workers=True,
        pipeline="gpu-resident" if pipeline == "gpu-resident" else "dataloader",
        augment="cpu" if pipeline == "per-sample" else "gpu", device=device_info.type,
    )
    arrays = load_arrays(config)
    if pipeline == "gpu-resident":
        source = ResidentBatches(arrays, config, device)
    else:
        source = LoaderBatches(arrays, config, pin_memory=on_cuda)
    prepare = DevicePreparer(config, device, non_blocking=on_cuda)
    return timed_rate(source, prepare, batch, batches, warmup, on_cuda)


FOLDER_CELLS = (("cpu", "cpu"), ("gpu", "cpu"), ("gpu", "gpu"))  # (augment, decode)


def measure_folder(root: str, augment: str, decode: str, workers: int, batch: int, batches: int, warmup: int,
                   device_info, image_size: int) -> float:
    """images/sec of dataset=folder's training pipeline: workers' decode and transforms, then the device's
    (augment=gpu's crop and flip, decode=gpu's nvJPEG) and the normalisation, as a run's step gets them."""
    from workbench.engine.datasets import load_data
    from workbench.engine.folder_data import decode_on_device
    from workbench.engine.pipelines import build_pipeline

    device = resolve(device_info)
    on_cuda = device.type == "cuda"
    config = RunConfig(dataset="folder", data_path=root, image_size=image_size, batch_size=batch,
                       num_workers=workers, persistent_workers=True, augment=augment, decode=decode,
                       device=device_info.type)
    source, _ = build_pipeline(load_data(config), config, device, None, [])
    prepare = DevicePreparer(config, device, non_blocking=on_cuda,
                             decode_batch=decode_on_device if decode == "gpu" else None)
    return timed_rate(source, prepare, batch, batches, warmup, on_cuda)


def folder_main(args: argparse.Namespace) -> None:
    from _jpeg_folder import make_jpeg_folder

    device = probe_device("auto")
    classes, per_class = (10, 60) if args.quick else (10, 300)
    root = Path(args.folder_root or Path(tempfile.gettempdir()) / f"workbench-loader-jpegs-{classes}x{per_class}")
    began = time.perf_counter()
    folder = make_jpeg_folder(root, classes, per_class)
    print(f"{folder['files']:,} JPEGs in {root} (mean {folder['mean_file_bytes'] / 1024:,.0f} KiB; made or "
          f"found in {time.perf_counter() - began:.0f} s)", flush=True)
    workers_list = [int(value) for value in args.workers.split(",")]
    batch = args.folder_batch
    batches = args.batches or (4 if args.quick else 12)
    repeats = args.repeats or (1 if args.quick else 3)
    warmup = 2
    deadline = Deadline(args.budget_seconds)
    on_cuda = device.type == "cuda"
    skipped = None if on_cuda else "decode=gpu needs a CUDA GPU (nvJPEG); this machine has none"
    cells = [(augment, decode) for augment, decode in FOLDER_CELLS if decode == "cpu" or on_cuda]
    rows = []
    for workers in workers_list:
        if deadline.passed():
            print(f"budget of {args.budget_seconds:.0f} s spent: workers {workers} and after not measured")
            break
        # Interleaved (each placement once per repeat): on a shared machine all see the same load.
        rates: dict[tuple[str, str], list[float]] = {cell: [] for cell in cells}
        for _ in range(repeats):
            for augment, decode in cells:
                rates[(augment, decode)].append(measure_folder(str(root), augment, decode, workers, batch, batches,
                                                               warmup, device, args.image_size))
        for (augment, decode), values in rates.items():
            rows.append({"augment": augment, "decode": decode, "workers": workers, "batch_size": batch,
                         "image_size": args.image_size, "images_per_sec": statistics.median(values),
                         "rates": values})
            print(f"augment={augment} decode={decode} workers {workers}: {statistics.median(values):>8,.0f} img/s "
                  f"({', '.join(f'{v:,.0f}' for v in values)})", flush=True)

    print(f"\nJPEG folder at {args.image_size}×{args.image_size} on {device.name} [{device.type}], torch "
          f"{device.torch_version}: {folder['files']:,} files, batch {batch}; {batches} timed batches after {warmup}, "
          f"median of {repeats}")
    print(f"{'workers':>7}  {'augment=cpu':>12}  {'augment=gpu':>12}  {'decode=gpu':>12}")
    for workers in workers_list:
        cell = {(r["augment"], r["decode"]): r["images_per_sec"] for r in rows if r["workers"] == workers}
        if not cell:
            continue
        gpu_decode = f"{cell[('gpu', 'gpu')]:>12,.0f}" if ("gpu", "gpu") in cell else f"{'skipped':>12}"
        print(f"{workers:>7}  {cell[('cpu', 'cpu')]:>12,.0f}  {cell[('gpu', 'cpu')]:>12,.0f}  {gpu_decode}")
    if skipped:
        print(f"decode=gpu skipped: {skipped}")
    out = write_results(
        RESULTS / (args.out or f"loader_throughput-folder-{device.type}{'-quick' if args.quick else ''}.json"),
        {"machine": machine(device), "folder": folder, "batch_size": batch, "image_size": args.image_size,
         "batches": batches, "warmup": warmup, "repeats": repeats, "rows": rows, "decode_gpu_skipped": skipped},
    )
    print(f"wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches, one repeat")
    parser.add_argument("--folder", action="store_true", help="a JPEG folder at --image-size (made on first use)")
    parser.add_argument("--folder-root", default=None, help="where the JPEG folder is made (default: a temp folder)")
    parser.add_argument("--folder-batch", type=int, default=64)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--workers", default="0,1,2")
    parser.add_argument("--batch-sizes", default="128,512")
    parser.add_argument("--batches", type=int, default=None, help="timed batches per measurement")
    parser.add_argument("--repeats", type=int, default=None, help="measurements per cell (the median is kept)")
    parser.add_argument("--budget-seconds", type=float, default=540)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.folder:
        folder_main(args)
        return

    device = probe_device("auto")
    workers_list = [int(value) for value in args.workers.split(",")]
    batch_sizes = [int(value) for value in args.batch_sizes.split(",")]
    batches = args.batches or (6 if args.quick else 30)
    repeats = args.repeats or (1 if args.quick else 3)
    warmup = 3
    deadline = Deadline(args.budget_seconds)
    rows = []
    for batch in batch_sizes:
        size = batch * (warmup + batches + 1)
        for workers in workers_list:
            pipelines = [p for p in PIPELINES if p != "gpu-resident" or workers == workers_list[0]]  # no workers
            if deadline.passed():
                break
            # Interleaved (per-sample, batched, ... per repeat): on a shared machine both see the same load.
            rates: dict[str, list[float]] = {pipeline: [] for pipeline in pipelines}
            for _ in range(repeats):
                for pipeline in pipelines:
                    rates[pipeline].append(measure(pipeline, workers, batch, batches, warmup, device, size))
            for pipeline in pipelines:
                rows.append({"pipeline": pipeline, "workers": None if pipeline == "gpu-resident" else workers,
                             "batch_size": batch, "images_per_sec": statistics.median(rates[pipeline]),
                             "rates": rates[pipeline]})
                print(f"{pipeline:<13} workers {workers if pipeline != 'gpu-resident' else '-'}  batch {batch:>4}: "
                      f"{statistics.median(rates[pipeline]):>12,.0f} img/s", flush=True)

    print(f"\nLoader-only throughput on {device.name} [{device.type}], torch {device.torch_version}; "
          f"{batches} timed batches after {warmup}, median of {repeats}")
    print(f"{'batch':>5}  {'workers':>7}  {'per-sample':>12}  {'batched':>12}  {'gpu-resident':>12}  "
          f"{'batched ÷ per-sample':>20}")
    ratios = []
    for batch in batch_sizes:
        resident = next((r["images_per_sec"] for r in rows if r["batch_size"] == batch
                         and r["pipeline"] == "gpu-resident"), None)
        for workers in workers_list:
            cell = {r["pipeline"]: r["images_per_sec"] for r in rows
                    if r["batch_size"] == batch and r["workers"] == workers}
            if not cell:
                continue
            ratio = cell["batched"] / cell["per-sample"] if "batched" in cell and "per-sample" in cell else None
            if ratio is not None:
                ratios.append({"batch_size": batch, "workers": workers, "ratio": ratio})
            print(f"{batch:>5}  {workers:>7}  {cell.get('per-sample', float('nan')):>12,.0f}  "
                  f"{cell.get('batched', float('nan')):>12,.0f}  "
                  f"{resident if resident is not None else float('nan'):>12,.0f}  "
                  f"{ratio if ratio is not None else float('nan'):>19.1f}×")
    if ratios:
        worst = min(r["ratio"] for r in ratios)
        print(f"smallest batched ÷ per-sample ratio {worst:.1f}× ({'meets' if worst >= TARGET else 'misses'} "
              f"the target ≥ {TARGET:g}× at equal workers)")
    out = write_results(
        RESULTS / (args.out or f"loader_throughput-{device.type}{'-quick' if args.quick else ''}.json"),
        {"machine": machine(device), "batches": batches, "warmup": warmup, "repeats": repeats, "rows": rows,
         "ratios": ratios, "target": TARGET},
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
