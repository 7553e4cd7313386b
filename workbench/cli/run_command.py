"""`workbench run`: one training run, headless, every RunConfig field a --kebab-case flag."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Optional, get_args

from workbench.cli.config_file import read_config_file
from workbench.cli.parsing import UsageError
from workbench.cli import timeline_report
from workbench.cli.summary_json import summary_json
from workbench.engine.events import EpochStats, ProfileSample, RunEnded, RunStarted, StatusChanged, StepStats, RunSummary
from workbench.engine.interruptible import wait_for_abandoned
from workbench.config import (
    CHOICES,
    FIELD_NAMES,
    FIELD_TYPES,
    OPTIONAL_FIELDS,
    SWITCHES_BECAME_CHOICES,
    ConfigError,
    RunConfig,
    make_npz_command,
)
from workbench.formatting import format_bytes, format_duration
from workbench.history.failure_log import log_failure
from workbench.regular_file import folder_problem
from workbench.settings_help import cli_help

# Exit codes: 0 finished, 1 the run failed (or was stopped), 2 bad input.
BAD_INPUT_KINDS = ("config", "data")
ABANDONED_WORK_WAIT_S = 15.0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="train once, headless",
        description="Train once without the GUI. Every setting is a flag; --config FILE.json supplies a base.",
        argument_default=argparse.SUPPRESS,  # only flags given on the command line override --config
    )
    parser.add_argument("--name", help="a name for this run in the history")
    parser.add_argument("--json", action="store_true", help="print the run summary as JSON on the last line")
    parser.add_argument("--no-history", action="store_true", help="do not record this run in the history")
    add_setting_flags(parser)
    parser.set_defaults(handler=run_command)


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """--config FILE.json and one --kebab-case flag per RunConfig field (the parser must use
    ``argument_default=argparse.SUPPRESS``, so only flags given override --config and the defaults)."""
    parser.add_argument("--config", metavar="FILE.json", help="settings as a JSON object (RunConfig fields)")
    defaults = RunConfig()
    for name in FIELD_NAMES:
        flag = "--" + name.replace("_", "-")
        hint = FIELD_TYPES[name]
        help_text = cli_help(name, getattr(defaults, name))  # the form's tooltip starts with the same line
        if hint is bool:
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, help=help_text)
        elif name in SWITCHES_BECAME_CHOICES:  # --compile alone still means what it meant; --no-compile too
            modes = SWITCHES_BECAME_CHOICES[name]
            parser.add_argument(flag, dest=name, nargs="?", const=modes[True],
                                metavar="{" + ",".join(CHOICES[name]) + "}", help=help_text)
            parser.add_argument("--no-" + flag[2:], dest=name, action="store_const", const=modes[False],
                                help=f"the same as {flag} {modes[False]}")
        elif name in CHOICES:
            # Choices are checked by RunConfig.validate so the message matches the GUI's.
            parser.add_argument(flag, dest=name, metavar="{" + ",".join(CHOICES[name]) + "}", help=help_text)
        else:
            if name in OPTIONAL_FIELDS:  # Optional[int] / Optional[float]: the flag takes the inner type
                hint = next(arg for arg in get_args(hint) if arg is not type(None))
            base = int if hint is int else float if hint is float else str
            parser.add_argument(flag, dest=name, type=base, metavar=name.upper(), help=help_text)


def config_from_args(args: argparse.Namespace, prog: str = "workbench run") -> RunConfig:
    """The settings the flags and --config give; UsageError (one line, starting with ``prog``) when they cannot."""
    values: dict[str, Any] = {}
    config_file: Optional[str] = getattr(args, "config", None)
    if config_file:
        values.update(read_config_file(config_file, prog))
    values.update({name: getattr(args, name) for name in FIELD_NAMES if hasattr(args, name)})
    _dataset_for_data_path(args, values, prog)
    try:
        return RunConfig.from_dict(values)
    except ConfigError as error:
        raise UsageError(f"{prog}: {error}") from None


def _dataset_for_data_path(args: argparse.Namespace, values: dict[str, Any], prog: str) -> None:
    """--data-path without --dataset would train on synthetic data and ignore the file: infer npz from the
    suffix, or folder from a folder of class folders (and say so), or refuse, naming what to add."""
    path = getattr(args, "data_path", None)
    if not path or values.get("dataset", "synthetic") != "synthetic":
        return
    if hasattr(args, "dataset"):
        raise UsageError(
            f"{prog}: --data-path is not used with --dataset synthetic: drop it, or choose "
            "--dataset npz (an .npz file), folder (a folder of class folders) or cifar10/cifar100 (a CIFAR folder)"
        )
    if str(path).lower().endswith(".npz"):
        values["dataset"] = "npz"
        # Said once the settings pass their checks (bad input gets one line).
        args.notes = [*getattr(args, "notes", []), f"{path} is an .npz file: training on it (--dataset npz)"]
        return
    if folder_problem(path) is None:  # os.stat only: a FIFO answers without blocking
        folder = Path(path).expanduser()
        if any((folder / name).exists() for name in CIFAR_FOLDER_MARKS):
            raise UsageError(f"{prog}: --data-path {path} is a CIFAR folder: add --dataset cifar10 or cifar100")
        values["dataset"] = "folder"
        args.notes = [*getattr(args, "notes", []),
                      f"{path} is a folder: training on its images, one sub-folder per class (--dataset folder)"]
        return
    raise UsageError(
        f"{prog}: --data-path needs --dataset: npz for an .npz file, folder for a folder of class folders, "
        "cifar10 or cifar100 for a CIFAR folder"
    )


# What torchvision's CIFAR download leaves in its folder.
CIFAR_FOLDER_MARKS = ("cifar-10-batches-py", "cifar-100-python", "cifar-10-python.tar.gz", "cifar-100-python.tar.gz")


def run_command(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    from workbench.engine.distributed.world import launched_world

    world = launched_world()
    if world is not None:  # under torchrun: one rank of world.world_size; rank 0 speaks for the run
        config = launched_config(args, config, world)
        if world.rank != 0:
            return run_quietly(config, world.rank)
    from workbench.data_check import data_problems, label_problems

    # Bad input starts nothing and stores nothing: the settings and the cheap data checks (an .npz is read
    # from its headers) come first, before torch is imported (seconds, on a busy machine a minute); what
    # the device can run once it is probed. Under torchrun the processes on this machine are what its
    # GPUs must hold.
    local = config.replace(devices=world.local_world_size or world.world_size) if world is not None else config
    problems = local.validate() or data_problems(config) or label_problems(config)
    if problems:
        raise UsageError("workbench run: " + "; ".join(problems))
    from workbench.engine import probe_device, run  # torch is imported only now

    problems = local.hardware_problems(probe_device(config.device))
    if problems:
        raise UsageError("workbench run: " + "; ".join(problems))
    print_notes(args, "workbench run")

    store = recorder = None
    if not getattr(args, "no_history", False):
        from workbench.history.store import HistoryStore

        store = HistoryStore.open()
        recorder = store.start_run(config, name=getattr(args, "name", None), source="cli")

    from workbench.engine.requests import ProfileRequests

    progress = ProgressLine(sys.stderr)
    stop = threading.Event()
    requests = ProfileRequests()
    ended = None
    started = False
    previous_handler = signal.signal(signal.SIGINT, _stop_then_interrupt(stop, progress))
    previous_usr1 = _on_sample_request(requests, progress)
    try:
        for event in run(config, stop.is_set, profile_requests=requests):
            if recorder is not None:
                recorder.record(event)
            progress.show(event)
            started = started or isinstance(event, RunStarted)
            if isinstance(event, RunEnded):
                ended = event
    finally:
        signal.signal(signal.SIGINT, previous_handler)
        if previous_usr1 is not None:
            signal.signal(signal.SIGUSR1, previous_usr1)
        progress.close()
        if ended is not None:  # (not after an abort: that exits at once)
            # Work a stop abandoned (workers still starting, a download) winds down before the process
            # exits, so it shuts its workers down cleanly rather than being cut off mid-start.
            wait_for_abandoned(ABANDONED_WORK_WAIT_S)
        if recorder is not None and ended is None:
            recorder.fail("the command was interrupted before the run ended")
        if store is not None:
            store.close()

    assert ended is not None  # the engine always ends with RunEnded
    if ended.status == "failed" and ended.kind in BAD_INPUT_KINDS and not started:
        # Refused before training (found only by loading the data): one line, nothing recorded.
        raise UsageError(f"workbench run: {ended.reason}")
    run_id = recorder.run_id if recorder is not None else None
    if args.__dict__.get("json"):
        print(json.dumps(summary_json(ended.summary, run_id=run_id, config=config)))
    else:
        print_summary(ended, config)
    if ended.status == "finished":
        return 0
    if ended.status == "failed":
        print(f"workbench run: {ended.reason}", file=sys.stderr)
        if ended.traceback:
            log_path = recorder.log_path if recorder is not None else log_failure(
                ended.reason or "", ended.traceback, kind=ended.kind, source="cli", settings=config.to_dict())
            if log_path is not None:
                print(f"workbench run: the traceback is in {log_path}", file=sys.stderr)
        return 2 if ended.kind in BAD_INPUT_KINDS else 1
    return 1


def print_notes(args: argparse.Namespace, prog: str) -> None:
    """What the flags implied (said once the settings pass their checks)."""
    for note in getattr(args, "notes", []):
        print(f"{prog}: {note}", file=sys.stderr)


def launched_config(args: argparse.Namespace, config: RunConfig, world: Any) -> RunConfig:
    """Under torchrun the processes are torchrun's: --devices may only repeat their number. The run is
    recorded with devices = the world size, so its settings say how many processes trained."""
    if config.devices not in (0, 1, world.world_size):
        raise UsageError(
            f"workbench run: --devices {config.devices} under torchrun, which started {world.world_size} "
            "processes: drop --devices (torchrun's --nproc-per-node and --nnodes decide)"
        )
    if config.device != "cpu":
        from workbench.engine.distributed.rank import claim_local_gpu

        claim_local_gpu(world)  # before anything touches CUDA: each rank's context on its own GPU
    return config.replace(devices=world.world_size)


def run_quietly(config: RunConfig, rank: int) -> int:
    """A torchrun rank other than 0: train, print nothing but a failure, record nothing."""
    from workbench.engine import run

    stop = threading.Event()
    previous_handler = signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    ended = None
    try:
        for event in run(config, stop.is_set):
            if isinstance(event, RunEnded):
                ended = event
    finally:
        signal.signal(signal.SIGINT, previous_handler)
    if ended is not None and ended.status == "failed":
        print(f"workbench run: rank {rank}: {ended.reason}", file=sys.stderr)
        return 2 if ended.kind in BAD_INPUT_KINDS else 1
    return 0 if ended is not None and ended.status == "finished" else 1


def _stop_then_interrupt(stop: threading.Event, progress: "ProgressLine"):
    """First Ctrl-C: stop at the next step (the run is kept as stopped). Second: abort."""

    def handle(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        progress.message("stopping at the next step (Ctrl-C again to abort)…")

    return handle


def _on_sample_request(requests: Any, progress: "ProgressLine") -> Any:
    """SIGUSR1 (`kill -USR1 <pid>`) asks the run for a profiler sample; returns the previous handler."""
    if not hasattr(signal, "SIGUSR1"):
        return None

    def handle(signum: int, frame: Any) -> None:
        requests.request()
        progress.message("profile sample requested: taken at the next steps that fit")

    return signal.signal(signal.SIGUSR1, handle)


def print_summary(ended: RunEnded, config: Optional[RunConfig] = None) -> None:
    s = ended.summary
    rows = [
        ("status", s.status + (f" ({s.reason})" if s.reason else "")),
        ("device", f"{s.device_name} [{s.device}]" if s.device else "n/a"),
        ("test accuracy", f"{s.test_accuracy:.1%}" if s.test_accuracy is not None else "n/a"),
        ("final loss", f"{s.final_loss:.4f}" if s.final_loss is not None else "n/a"),
        ("images/sec", images_per_sec_text(s)),
        ("data wait", f"{s.data_wait_fraction:.1%} of training time" if s.data_wait_fraction is not None else "n/a"),
        ("peak memory", peak_memory_text(s)),
        *_rank_rows(s),
        ("wall time", format_duration(s.wall_seconds)),
        *timeline_report.summary_rows(s, config),
        ("verdict", s.verdict or "n/a"),
    ]
    if s.skipped_optimizer_steps:
        rows.insert(4, ("skipped steps", f"{s.skipped_optimizer_steps:,} fp16 optimizer steps (inf/NaN gradients)"))
    if s.compile_seconds is not None:
        graphs = f"; CUDA graphs: {s.cuda_graphs}" if s.cuda_graphs is not None else ""
        rows.insert(5, ("compile", f"{s.compile_seconds:,.1f} s, the first step (left out of images/sec){graphs}"))
    for label, value in rows:
        print(f"{label:>14}  {value}")
    lines = timeline_report.finding_lines(s)
    if lines:
        print(f"{'findings':>14}")
        for line in lines:
            print(f"{'':>14}  {line}")


def images_per_sec_text(s: RunSummary) -> str:
    """"1,234 steady state (90 % interval 1,200–1,260; median window 1,236)"."""
    if s.images_per_sec is None:
        return "n/a"
    spread = [f"median window {s.images_per_sec_median:,.0f}"] if s.images_per_sec_median is not None else []
    if s.images_per_sec_low is not None and s.images_per_sec_high is not None:
        spread.insert(0, f"90 % interval {s.images_per_sec_low:,.0f}–{s.images_per_sec_high:,.0f}")
    else:
        spread.insert(0, "no interval: fewer than 3 steady windows")
    return f"{s.images_per_sec:,.0f} steady state ({'; '.join(spread)})"


def peak_memory_text(s: RunSummary) -> str:
    """The torch and NVML peaks on a GPU; on a CPU, where they do not exist, the process's resident memory."""
    rss = f"process RSS {format_bytes(s.peak_process_rss_bytes)}"
    if s.peak_allocated_bytes is None and s.peak_reserved_bytes is None and s.peak_nvml_used_bytes is None:
        if s.peak_process_rss_bytes is None:
            return "n/a"
        return f"{rss} (the training process's resident memory; the torch and NVML figures need a CUDA GPU)"
    return (f"torch allocated {format_bytes(s.peak_allocated_bytes)}, reserved {format_bytes(s.peak_reserved_bytes)}; "
            f"NVML used {format_bytes(s.peak_nvml_used_bytes)} device-wide, "
            f"{format_bytes(s.peak_nvml_process_used_bytes)} this process; {rss}")


def _rank_rows(s: RunSummary) -> list[tuple[str, str]]:
    if s.world_size == 1:
        return []
    rows = [("processes", f"{s.world_size}: images/sec above is all of them together; data wait and peak memory "
                          "are the highest rank's")]
    for rank, (allocated, reserved) in enumerate(zip(s.rank_peak_allocated_bytes, s.rank_peak_reserved_bytes)):
        if allocated is not None or reserved is not None:
            rows.append((f"rank {rank} peak", f"allocated {format_bytes(allocated)}, reserved {format_bytes(reserved)}"))
    return rows


class ProgressLine:
    """A one-line progress bar on a terminal; one line per epoch otherwise (logs stay readable)."""

    WIDTH = 24

    def __init__(self, stream: Any):
        self.stream = stream
        self.tty = stream.isatty()
        self._dirty = False

    def show(self, event: Any) -> None:
        if isinstance(event, StatusChanged):
            self._line(event.message)
        elif isinstance(event, RunStarted):
            for note in event.notes:
                self._print(f"note: {note}")
            processes = f" × {event.world_size} processes" if event.world_size > 1 else ""
            self._print(
                f"{event.config.model} on {event.device.name} [{event.device.type}]{processes}, {event.dataset_name}: "
                f"{event.train_size:,} train / {event.test_size:,} test images, {event.total_steps:,} steps, "
                f"effective batch {event.effective_batch_size:,}"
            )
        elif isinstance(event, StepStats):
            if self.tty:
                done = event.step / max(1, event.total_steps)
                bar = "#" * int(done * self.WIDTH)
                eta = event.elapsed_seconds / done - event.elapsed_seconds if done > 0 else None
                self._line(
                    f"epoch {event.epoch}/{event.epochs} [{bar:<{self.WIDTH}}] {event.step}/{event.total_steps} "
                    f"loss {event.loss:.3f} {event.images_per_sec:,.0f} img/s "
                    f"wait {event.data_wait_fraction:.0%} ETA {format_duration(eta)}"
                )
        elif isinstance(event, ProfileSample):
            self._print(timeline_report.sample_line(event))
        elif isinstance(event, EpochStats):
            self._print(
                f"epoch {event.epoch}/{event.epochs}: train loss {event.train_loss:.3f}, "
                f"test accuracy {event.test_accuracy:.1%}, {event.images_per_sec:,.0f} img/s, "
                f"data wait {event.data_wait_fraction:.0%}"
            )

    def message(self, text: str) -> None:
        self._print(text)

    def _line(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + text)
            self.stream.flush()
            self._dirty = True

    def _print(self, text: str) -> None:
        if self._dirty:
            self.stream.write("\r\033[K")
            self._dirty = False
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self._dirty:
            self.stream.write("\n")
            self._dirty = False
