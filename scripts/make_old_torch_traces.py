"""Make the CPU-only torch.profiler traces that pin how ``workbench trace`` reads the traces the oldest torch the
project supports writes (tests/trace_analysis/data/torch-2.4/ and torch-2.6/, read by
tests/trace_analysis/test_old_torch_traces.py).

It needs that old torch, which the project's own environment does not hold (the tests read the traces as data and
need no torch at all): in a virtual environment of its own,

    python3 -m venv /tmp/old-torch && /tmp/old-torch/bin/pip install torch==2.4.1 "numpy<2"
    /tmp/old-torch/bin/python scripts/make_old_torch_traces.py tests/trace_analysis/data/torch-2.4

(torch==2.6.0 the same way made data/torch-2.6. PyPI's Linux wheels of these are the CUDA builds, 2.5 GB with
their NVIDIA libraries; they run on a machine without a GPU, and ``ProfilerActivity.CPU`` alone is asked for.) Any
torch runs it: the same loop under the project's torch is the comparison that tells the format's differences from
the machine's speed.

One tiny CNN (a convolution, ReLU, max-pool and a linear layer, batch 8, 16×16 images, SGD) trained over a
DataLoader, profiled as docs/own-script.md's snippet does (``schedule(wait=1, warmup=1, active=3)``,
``tensorboard_trace_handler``, ``profiler.step()`` once per step), one variant per file:

- ``input-bound``: ``DataLoader(num_workers=0)`` over samples that each sort 64×4096 numbers in ``__getitem__``
  (the host waits on the loader most of each step: the input-bound finding, naming num_workers);
- ``loader-keeps-up``: the same loader over samples already in memory (no finding);
- ``loader-workers``: the costly samples with ``DataLoader(num_workers=2, persistent_workers=True)``;
- ``export-chrome-trace``: the input-bound loop with ``prof.export_chrome_trace()`` at the end in place of a
  handler;
- ``gzip-handler``: the loader-keeps-up loop with ``tensorboard_trace_handler(dir, use_gzip=True)``;
- ``compiled``: the loader-keeps-up loop with the model wrapped in ``torch.compile`` (inductor on the CPU, which
  needs a C++ compiler), compiled before the profiler starts.

Each is kept whole, as torch wrote it (a few hundred kB of JSON), gzipped as
``torch-<version>-<variant>.pt.trace.json.gz``.

    python scripts/make_old_torch_traces.py OUT_FOLDER [--only VARIANT ...]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torch.utils.data import DataLoader

# The same small images and CNN as the traces of today's torch (run as scripts/…: this folder is on sys.path)
from make_profiler_option_traces import ACTIVE, BATCH, WAIT, WARMUP, Samples, tiny_cnn  # noqa: E402


def train_steps(batches: Iterator, steps: int, on_step: Callable[[], None], model: Any = None) -> None:
    model = tiny_cnn() if model is None else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        images, labels = next(batches)
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        on_step()


def run_scheduled(out: Path, loader: DataLoader, use_gzip: bool = False, model: Any = None) -> None:
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE,
                                                                     repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(out), use_gzip=use_gzip), record_shapes=False
                 ) as profiler:
        train_steps(iter(loader), WAIT + WARMUP + ACTIVE + 1, profiler.step, model)


def input_bound(out: Path) -> None:
    run_scheduled(out, DataLoader(Samples(work=True), batch_size=BATCH, num_workers=0))


def loader_keeps_up(out: Path) -> None:
    run_scheduled(out, DataLoader(Samples(), batch_size=BATCH, num_workers=0))


def loader_workers(out: Path) -> None:
    run_scheduled(out, DataLoader(Samples(work=True), batch_size=BATCH, num_workers=2, persistent_workers=True))


def export_chrome_trace(out: Path) -> None:
    loader = DataLoader(Samples(work=True), batch_size=BATCH, num_workers=0)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE)
                 ) as profiler:
        train_steps(iter(loader), WAIT + WARMUP + ACTIVE, profiler.step)
    profiler.export_chrome_trace(str(out / "trace.json"))


def gzip_handler(out: Path) -> None:
    run_scheduled(out, DataLoader(Samples(), batch_size=BATCH, num_workers=0), use_gzip=True)


def compiled(out: Path) -> None:
    model = torch.compile(tiny_cnn())
    model(torch.randn(BATCH, 3, 16, 16)).sum().backward()  # compile (forward and backward) before profiling
    run_scheduled(out, DataLoader(Samples(), batch_size=BATCH, num_workers=0), model=model)


VARIANTS: dict[str, Callable[[Path], None]] = {
    "input-bound": input_bound, "loader-keeps-up": loader_keeps_up, "loader-workers": loader_workers,
    "export-chrome-trace": export_chrome_trace, "gzip-handler": gzip_handler, "compiled": compiled}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", nargs="*", choices=list(VARIANTS), help="make only these variants")
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    # One intra-op thread: on a shared 2-core machine OpenMP's threads spin against other processes.
    torch.set_num_threads(1)
    version = torch.__version__.split("+")[0]
    for name in arguments.only or VARIANTS:
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as folder:
            VARIANTS[name](Path(folder))
            (raw,) = sorted(Path(folder).glob("*.json*"))
            target = arguments.out / f"torch-{version}-{name}.pt.trace.json.gz"
            if raw.name.endswith(".gz"):
                shutil.copy(raw, target)
            else:
                with open(raw, "rb") as source, gzip.open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink)
            print(f"wrote {target} ({target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
