"""What the tests build, in one place: devices and configs, engine events made by hand, run functions with a known
behaviour, history files, fakes of the package's Protocols, and the few drivers several test modules share.

Importable from every test folder as ``builders``: pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``
(the default ``prepend`` import mode), as it does each test folder for its own modules. No test module imports
another test module (tests/test_architecture.py checks): what two of them share lives here.

The fakes of a Protocol (``FakeView``, ``InPlaceRunner``, ``ListRecording``, ``ListRecorder``) cannot drift from it:
they answer the Protocol's members only, each call bound to the member's signature first, and a fake whose own
methods differ from the Protocol's is refused when its class is made (``ProtocolFake``). Nothing here imports Qt
or torch: the history tests that use it need neither.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
import typing
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Iterator, Optional

from workbench.config import RunConfig
from workbench.controller.controls import Controls
from workbench.controller.driving import Job, drive
from workbench.controller.lifecycle import RunController
from workbench.controller.view import Runner, WindowView
from workbench.device_info import DeviceInfo
from workbench.engine.events import (
    EpochStats,
    Event,
    MemoryRelease,
    MemorySnapshot,
    RunEnded,
    RunStarted,
    StatusChanged,
    StepStats,
)
from workbench.engine.requests import JobRequests
from workbench.engine.run_summary import RunSummary
from workbench.experiments.recording import Recorder, RecorderFactory
from workbench.history.schema import MIGRATIONS
from workbench.history.trace_records import TraceRecord

ROOT = Path(__file__).resolve().parents[1]  # the project: what a child process needs on its PYTHONPATH

# == devices and configs ============================================================================================

CPU = DeviceInfo(
    type="cpu", name="Test CPU (2 cores)", cuda_available=False, cpu_fallback_reason="no CUDA GPU found",
    torch_version="2.14.1", torchvision_version="0.29.0", python_version="3.11.7", cpu_count=2,
)
GPU = DeviceInfo(
    type="cuda", name="NVIDIA Test GPU", cuda_available=True, compute_capability="9.0",
    total_memory_bytes=80 * 2**30, bf16_supported=True, driver_version="560.1", cuda_version="12.4",
    torch_version="2.14.1", torchvision_version="0.29.0", python_version="3.11.7", cpu_count=16,
)
OLD_GPU = DeviceInfo(type="cuda", name="Old GPU", cuda_available=True, compute_capability="7.5",
                     total_memory_bytes=16 * 2**30, bf16_supported=False, torch_version="2.x")
GPU_MEMORY = MemorySnapshot(torch_allocated=2 * 2**30, torch_reserved=3 * 2**30, nvml_device_used=4 * 2**30,
                            nvml_total=80 * 2**30)

# A real run that takes a second or two on two CPU cores.
TINY_RUN = RunConfig(dataset="synthetic", synthetic_size=256, batch_size=32, num_workers=0, device="cpu",
                     epochs=1, log_every=2, augment="gpu")


def tiny(**changes) -> RunConfig:
    """Three steps of synthetic data on the CPU: the config of a run function that only pretends to train."""
    base = dict(dataset="synthetic", synthetic_size=128, batch_size=32, max_steps=3, log_every=1,
                num_workers=0, device="cpu")
    base.update(changes)
    return RunConfig(**base)


def probe_of(device: DeviceInfo) -> Callable[[str], DeviceInfo]:
    """A sequence's probe (``workbench.device_info.Probe``): whatever device is asked for, ``device``."""
    return lambda requested: device


def window_probe(device: DeviceInfo = CPU) -> Callable[[], DeviceInfo]:
    """The window's first probe (``MainWindow``'s ``probe_function``): ``device``."""
    return lambda: device


def fake_release() -> MemoryRelease:
    return MemoryRelease(reserved_before=3 * 2**30, reserved_after=1 * 2**30, message="reserved 3.0 GiB → 1.0 GiB")


# == engine events, by hand ========================================================================================

def started(config: RunConfig, device: DeviceInfo = CPU, total_steps: Optional[int] = None) -> RunStarted:
    """``total_steps`` steps in one epoch (by default the config's ``max_steps``, else 10)."""
    total_steps = total_steps or config.max_steps or 10
    return RunStarted(
        config=config, device=device, dataset_name="synthetic", train_size=320, test_size=64, num_classes=10,
        steps_per_epoch=total_steps, total_steps=total_steps, parameter_count=12_345, started_at=time.time(),
        notes=("pin_memory ignored: no CUDA",),
    )


def step(index: int, total: int = 10, loss: float | None = None, memory: MemorySnapshot | None = None,
         elapsed_seconds: float | None = None) -> StepStats:
    return StepStats(
        step=index, total_steps=total, epoch=1, epochs=1, samples_seen=index * 32,
        loss=2.5 / index if loss is None else loss, lr=0.05, images_per_sec=1000.0 + index,
        data_wait_seconds=0.01, device_span_seconds=0.03, window_seconds=0.04,
        elapsed_seconds=0.04 * index if elapsed_seconds is None else elapsed_seconds, memory=memory or MemorySnapshot(),
    )


def epoch(at_step: int, test_accuracy: float = 0.42, memory: MemorySnapshot | None = None) -> EpochStats:
    return EpochStats(
        epoch=1, epochs=1, step=at_step, train_loss=1.5, train_accuracy=0.4, test_loss=1.6,
        test_accuracy=test_accuracy, images_per_sec=990.0, data_wait_fraction=0.25, train_seconds=0.4,
        eval_seconds=0.1, memory=memory or MemorySnapshot(),
    )


def summary(steps: int = 10, test_accuracy: float = 0.42, images_per_sec: float = 1005.5, **changes) -> RunSummary:
    """A finished run's whole summary, as the history keeps it."""
    values = dict(
        status="finished", test_accuracy=test_accuracy, final_loss=0.25, images_per_sec=images_per_sec,
        data_wait_fraction=0.25,
        wall_seconds=1.25, steps=steps, samples_seen=steps * 32, epochs_completed=1, device_type="cpu",
        device_name=CPU.name, torch_version="2.14.1",
    )
    values.update(changes)
    return RunSummary(**values)


def ended(status: str, images_per_sec: Optional[float] = None, kind: Optional[str] = None,
          reason: Optional[str] = None, **changes) -> RunEnded:
    """A run's end with a summary of ``status``, the rate and ``changes`` only (3 steps unless said)."""
    fields = {"steps": 3, **changes}
    summary = RunSummary(status=status, reason=reason, failure_kind=kind, images_per_sec=images_per_sec, **fields)
    return RunEnded(status=status, summary=summary, reason=reason, kind=kind)


def complete_run_events(config: RunConfig, steps: int = 10, test_accuracy: float = 0.42, **summary_changes):
    """A whole finished run, in engine order."""
    yield StatusChanged(message="Loading data…")
    yield started(config, total_steps=steps)
    for index in range(1, steps + 1):
        yield step(index, steps)
    yield epoch(steps, test_accuracy)
    yield RunEnded(status="finished", summary=summary(steps, test_accuracy, **summary_changes))


# == run functions with a known behaviour ==========================================================================

class FakeRun:
    """A run function: ``steps`` StepStats, one EpochStats, then RunEnded; records what happened."""

    def __init__(self, steps: int = 20, step_seconds: float = 0.0, raise_at: Optional[int] = None,
                 memory: MemorySnapshot = MemorySnapshot(), device: DeviceInfo = CPU, end: bool = True):
        self.steps, self.step_seconds, self.raise_at = steps, step_seconds, raise_at
        self.memory, self.device, self.end = memory, device, end
        self.closed = False
        self.configs: list[RunConfig] = []

    def __call__(self, config: RunConfig, stop: Callable[[], bool]) -> Iterator[Event]:
        self.configs.append(config)
        return self._events(config, stop)

    def _events(self, config: RunConfig, stop: Callable[[], bool]) -> Iterator[Event]:
        try:
            yield StatusChanged(message="Loading synthetic data…")
            yield started(config, self.device, total_steps=self.steps)
            began = time.perf_counter()
            for index in range(1, self.steps + 1):
                if stop():
                    yield RunEnded(status="stopped", summary=RunSummary(status="stopped", steps=index - 1),
                                   reason=f"stopped at step {index - 1}")
                    return
                if index == self.raise_at:
                    raise RuntimeError(f"boom at step {index}")
                if self.step_seconds:
                    time.sleep(self.step_seconds)
                yield step(index, self.steps, memory=self.memory, elapsed_seconds=time.perf_counter() - began)
            yield epoch(self.steps, test_accuracy=0.75, memory=self.memory)
            if self.end:
                yield ended("finished", test_accuracy=0.75, steps=self.steps)
        finally:
            self.closed = True


class TimedRuns:
    """A run function whose steady-state images/sec is ``speed(config)`` times noise from a seeded draw."""

    def __init__(self, speed: Callable[[RunConfig], float], noise: float = 0.01, seed: int = 0,
                 device: DeviceInfo = GPU, fail: Callable[[RunConfig], Optional[str]] = lambda config: None):
        self.speed, self.noise, self.device, self.fail = speed, noise, device, fail
        self.random = random.Random(seed)
        self.configs: list[RunConfig] = []

    def __call__(self, config: RunConfig, stop) -> Iterator:
        self.configs.append(config)
        yield started(config, self.device)
        failure = self.fail(config)
        if failure:
            yield ended("failed", kind=failure, reason=f"fake {failure}")
            return
        rate = self.speed(config) * (1 + self.random.uniform(-self.noise, self.noise))
        yield ended("finished", rate, device_type=self.device.type, device_name=self.device.name)  # as the engine's


class FakeAllocator:
    """A run function on CUDA memory as the largest-batch search sees it: trials take memory; what a failed trial
    held stays reserved until released (as torch's caching allocator keeps it)."""

    def __init__(self, limit_bytes: int, fixed_bytes: int, bytes_per_image: int):
        self.limit, self.fixed, self.per_image = limit_bytes, fixed_bytes, bytes_per_image
        self.reserved = 0
        self.releases = 0
        self.reserved_at_trial_start: list[int] = []
        self.sizes: list[int] = []
        self.configs: list[RunConfig] = []

    def release(self) -> None:
        self.releases += 1
        self.reserved = 0

    def needed(self, batch_size: int) -> int:
        return self.fixed + batch_size * self.per_image

    def __call__(self, config: RunConfig, stop) -> Iterator:
        self.sizes.append(config.batch_size)
        self.configs.append(config)
        self.reserved_at_trial_start.append(self.reserved)
        yield started(config, GPU)
        needed = self.needed(config.batch_size)
        if self.reserved + needed > self.limit:
            self.reserved += min(needed, self.limit - self.reserved)  # what it got before it ran out stays cached
            yield ended("failed", kind="out_of_memory", reason="CUDA out of memory")
            return
        self.reserved += needed
        memory = MemorySnapshot(torch_allocated=needed, torch_reserved=self.reserved, torch_peak_allocated=needed,
                                torch_peak_reserved=self.reserved, nvml_device_used=self.reserved + 500)
        yield step(1, 3, loss=1.0, memory=memory)
        yield ended("finished", 1000.0, peak_allocated_bytes=needed, peak_reserved_bytes=self.reserved,
                    peak_nvml_device_used_bytes=self.reserved + 500)


# == the history ===================================================================================================

def record_complete_run(store, config: RunConfig | None = None, name: str | None = None, source: str = "cli",
                        steps: int = 10, **summary_changes) -> int:
    config = config or RunConfig(device="cpu")
    recorder = store.start_run(config, name=name, source=source)
    for event in complete_run_events(config, steps, **summary_changes):
        recorder.record(event)
    return recorder.run_id


def fill_history(store, count: int, config: RunConfig | None = None) -> list[int]:
    """``count`` finished runs at once: one recorded through the recorder, the rest copies of its row (names
    numbered), so a large history takes a second to make. Step metrics are the first run's only. Their ids."""
    first = record_complete_run(store, config, name="run 1")
    columns = [row[1] for row in store._conn.execute("PRAGMA table_info(runs)") if row[1] not in ("id", "name")]
    names = ", ".join(columns)
    with store._transaction() as conn:
        conn.executemany(
            f"INSERT INTO runs (name, {names}) SELECT ?, {names} FROM runs WHERE id = ?",
            [(f"run {number}", first) for number in range(2, count + 1)],
        )
    return [first, *(row[0] for row in store._conn.execute("SELECT id FROM runs WHERE id > ? ORDER BY id", (first,)))]


def database_at(path, version: int) -> None:
    """A history file exactly as the workbench of that schema version left it."""
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:version]:
        migration(conn)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


def older_history(home: Path, version: int = 5, names: Iterable[str] = ("first", "second"),
                  config_json: str = "{}") -> Path:
    """A history file of schema ``version`` in WAL mode in ``home``, as that workbench left it, holding finished
    runs named ``names`` (ids from 1) with the settings ``config_json``; its path."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "history.sqlite3"
    database_at(path, version)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executemany("INSERT INTO runs (name, status, source, started_at, config_json) "
                         "VALUES (?, 'finished', 'cli', 1.0e9, ?)", [(name, config_json) for name in names])
    conn.close()
    return path


def count_upgrades(monkeypatch) -> list:
    """A list that grows by one each time a history holding runs, opened through HistoryStore, is brought up to
    date: its file (an open for writing) or a copy of it in memory (an older history opened for reading)."""
    from workbench.history import store as store_module

    upgrades: list = []
    last = MIGRATIONS[-1]

    def counted(conn: sqlite3.Connection) -> None:
        if conn.execute("SELECT EXISTS (SELECT 1 FROM runs)").fetchone()[0]:  # not the schema check's empty one
            upgrades.append(1)
        last(conn)

    monkeypatch.setattr(store_module, "MIGRATIONS", (*MIGRATIONS[:-1], counted))
    return upgrades


# == fakes that cannot drift from their Protocol ===================================================================

def protocol_members(protocol: type) -> dict[str, Any]:
    """What a typing.Protocol asks for: name → its function, its property, or None for an annotated attribute."""
    members: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if klass in (object, typing.Protocol, typing.Generic):
            continue
        for name in vars(klass).get("__annotations__", {}):
            if not name.startswith("_"):
                members[name] = None
        for name, value in vars(klass).items():
            if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property)):
                members[name] = value
    return members


def _shape(function: Callable) -> list[tuple[str, Any, bool]]:
    """(name, kind, has a default) of each parameter after ``self``."""
    parameters = list(inspect.signature(function).parameters.values())[1:]
    return [(p.name, p.kind, p.default is not inspect.Parameter.empty) for p in parameters]


def call_problems(wanted: Callable, given: Callable, exact: bool = False) -> list[str]:
    """How ``given`` (a method) fails to take every call ``wanted`` (a Protocol's method) allows, parameters compared
    by name and kind, in order. ``exact``: nor may it take a call ``wanted`` refuses (what a fake must do)."""
    want, give = _shape(wanted), _shape(given)
    if exact:
        return [] if want == give else [f"takes ({_words(give)}), not ({_words(want)})"]
    problems = []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    given_by_name = {name: (index, kind, optional) for index, (name, kind, optional) in enumerate(give)}
    for index, (name, kind, optional) in enumerate(want):
        if name not in given_by_name:
            problems.append(f"has no parameter {name!r}")
            continue
        at, given_kind, given_optional = given_by_name[name]
        if given_kind != kind:
            problems.append(f"takes {name!r} as {given_kind.description}, not {kind.description}")
        elif kind in positional and at != index:
            problems.append(f"takes {name!r} at position {at + 1}, not {index + 1}")
        if optional and not given_optional:
            problems.append(f"needs {name!r}, which may be left out")
    wanted_names = {name for name, _, _ in want}
    problems += [f"needs {name!r}, which no caller passes" for name, kind, optional in give
                 if name not in wanted_names and not optional
                 and kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
    return problems


def _words(shape: list[tuple[str, Any, bool]]) -> str:
    return ", ".join(f"{name}{'=…' if optional else ''}" for name, _, optional in shape)


def implementation_problems(implementation: type, protocol: type) -> list[str]:
    """Where the class ``implementation`` lacks a method or property ``protocol`` asks for, or takes other calls
    (annotated attributes are set on instances and not looked for)."""
    problems = []
    for name, member in protocol_members(protocol).items():
        if member is None:
            continue
        given = inspect.getattr_static(implementation, name, None)
        if isinstance(member, property):
            if not isinstance(given, property):
                problems.append(f"{implementation.__name__}.{name}: no property")
        elif not inspect.isfunction(given):
            problems.append(f"{implementation.__name__}.{name}: no method")
        else:
            problems += [f"{implementation.__name__}.{name} {problem}" for problem in call_problems(member, given)]
    return problems


def for_tests(method: Callable) -> Callable:
    """Marks a fake's handle for the test itself (``InPlaceRunner.finish``), never the code under test's: a call
    from the package is refused, as the real implementation would refuse a method it lacks."""

    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "workbench" or caller.startswith("workbench."):
            raise AttributeError(f"{caller} called {type(self).__name__}.{method.__name__}, which "
                                 f"{type(self)._protocol.__name__} has not: it is the test's own")
        return method(self, *args, **kwargs)

    checked.for_tests = True
    return checked


class Calls(list):
    """A fake's calls in order, each (name, argument): the one argument, or the tuple of them (bound by name)."""

    def named(self, name: str) -> list[Any]:
        return [argument for called, argument in self if called == name]


class ProtocolFake:
    """The base of a fake that stands in for ``protocol`` (a typing.Protocol) and cannot drift from it.

    Subclassed as ``class FakeView(ProtocolFake, protocol=WindowView)``. It answers the Protocol's methods only:
    one the fake defines keeps its own behaviour, one it leaves out is only kept in ``calls``; any other name is an
    AttributeError. Every call is bound to the Protocol's signature first (a TypeError as the real call would
    give) and kept in ``calls``. Making the class fails when one of its methods is no member of the Protocol or
    takes other parameters, or a property the Protocol asks for is missing. Two ways out, each named:
    ``also`` (members the code under test looks up beyond the Protocol, as ``getattr(recorders, "close", None)``)
    and ``@for_tests`` methods (the test's handles, refused to the package).
    """

    _protocol: ClassVar[type]
    _members: ClassVar[dict[str, Any]]

    def __init_subclass__(cls, protocol: Optional[type] = None, also: Iterable[str] = (), **kwargs):
        super().__init_subclass__(**kwargs)
        protocol = protocol or cls._protocol  # a fake of a fake fakes the same Protocol
        cls._protocol, cls._members = protocol, protocol_members(protocol)
        problems = fake_problems(cls, protocol, frozenset(also))
        if problems:
            raise TypeError(f"{cls.__name__} is no fake of {protocol.__name__}: " + "; ".join(problems))
        for name, member in cls._members.items():
            if inspect.isfunction(member) and name in vars(cls):
                setattr(cls, name, _kept(name, member, vars(cls)[name]))

    def __getattr__(self, name: str):  # only for what the fake does not define
        member = type(self)._members.get(name) if not name.startswith("_") else None
        if not inspect.isfunction(member):
            raise AttributeError(f"{type(self).__name__}: {type(self)._protocol.__name__} has no method {name!r}")
        return functools.partial(_kept(name, member, None), self)


def fake_problems(fake: type, protocol: type, also: frozenset[str] = frozenset()) -> list[str]:
    """How the class ``fake`` would answer what ``protocol`` does not ask, or not as it asks."""
    members = protocol_members(protocol)
    problems = []
    for klass in fake.__mro__:
        if klass in (ProtocolFake, object):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or not (inspect.isfunction(value) or isinstance(value, property)):
                continue
            member = members.get(name)
            if name in also or getattr(value, "for_tests", False):
                continue
            if member is None:
                problems.append(f"{name}: no member of {protocol.__name__}")
            elif isinstance(member, property) != isinstance(value, property):
                problems.append(f"{name}: a {'property' if isinstance(member, property) else 'method'} in "
                                f"{protocol.__name__}")
            elif inspect.isfunction(member):
                problems += [f"{name} {problem}" for problem in call_problems(member, value, exact=True)]
    problems += [f"{name}: a property of {protocol.__name__} it does not define" for name, member in members.items()
                 if isinstance(member, property) and inspect.getattr_static(fake, name, None) is None]
    problems += [f"{name}: named in also= but not defined" for name in also if not hasattr(fake, name)]
    return problems


def _kept(name: str, member: Callable, own: Optional[Callable]) -> Callable:
    """``member``'s call, bound to its signature, kept in the fake's ``calls``, then ``own`` (when the fake has it)."""
    signature = inspect.signature(member)

    def call(self, *args, **kwargs):
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as error:
            raise TypeError(f"{type(self)._protocol.__name__}.{name}{signature}: {error}") from None
        arguments = tuple(bound.arguments.values())[1:]
        vars(self).setdefault("calls", Calls()).append((name, arguments[0] if len(arguments) == 1 else arguments))
        return own(self, *args, **kwargs) if own is not None else None

    call.__name__ = call.__qualname__ = name
    call.__doc__ = member.__doc__
    call.__wrapped__ = member  # inspect.signature reads the Protocol's
    return call


class FakeView(ProtocolFake, protocol=WindowView):
    """A WindowView made of lists: what the controller asked the window to show, in order (``calls``)."""

    def __init__(self, config: RunConfig = TINY_RUN):
        self.config = config
        self.calls = Calls()
        self.controls: Optional[Controls] = None
        self.status = ""
        self.message: tuple[str, str, Optional[str]] = ("idle", "", None)
        self.progress = None
        self.ceiling = ""
        self.closed = False
        self.background: list[Any] = []

    def form_config(self) -> RunConfig:
        return self.config

    def form_problems(self) -> list[str]:
        return self.config.validate()

    def set_form_config(self, config: RunConfig) -> None:
        self.config = config

    def show_controls(self, controls) -> None:
        self.controls = controls

    def show_status(self, text: str) -> None:
        self.status = text

    def show_run_message(self, status: str, text: str, details: Optional[str] = None) -> None:
        self.message = (status, text, details)

    def show_progress(self, progress) -> None:
        self.progress = progress

    def show_ceiling(self, text: str) -> None:
        self.ceiling = text

    def run_in_background(self, function, done, failed) -> None:
        self.background.append((function, done, failed))

    def close_window(self) -> None:
        self.closed = True


class InPlaceRunner(ProtocolFake, protocol=Runner):
    """The training thread, stood in by a call: ``finish()`` drives the started job to its end in place.
    ``during`` is called at every event, so a test can press Stop or Close mid-job."""

    def __init__(self):
        self.job: Optional[Job] = None
        self.controls = JobRequests()
        self.controller: Optional[RunController] = None
        self.during = lambda event: None
        self.samples_asked = 0

    @property
    def running(self) -> bool:
        return self.job is not None

    def start_job(self, job: Job) -> None:
        assert self.job is None, "one job at a time"
        self.job, self.controls = job, JobRequests()

    def request_stop(self) -> None:
        self.controls.stop()

    def request_sample(self) -> None:
        self.samples_asked += 1
        self.controls.profile_requests.request()

    @for_tests
    def finish(self) -> None:
        controller = self.controller

        def on_event(event):
            controller.on_event(event)
            self.during(event)

        def on_steps(steps):
            controller.on_steps(steps)
            self.during(steps[-1])

        drive(self.job, self.controls, on_steps, on_event, step_interval_s=0.0)
        self.job = None
        controller.on_finished()


class ListRecorder(ProtocolFake, protocol=Recorder):
    """A run's recorder (as RunRecorder is one) that keeps its events in a list; ``fail_at``: the count of
    events after which ``record`` raises, as a full disk would."""

    def __init__(self, run_id: int, config: RunConfig, name: Optional[str], sequence_id: Optional[int],
                 fail_at: Optional[int] = None):
        self.run_id, self.config, self.name, self.sequence_id, self.fail_at = run_id, config, name, sequence_id, fail_at
        self.discarded = False
        self.events: list[Any] = []
        self.failed: Optional[str] = None
        self.fails: list[str] = []

    @property
    def label(self) -> str:
        return f"#{self.run_id} {self.name or 'synthetic'}"

    def record(self, event) -> None:
        if len(self.events) == self.fail_at:
            raise OSError("disk full")
        self.events.append(event)

    def fail(self, reason, kind="error", traceback=None) -> None:
        self.fails.append(reason)
        self.failed = self.failed or reason


class ListRecording(ProtocolFake, protocol=RecorderFactory, also=("close",)):
    """A recorder factory as HistoryRecording is one, and the ``Recordings`` that makes it (calling it gives
    itself); ``opened``/``closed`` count the jobs that used it. ``close`` is looked up as the jobs look it up."""

    def __init__(self, fail_at: Optional[int] = None):
        self.fail_at = fail_at  # each run's recorder fails after this many events
        self.recorders: list[ListRecorder] = []
        self.sequences: list[tuple[str, str]] = []
        self.measured: list[Any] = []  # the measured changes kept (history/measured_changes.MeasuredChangeRecord)
        self.opened = self.closed = 0

    def __call__(self) -> "ListRecording":
        self.opened += 1
        return self

    def begin_sequence(self, kind, name, plan) -> int:
        self.sequences.append((kind, name))
        return 40 + len(self.sequences)

    def start_run(self, config, name, sequence_id) -> ListRecorder:
        self.recorders.append(ListRecorder(len(self.recorders) + 1, config, name, sequence_id, self.fail_at))
        return self.recorders[-1]

    def add_measured_change(self, change) -> None:
        self.measured.append(change)

    def measured_changes(self, config, device_type, device_name) -> list:
        from workbench.history.measured_changes import speed_settings

        return [change for change in self.measured if (change.device_type, change.device_name) == (
            device_type, device_name) and speed_settings(change.baseline) == speed_settings(config)]

    def close(self) -> None:
        self.closed += 1


def make_controller(run_function=None, device: DeviceInfo = CPU, config: RunConfig = TINY_RUN, **options):
    """A RunController on a FakeView, an InPlaceRunner and a ListRecording, its device known: (controller, view,
    runner, recording)."""
    view, runner, recording = FakeView(config), InPlaceRunner(), ListRecording()
    controller = RunController(view, runner, run_function or FakeRun(steps=6), recording,
                               probe=lambda requested: device, release=fake_release, **options)
    runner.controller = controller
    controller.device_known(device)
    return controller, view, runner, recording


# == drivers several test modules share ============================================================================

def collect(kind: type, into: list) -> Callable[[Any], None]:
    """A slot for ``session.event`` that keeps the events of one type (``into``), in order."""

    def keep(event: Any) -> None:
        if isinstance(event, kind):
            into.append(event)

    return keep


def run_once(qtbot, window, config: RunConfig, timeout_ms: int = 60_000):
    """Set the window's form to ``config``, press Start, and wait for the training thread to end."""
    window.form.set_config(config)
    assert window.start_button.isEnabled(), window.start_button.toolTip()
    with qtbot.waitSignal(window.training_thread.finished, timeout=timeout_ms):
        window.start_button.click()
    window.plots.redraw()


def workbench_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """``python -m workbench ARGS`` in a process of its own, as a user runs it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def last_json(out: str) -> dict:
    """The ``--json`` line a command ends its output with."""
    return json.loads(out.strip().splitlines()[-1])


def trace_rank(number: int, compute: float, idle: float, findings=(), steps: int = 5) -> dict:
    """One rank of a trace record, as `workbench trace --json` writes it."""
    return {
        "rank": number, "device": "NVIDIA A100-SXM4-80GB", "steps": steps, "step_seconds_median": 0.25,
        "step_seconds_low": 0.24, "step_seconds_high": 0.27, "compute_share": compute, "communication_share": 0.1,
        "memory_share": 1.0 - compute - 0.1 - idle, "idle_share": idle, "idle_for_data_share": 0.5,
        "idle_for_host_share": 0.25, "idle_kernel_wait_share": 0.0, "idle_other_share": 0.25, "dataloader_share": None,
        "gpu_span": {"idle_share": idle, "compute_share": compute, "non_compute_share": 1.0 - compute - idle},
        "findings": [dict(finding) for finding in findings],
    }


INPUT_BOUND = {"kind": "input_bound", "text": "The GPU waits for the DataLoader", "figure": 0.334, "threshold": 0.1,
               "change": "DataLoader(num_workers=4, pin_memory=True, persistent_workers=True)"}


def trace_record(sha256: str = "ab" * 32, path: str = "/data/traces/rank0.json.gz", ranks=None) -> TraceRecord:
    """A trace record of two ranks (or ``ranks``), as the window keeps an opened trace."""
    input_bound_twice = [INPUT_BOUND, dict(INPUT_BOUND, change="pin_memory=True")]  # one problem, two changes
    if ranks is None:
        ranks = (trace_rank(0, 0.5, 0.25, input_bound_twice), trace_rank(1, 0.25, 0.5))
    return TraceRecord(path=path, size_bytes=3_000_000, sha256=sha256, ranks=tuple(ranks), notes=("no memory events",))
