"""Make the CPU-only traces that PyTorch Lightning and Hugging Face's Trainer write (tests/trace_analysis/data/frameworks).

Needs ``lightning`` and ``transformers`` (with ``accelerate``) installed beside torch; the tests that read the
traces need neither. Each run trains a small MLP a few steps on the CPU, profiled the way each framework documents:

- Lightning: ``Trainer(profiler=PyTorchProfiler(dirpath=..., filename=..., schedule=torch.profiler.schedule(
  wait=1, warmup=1, active=3), export_to_chrome=True))``: Lightning calls ``profiler.step()`` itself, at the end of
  each ``training_step`` (and ``validation_step``), and wraps its hooks in ``[pl][profile]…`` record_functions;
- Hugging Face: ``Trainer`` inside ``torch.profiler.profile(schedule=..., on_trace_ready=tensorboard_trace_handler(
  ...))`` with a ``TrainerCallback`` whose ``on_step_end`` calls ``prof.step()``.

The cases:

- ``*-input-heavy``: ``DataLoader(num_workers=0)`` over a dataset whose ``__getitem__`` sorts 64×4096 random
  numbers per sample (the loader takes most of each step: input-bound);
- ``*-loader-keeps-up``: the same model over samples already in memory (no input-bound finding);
- ``lightning-iterable-input-heavy``: the costly samples from a plain Python iterable of batches, no DataLoader
  (as a DALI or streaming iterator gives them): the only span around the wait is Lightning's
  ``[pl][profile][_TrainingEpochLoop].train_dataloader_next``;
- ``lightning-validation-input-heavy``: the costly samples with validation every 2 training steps (2 batches,
  after Lightning's 2 sanity-check steps), so the profiled window holds validation steps too: Lightning numbers
  them apart from the training steps, and calls ``profiler.step()`` inside its own ``[pl][profile]`` spans.

The traces are kept as the profiler wrote them, gzipped (Lightning's ``[pl][module]`` spans around each module's
forward included); of the validation run, only the file of its ``training_step`` window.

    python scripts/make_framework_traces.py OUT_FOLDER
"""

from __future__ import annotations

import gzip
import logging
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

# The same costly and in-memory samples as make_input_bound_traces.py (run as scripts/…: this folder is on sys.path)
from make_input_bound_traces import BATCH, FEATURES, SAMPLES, HeavySamples, LightSamples  # noqa: E402

STEPS = 8  # wait 1, warmup 1, active 3, then a few more so the window closes inside the run


SAMPLE_COST = HeavySamples()  # indexed for one costly sample at a time


class HeavyBatches:
    """A plain iterable of costly batches, no torch DataLoader (a DALI or streaming iterator's place)."""

    def __len__(self) -> int:
        return SAMPLES // BATCH

    def __iter__(self):
        for batch in range(len(self)):
            indices = range(batch * BATCH, (batch + 1) * BATCH)
            yield torch.stack([SAMPLE_COST[i][0] for i in indices]), torch.tensor([i % 10 for i in indices])


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))


def lightning_run(out: Path, train, validate=None) -> Path:
    import lightning as L
    from lightning.pytorch.profilers import PyTorchProfiler

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = mlp()

        def training_step(self, batch, batch_index):
            features, labels = batch
            return torch.nn.functional.cross_entropy(self.net(features), labels)

        def validation_step(self, batch, batch_index):
            features, labels = batch
            return torch.nn.functional.cross_entropy(self.net(features), labels)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    profiler = PyTorchProfiler(dirpath=str(out), filename="lightning",
                               schedule=torch.profiler.schedule(wait=1, warmup=1, active=3), export_to_chrome=True)
    validation = {"val_check_interval": 2, "limit_val_batches": 2} if validate is not None else {
        "limit_val_batches": 0, "num_sanity_val_steps": 0}
    trainer = L.Trainer(accelerator="cpu", max_steps=STEPS, profiler=profiler, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        **validation)
    trainer.fit(Classifier(), train, validate)
    (trace,) = out.glob("*training_step*.pt.trace.json")  # Lightning names the file after the step's action
    return trace


def hugging_face_run(out: Path, dataset: Dataset) -> Path:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Classifier(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = mlp()

        def forward(self, features, labels=None):
            logits = self.net(features)
            return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

    class Features(Dataset):
        def __init__(self, samples: Dataset) -> None:
            self.samples = samples

        def __len__(self) -> int:
            return len(self.samples)  # type: ignore[arg-type]

        def __getitem__(self, index: int):
            features, label = self.samples[index]
            return {"features": features, "labels": label}

    class ProfilerStep(TrainerCallback):  # the documented way: one prof.step() per optimizer step
        def __init__(self, profiler) -> None:
            self.profiler = profiler

        def on_step_end(self, args, state, control, **kwargs):
            self.profiler.step()

    arguments = TrainingArguments(output_dir=str(out / "run"), per_device_train_batch_size=BATCH, max_steps=STEPS,
                                  dataloader_num_workers=0, report_to=[], save_strategy="no", use_cpu=True,
                                  logging_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=Classifier(), args=arguments, train_dataset=Features(dataset))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1),
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out)),
                                record_shapes=False) as profiler:
        trainer.add_callback(ProfilerStep(profiler))
        trainer.train()
    (trace,) = out.glob("*.pt.trace.json")
    return trace


def main(out_folder: str) -> None:
    out = Path(out_folder)
    out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")  # Lightning's advice on num_workers=0 is what the heavy cases are about
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    cases = {
        "lightning-input-heavy": lambda folder: lightning_run(folder, DataLoader(HeavySamples(), batch_size=BATCH)),
        "lightning-loader-keeps-up": lambda folder: lightning_run(folder, DataLoader(LightSamples(), batch_size=BATCH)),
        "lightning-iterable-input-heavy": lambda folder: lightning_run(folder, HeavyBatches()),
        "lightning-validation-input-heavy": lambda folder: lightning_run(
            folder, DataLoader(HeavySamples(), batch_size=BATCH), DataLoader(HeavySamples(), batch_size=BATCH)),
        "hf-trainer-input-heavy": lambda folder: hugging_face_run(folder, HeavySamples()),
        "hf-trainer-loader-keeps-up": lambda folder: hugging_face_run(folder, LightSamples()),
    }
    only = set(sys.argv[2:])
    for name, run in cases.items():
        if only and name not in only:
            continue
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as folder:
            raw = run(Path(folder))
            target = out / f"{name}.pt.trace.json.gz"
            with open(raw, "rb") as source, gzip.open(target, "wb") as gzipped:
                shutil.copyfileobj(source, gzipped)
        print(f"wrote {target} ({target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/trace_analysis/data/frameworks")
