"""`workbench run`: one training run, headless, every RunConfig field a --kebab-case flag."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from workbench.cli.bad_images import refuse_bad_images
from workbench.cli.interrupts import on_sample_request, take_stop_signals
from workbench.cli.parsing import UsageError
from workbench.cli.progress_line import ProgressLine
from workbench.cli.repeats import add_repeats_flag, run_repeats_command
from workbench.cli.run_summary_text import print_summary
from workbench.cli.setting_flags import add_setting_flags, config_from_args, print_notes
from workbench.cli.summary_json import summary_json
from workbench.config import RunConfig
from workbench.engine.events import RunEnded, RunStarted
from workbench.engine.interruptible import wait_for_abandoned
from workbench.engine.run_summary import IMAGES_PER_SEC_MEANS, WITHIN_ONE_RUN
from workbench.experiments.events import RecordingFailed, RunRecorded
from workbench.experiments.recording import record_events
from workbench.formatting import printable
from workbench.history.failure_log import log_failure

# Exit codes: 0 finished, 1 the run failed (or was stopped), 2 bad input.
BAD_INPUT_KINDS = ("config", "data")
ABANDONED_WORK_WAIT_S = 15.0
INTERRUPTED_BEFORE_THE_END = "the command was interrupted before the run ended"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="train once, headless",
        description="Train once without the GUI. Every setting is a flag; --config FILE.json supplies a base.",
        epilog=f"img/s (images_per_sec in the CSV and --json) is {IMAGES_PER_SEC_MEANS.partition(': ')[2]}. Its "
        f"interval (images_per_sec_low–images_per_sec_high) is {WITHIN_ONE_RUN}.",
        argument_default=argparse.SUPPRESS,  # only flags given on the command line override --config
    )
    parser.add_argument("--name", help="a name for this run in the history")
    parser.add_argument("--json", action="store_true", help="print the run summary as JSON on the last line")
    parser.add_argument("--no-history", action="store_true", help="do not record this run in the history")
    add_repeats_flag(parser)
    add_setting_flags(parser)
    parser.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    if "vary_seed" in args and "repeats" not in args:
        raise UsageError("workbench run: --vary-seed gives each repeat its own seed: it needs --repeats N")
    if "repeats" in args:  # the same run N times: a sequence of its own (cli/repeats.py)
        return run_repeats_command(args, config)
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
    refuse_bad_images(config, "workbench run")
    # The history is opened (and checked) before torch is imported too: a history that is damaged or cannot be
    # written here is one line and starts nothing (HistoryError: exit 1), and nothing is written into a damaged file.
    from workbench.history.store import HistoryStore

    store = None if getattr(args, "no_history", False) else HistoryStore.open()
    try:
        from workbench.engine import probe_device, run  # torch is imported only now

        problems = local.hardware_problems(probe_device(config.device))
        if problems:
            raise UsageError("workbench run: " + "; ".join(problems))
        print_notes(args, "workbench run")
        recorder = store.start_run(config, name=getattr(args, "name", None), source="cli") if store else None
    except BaseException:
        if store is not None:
            store.close()
        raise

    from workbench.engine.requests import ProfileRequests, StopRequest

    progress = ProgressLine(sys.stderr)
    stop = StopRequest()  # Ctrl-C, SIGTERM, SIGHUP: the run's reason names which
    requests = ProfileRequests()
    ended = None
    started = False
    give_back_signals = take_stop_signals(stop, progress)
    previous_usr1 = on_sample_request(requests, progress)
    # A history that stops taking the run's writes mid-run (a full disk) ends its record as failed, naming
    # why, and the run goes on without it, as sequences and the window do (record_events).
    recorded = record_events(run(config, stop, profile_requests=requests), recorder,
                             closed_reason=INTERRUPTED_BEFORE_THE_END)
    try:
        for event in recorded:
            if isinstance(event, RecordingFailed):
                progress.message(f"workbench run: the history stopped taking run #{event.run_id} ({event.reason}); "
                                 "the run goes on without it")
                continue
            if isinstance(event, RunRecorded):
                continue
            progress.show(event)
            started = started or isinstance(event, RunStarted)
            if isinstance(event, RunEnded):
                ended = event
    finally:
        recorded.close()  # now, not when collected: an aborted run's record is ended before the store closes
        give_back_signals()
        if previous_usr1 is not None:
            signal.signal(signal.SIGUSR1, previous_usr1)
        progress.close()
        if ended is not None:  # (not after an abort: that exits at once)
            # Work a stop abandoned (workers still starting, a download) winds down before the process
            # exits, so it shuts its workers down cleanly rather than being cut off mid-start.
            wait_for_abandoned(ABANDONED_WORK_WAIT_S)
        if store is not None:
            store.close()

    assert ended is not None  # the engine always ends with RunEnded
    if ended.status == "failed" and ended.kind in BAD_INPUT_KINDS and not started:
        # Refused before training (found only by loading the data): one line, nothing recorded.
        raise UsageError(f"workbench run: {ended.reason}")
    run_id = recorder.run_id if recorder is not None else None
    if store is not None:  # the findings say what their changes measured on this device before
        ended = with_measured_findings(ended, config)
    if args.__dict__.get("json"):
        print(json.dumps(summary_json(ended.summary, run_id=run_id, config=config)))
    else:
        print_summary(ended, config)
    if ended.status == "finished":
        return 0
    if ended.status == "failed":
        print(printable(f"workbench run: {ended.reason}"), file=sys.stderr)
        if ended.traceback:
            log_path = recorder.log_path if recorder is not None else log_failure(
                ended.reason or "", ended.traceback, kind=ended.kind, source="cli", settings=config.to_dict())
            if log_path is not None:
                print(f"workbench run: the traceback is in {log_path}", file=sys.stderr)
        return 2 if ended.kind in BAD_INPUT_KINDS else 1
    return 1


def with_measured_findings(ended: RunEnded, config: RunConfig) -> RunEnded:
    """The run's end with its findings as the history's measurements rank them (as they were, if it cannot be read)."""
    from dataclasses import replace

    from workbench.history.measured_changes import findings_as_shown
    from workbench.history.store import HistoryError, HistoryStore

    summary = ended.summary
    try:
        with HistoryStore.open() as store:
            findings = findings_as_shown(store, summary.findings, config, summary.device_type, summary.device_name)
    except HistoryError:
        return ended
    return replace(ended, summary=replace(summary, findings=findings))


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
    from workbench.engine.requests import StopRequest

    stop = StopRequest()
    ended = None
    # Every rank stops where the ranks agree (a second signal does not abort one rank alone).
    give_back_signals = take_stop_signals(stop, None, abort_on_second=False)
    try:
        for event in run(config, stop):
            if isinstance(event, RunEnded):
                ended = event
    finally:
        give_back_signals()
    if ended is not None and ended.status == "failed":
        print(printable(f"workbench run: rank {rank}: {ended.reason}"), file=sys.stderr)
        return 2 if ended.kind in BAD_INPUT_KINDS else 1
    return 0 if ended is not None and ended.status == "finished" else 1
