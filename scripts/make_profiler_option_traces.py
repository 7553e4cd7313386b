"""Make the CPU-only torch.profiler traces that pin how ``workbench trace`` reads the options a user may leave on
(tests/trace_analysis/data/profiler-options/, read by tests/trace_analysis/test_profiler_options.py).

One tiny CNN, a few real steps over a DataLoader, profiled once per variant:

- ``all-options``: record_shapes, with_stack, profile_memory, with_flops and with_modules all on (python_function
  spans, ``[memory]`` instants, extra args);
- ``loader-workers``: DataLoader(num_workers=2, persistent_workers=True) over samples that cost CPU time: the loader's
  ``_MultiProcessingDataLoaderIter.__next__`` waits on worker processes;
- ``compiled``: the model wrapped in torch.compile (inductor on the CPU); left out where it cannot compile;
- ``annotations``: nested record_function spans in each step, one named like a step ("ProfilerStep#999"), and one
  user annotation opened in the first recorded step and closed in the last;
- ``step-named-over-steps``: record_function("ProfilerStep#1000") opened in the first recorded step and closed
  in the last (which span is the loop's step cannot be told: the report says the spans overlap);
- ``no-step-calls``: no schedule and no profiler.step(): one ``with profile(...)`` around three iterations;
- ``export-chrome-trace``: prof.export_chrome_trace() at the end instead of an on_trace_ready handler;
- ``gzip-handler``: tensorboard_trace_handler(dir, use_gzip=True);
- ``repeat-2``: schedule(..., repeat=2): two files from one process in one folder;
- ``two-threads``: a background thread runs torch ops while the loop trains (host ops from two tids; recorded with
  experimental_config=_ExperimentalConfig(profile_all_threads=True), as the profiler records only its own thread
  otherwise);
- ``acc-events``: acc_events=True (events kept across the schedule's cycles) and a default experimental_config,
  repeat=2: one file per cycle.

Each trace is trimmed to stay small enough to commit: every event is kept but the Python frames (python_function
spans) and instants ([memory] events) past the first few of each, which no figure reads (the reader still meets
them). The traces are written gzipped as ``cpu-<variant>.pt.trace.json.gz``; a variant that writes one file per
cycle as a folder, ``cpu-<variant>/cpu-<variant>.<n>.pt.trace.json.gz`` (one tensorboard_trace_handler worker's
names: the reader takes them for one process's cycles). Step times depend on the machine and its load: the tests
read the traces' structure (steps found, notes, which spans are present), not their times.

    python scripts/make_profiler_option_traces.py OUT_FOLDER [--raw RAW_FOLDER]

``--raw`` also keeps the untrimmed traces there (to read the whole file with ``workbench trace``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler
from torch.utils.data import DataLoader, Dataset

SAMPLES = 96
BATCH = 8
WAIT, WARMUP, ACTIVE = 1, 1, 3
# Python frames and instants kept per (phase, category): enough that the reader meets them, few enough to commit.
KEPT_PER_KIND = 40


class Samples(Dataset):
    """Small images; ``work`` adds CPU time per sample, as decoding and augmenting one does."""

    def __init__(self, work: bool = False) -> None:
        self.work = work
        self.images = torch.randn(SAMPLES, 3, 16, 16, generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int):
        image = self.images[index]
        if self.work:
            generator = torch.Generator().manual_seed(index)
            noise = torch.randn(64, 4096, generator=generator).sort(dim=1).values.cumsum(dim=1)
            image = image + noise.mean() * 0
        return image, index % 10


def tiny_cnn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))


def train_steps(model: torch.nn.Module, batches: Iterator, steps: int,
                on_step: Callable[[int], None] = lambda step: None, step_body: Callable[[int], Any] | None = None
                ) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        images, labels = next(batches)
        if step_body is not None:
            with step_body(step):
                loss = torch.nn.functional.cross_entropy(model(images), labels)
        else:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        on_step(step)


def scheduled(out: Path, repeat: int = 1, use_gzip: bool = False, **options: Any) -> profile:
    return profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE,
                                                                       repeat=repeat),
                   on_trace_ready=tensorboard_trace_handler(str(out), use_gzip=use_gzip), **options)


def run_scheduled(out: Path, model: torch.nn.Module | None = None, loader: DataLoader | None = None,
                  repeat: int = 1, use_gzip: bool = False, step_body: Callable[[int], Any] | None = None,
                  **options: Any) -> None:
    model = model or tiny_cnn()
    loader = loader or DataLoader(Samples(), batch_size=BATCH)
    with scheduled(out, repeat=repeat, use_gzip=use_gzip, **options) as profiler:
        train_steps(model, iter(loader), (WAIT + WARMUP + ACTIVE) * repeat + 1, on_step=lambda _: profiler.step(),
                    step_body=step_body)


def all_options(out: Path) -> None:
    run_scheduled(out, record_shapes=True, with_stack=True, profile_memory=True, with_flops=True, with_modules=True)


def loader_workers(out: Path) -> None:
    loader = DataLoader(Samples(work=True), batch_size=BATCH, num_workers=2, persistent_workers=True)
    run_scheduled(out, loader=loader)


def compiled(out: Path) -> None:
    model = torch.compile(tiny_cnn())
    images = torch.randn(BATCH, 3, 16, 16)
    model(images).sum().backward()  # compile (forward and backward) before the profiler starts
    run_scheduled(out, model=model)


class _Annotated:
    """A step's body wrapped in nested record_function spans, one of them named like a step."""

    def __init__(self, step: int) -> None:
        self.spans = [record_function("forward_and_loss"), record_function("ProfilerStep#999"),
                      record_function("inner.model")]

    def __enter__(self) -> None:
        for span in self.spans:
            span.__enter__()

    def __exit__(self, *exc: Any) -> None:
        for span in reversed(self.spans):
            span.__exit__(*exc)


def _span_over_steps(out: Path, name: str, step_body: Callable[[int], Any] | None = None) -> None:
    """The loop with a record_function ``name`` opened at the first recorded step and closed inside the last (a span
    open when the profiler starts or writes its trace is not recorded): it crosses the steps' bounds."""
    model, loader = tiny_cnn(), DataLoader(Samples(), batch_size=BATCH)
    over_steps = record_function(name)
    with scheduled(out) as profiler:
        def on_step(step: int) -> None:
            if step == WAIT + WARMUP + ACTIVE - 1:
                over_steps.__exit__(None, None, None)
            profiler.step()
            if step == WAIT + WARMUP - 1:
                over_steps.__enter__()

        train_steps(model, iter(loader), WAIT + WARMUP + ACTIVE + 1, on_step=on_step, step_body=step_body)


def annotations(out: Path) -> None:
    _span_over_steps(out, "epoch_over_steps", step_body=_Annotated)


def step_named_over_steps(out: Path) -> None:
    _span_over_steps(out, "ProfilerStep#1000")  # as annotations' epoch_over_steps, named like a step


def no_step_calls(out: Path) -> None:
    model, loader = tiny_cnn(), DataLoader(Samples(), batch_size=BATCH)
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        train_steps(model, iter(loader), 3)
    profiler.export_chrome_trace(str(out / "trace.json"))


def export_chrome_trace(out: Path) -> None:
    model, loader = tiny_cnn(), DataLoader(Samples(), batch_size=BATCH)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE)
                 ) as profiler:
        train_steps(model, iter(loader), WAIT + WARMUP + ACTIVE, on_step=lambda _: profiler.step())
    profiler.export_chrome_trace(str(out / "trace.json"))


def gzip_handler(out: Path) -> None:
    run_scheduled(out, use_gzip=True)


def repeat_2(out: Path) -> None:
    run_scheduled(out, repeat=2)


def two_threads(out: Path) -> None:
    stop = threading.Event()

    def background() -> None:
        weights = torch.randn(256, 256)
        while not stop.is_set():
            with record_function("background.work"):
                weights = torch.tanh(weights @ weights.T) / 16

    worker = threading.Thread(target=background, daemon=True)
    worker.start()
    try:
        # The profiler records only the thread that started it unless told to record every thread.
        run_scheduled(out, experimental_config=_ExperimentalConfig(profile_all_threads=True))
    finally:
        stop.set()
        worker.join()


def acc_events(out: Path) -> None:
    run_scheduled(out, repeat=2, acc_events=True, experimental_config=_ExperimentalConfig())


VARIANTS: dict[str, Callable[[Path], None]] = {
    "all-options": all_options, "loader-workers": loader_workers, "compiled": compiled, "annotations": annotations,
    "step-named-over-steps": step_named_over_steps, "no-step-calls": no_step_calls,
    "export-chrome-trace": export_chrome_trace, "gzip-handler": gzip_handler, "repeat-2": repeat_2,
    "two-threads": two_threads, "acc-events": acc_events}


def load(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as file:
        return json.load(file)


def trimmed(trace: dict) -> dict:
    """The trace with only the first few python_function spans and instants (see the docstring)."""
    kept, per_kind = [], {}
    for event in trace["traceEvents"]:
        kind = (event.get("ph"), event.get("cat"))
        if kind[0] == "i" or kind[1] == "python_function":
            per_kind[kind] = per_kind.get(kind, 0) + 1
            if per_kind[kind] > KEPT_PER_KIND:
                continue
        kept.append(event)
    result = {key: value for key, value in trace.items() if key != "traceEvents"}
    result["traceEvents"] = kept
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--raw", type=Path, help="also keep the untrimmed traces here")
    parser.add_argument("--only", nargs="*", choices=list(VARIANTS), help="make only these variants")
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    # One intra-op thread: on a shared 2-core machine OpenMP's threads spun against other processes and a 1 ms step
    # of the tiny CNN took 80 ms.
    torch.set_num_threads(1)
    for name in arguments.only or VARIANTS:
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as folder:
            try:
                VARIANTS[name](Path(folder))
            except Exception as error:  # torch.compile without a working C++ compiler: said, not fatal
                print(f"{name}: not made ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})")
                continue
            raws = sorted(Path(folder).glob("*.json*"))
            for number, raw in enumerate(raws, start=1):
                # One file per cycle: a folder of them, named as tensorboard_trace_handler names one worker's files.
                stem = f"cpu-{name}/cpu-{name}.{number}" if len(raws) > 1 else f"cpu-{name}"
                if arguments.raw:
                    extension = ".json.gz" if raw.name.endswith(".gz") else ".json"
                    (arguments.raw / stem).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(raw, arguments.raw / f"{stem}.pt.trace{extension}")
                target = arguments.out / f"{stem}.pt.trace.json.gz"
                target.parent.mkdir(parents=True, exist_ok=True)
                with gzip.open(target, "wt", encoding="utf-8") as file:
                    json.dump(trimmed(load(raw)), file, separators=(",", ":"))
                print(f"wrote {target} ({target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
