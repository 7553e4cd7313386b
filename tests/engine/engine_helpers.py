"""Small builders shared by the engine tests."""

from __future__ import annotations

import pickle
import sys
import tarfile
import textwrap
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np

from workbench.config import RunConfig
from workbench.engine import run
from workbench.engine.events import Event, RunEnded, StatusChanged


def tiny_config(**changes) -> RunConfig:
    """A run that takes a second or two on a CPU."""
    base = dict(
        dataset="synthetic", synthetic_size=256, batch_size=32, epochs=1, max_steps=4,
        num_workers=0, device="cpu", log_every=2,
    )
    base.update(changes)
    return RunConfig(**base)


def run_to_end(config: RunConfig, stop=lambda: False) -> list[Event]:
    events = list(run(config, stop))
    assert isinstance(events[-1], RunEnded)
    assert sum(isinstance(event, RunEnded) for event in events) == 1
    return events


def write_npz(path: Path, train: int = 64, test: int = 32, classes: int = 10, **overrides) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "train_images": rng.integers(0, 256, (train, 32, 32, 3), dtype=np.uint8),
        "train_labels": rng.integers(0, classes, train).astype(np.uint8),
        "test_images": rng.integers(0, 256, (test, 32, 32, 3), dtype=np.uint8),
        "test_labels": rng.integers(0, classes, test).astype(np.uint8),
    }
    arrays.update(overrides)
    arrays = {key: value for key, value in arrays.items() if value is not None}
    np.savez(path, **arrays)
    return path


def write_cifar10_archive(folder, per_batch=20, test=30):
    """cifar-10-python.tar.gz as the real one is laid out: pickled dicts of (N, 3072) uint8 rows."""
    rng = np.random.default_rng(0)
    source = folder / "src" / "cifar-10-batches-py"
    source.mkdir(parents=True)
    batches = {}
    for name, count in [*[(f"data_batch_{i}", per_batch) for i in range(1, 6)], ("test_batch", test)]:
        data = rng.integers(0, 256, (count, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, count).tolist()
        with open(source / name, "wb") as handle:
            pickle.dump({"batch_label": name, "data": data, "labels": labels}, handle)
        batches[name] = (data, labels)
    with open(source / "batches.meta", "wb") as handle:
        pickle.dump({"label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                                     "ship", "truck"]}, handle)
    archive = folder / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname="cifar-10-batches-py")
    return archive, source, batches


def as_torchrun_rank(monkeypatch, rank: int, world_size: int) -> int:
    """The environment torchrun gives a rank (rank 0 listening on a free localhost port for env://'s rendezvous);
    returns that port."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for name, value in (("RANK", str(rank)), ("WORLD_SIZE", str(world_size)), ("LOCAL_RANK", str(rank)),
                        ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port))):
        monkeypatch.setenv(name, value)
    return port


def user_modules_in(folder: Path, monkeypatch, sources: dict[str, str]):
    """A fixture's body: each source written as ``folder/NAME.py`` (dedented), the working directory ``folder`` (so
    ``NAME:function`` imports it), ``folder`` yielded; afterwards the modules are forgotten, so that the next test's
    file of the same name is imported afresh."""
    for name, source in sources.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.chdir(folder)
    yield folder
    for name in sources:
        sys.modules.pop(name, None)


def on_the_runs_first_step(monkeypatch, call) -> None:
    """``call()`` as the next run's first step begins, before its timer starts (TrainingSession._train_on)."""
    from workbench.engine import session

    train_on = session.TrainingSession._train_on
    called = []

    def watched(self, *args):
        if not called:
            called.append(True)
            call()
        return train_on(self, *args)

    monkeypatch.setattr(session.TrainingSession, "_train_on", watched)


class NextRun:
    """The next run (tiny_config), on a thread of its own once ``starts_waiting`` is called: its events, whether it
    said it waits (a status starting with ``waiting_words``), and what ``observe()`` gave as its first step began
    (the hook is set here, as the object is made)."""

    def __init__(self, monkeypatch, waiting_words: str, observe: Callable[[], Any]) -> None:
        self.events: list[Event] = []
        self.observed: list[Any] = []
        self.waiting, self.stepped, self.answered = threading.Event(), threading.Event(), threading.Event()
        self._waiting_words, self._observe = waiting_words, observe
        on_the_runs_first_step(monkeypatch, self._first_step)
        self.thread = threading.Thread(target=self._consume)

    def _first_step(self) -> None:
        self.observed.append(self._observe())
        self.stepped.set()
        self.answered.set()

    def _consume(self) -> None:
        for event in run(tiny_config()):
            self.events.append(event)
            if isinstance(event, StatusChanged) and event.message.startswith(self._waiting_words):
                self.waiting.set()
                self.answered.set()

    def starts_waiting(self, at_most_s: float, in_flight: str) -> None:
        """Start the run and check it says it waits before its first step (``in_flight``: what it must not step
        beside). Bounded: without the wait the held work gives up after ``at_most_s``, and this fails, not hangs."""
        self.thread.start()
        self.answered.wait(at_most_s)  # the run says it waits, or (unfixed) takes its first step
        assert not self.stepped.is_set(), f"the run stepped while {in_flight} was in flight"
        assert self.waiting.is_set(), self.events
