"""run_one(config, stop): one process's run, from settings to exactly one RunEnded.

It checks the settings, loads the data, builds a TrainingSession (session.py: the step loop),
yields its events, and turns whatever ended the run into a RunEnded with a summary. A rank of a
data-parallel run (workbench.engine.distributed) is one such process with its ``world``.

How a run ends, and what is released first:
- The session (model, optimizer, DataLoader workers, NVML) is closed *before* RunEnded is yielded:
  once a consumer sees the end, the next run can have the memory and the cores. A compiled run also
  resets torch's compiler state, whose CUDA graphs hold memory of their own.
- A failure is remembered as text and handled after the ``except`` block: the exception's
  traceback holds the frames of the failed step (activations, the model, optimizer state), and
  while it lives nothing can be freed — an out-of-memory run would keep the memory it ran out of.
- Loading the data and building the session run on helper threads the run polls (interruptible.py),
  so a stop ends them within a poll interval; abandoned work finishes in the background.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from workbench.config import RunConfig
from workbench.engine.compiling import reset_compiler
from workbench.data_check import planned_steps, steps_problems
from workbench.engine.data import DataError
from workbench.engine.datasets import TrainingData, load_data
from workbench.engine.device import on_device, probe_device, resolve
from workbench.engine.events import Event, RunEnded, StatusChanged
from workbench.engine.failures import Failure, describe_failure, user_exit_words
from workbench.engine import phases
from workbench.engine.interruptible import Stopped, call_interruptibly
from workbench.engine.memory import free_device_memory
from workbench.engine.requests import ProfileRequests, never, stopped_by
from workbench.engine.saved_model import save_weights
from workbench.engine.session import TrainingSession
from workbench.engine.summary import SummaryBuilder
from workbench.regular_file import write_error_words



def run_one(
    config: RunConfig,
    stop: Callable[[], bool] = never,
    profile_requests: Optional[ProfileRequests] = None,
    world: Optional[Any] = None,
    local_stop: Optional[Callable[[], bool]] = None,
) -> Iterator[Event]:
    """One process's run; ``world`` (a distributed.rank.RankWorld) when it is one rank of several, and then
    ``local_stop`` its own stop flag (``stop`` being the one the ranks agree on): it ends rank 0's evaluation."""
    summary = SummaryBuilder()

    def ended(status, reason=None, kind=None, traceback=None) -> RunEnded:
        return RunEnded(status=status, summary=summary.build(status, reason, kind), reason=reason, kind=kind, traceback=traceback)

    try:
        device_info = probe_device(config.device)
    except Exception as error:
        yield ended("failed", f"could not query the device: {type(error).__name__}: {error}", "error")
        return
    # A rank is one process: how many the world holds was checked where it was started.
    problems = (config if world is None else config.replace(devices=1)).validate(device_info)
    if problems:
        yield ended("failed", "; ".join(problems), "config")
        return

    session: Optional[TrainingSession] = None
    failure: Optional[Failure] = None
    stopped_phase: Optional[str] = None
    try:
        # A rank stops only where every rank agrees to (dist10's agreed stop, called once per step): its
        # long phases are not cut short by a stop, or the ranks would part ways mid-collective. Rank 0's
        # evaluation is the exception (session.py: the others only wait for it).
        phase_stop = stop if world is None else never
        try:
            yield StatusChanged(message=f"Loading {config.dataset} data…")
            data = call_interruptibly(lambda: load_data(config), phase_stop, phases.LOAD_DATA)
            _check_data(config, data, world.world_size if world is not None else 1)
            yield StatusChanged(message=f"Building {config.model} on {device_info.type}…")
            if world is None:
                session = call_interruptibly(
                    lambda: _build_session(config, device_info, data, profile_requests), stop, phases.BUILD,
                    on_abandoned=_close_quietly,
                )
            else:  # a rank builds in its own thread: DDP's set-up is a collective on this thread's device
                session = TrainingSession(config, device_info, data, profile_requests, world=world,
                                          phase_stop=phase_stop, evaluation_stop=local_stop or never)
            with contextlib.closing(session.events(stop)) as events:
                for event in events:
                    summary.add(event)
                    yield event
        except Stopped as phase:
            stopped_phase = phases.WHILE.get(str(phase), str(phase))
        except Exception as error:
            failure = describe_failure(error, config)  # text only: no frame of the failed step survives
        except SystemExit as leaving:
            if world is not None:
                raise  # a rank's SIGTERM handler ends its process this way
            # Nothing of ours exits mid-run: the model's code did (its forward, torch.compile's first step).
            # Left to rise, the CLI would exit without a word and the window's training thread would end unheard.
            failure = Failure(f"the model's code {user_exit_words(leaving)} during the run", "config")
        except (KeyboardInterrupt, GeneratorExit):
            raise  # a second Ctrl-C; the consumer closing the run
        except BaseException as error:  # the model's code raised a BaseException of its own (asyncio's
            # CancelledError, a library's): left to rise, the CLI ended in a traceback, the window's thread unheard
            failure = describe_failure(error, config)
        # Past the except blocks: the exception and its traceback are gone, so closing frees for real.
        stopped_at = session.stopped_at if session is not None else None
        steps_done = session.step if session is not None else 0
        if failure is not None and session is not None:
            summary.trained_to(steps_done, session.samples_trained)
        saved: Optional[str] = None
        if session is not None and config.save_model and failure is None and steps_done > 0 and (
                world is None or world.rank == 0):
            try:
                saved = str(save_weights(session.model, config.save_model))
            except OSError as error:  # a full disk, a folder gone since the run started: the run's figures stay
                failure = Failure(f"trained, but could not save the weights to {config.save_model}: "
                                  f"{write_error_words(error, Path(os.path.expanduser(config.save_model)))}", "error")
        if session is not None:
            closing = session
            session = None
            closing.close()
            del closing
        compiling_abandoned = stopped_phase == phases.WHILE[phases.COMPILE]
        if config.compile != "off" and not compiling_abandoned:
            # Compiled code and its CUDA-graph pool outlive the model (pytorch #104095): drop them before
            # freeing, or the next run in this process starts short of memory. (A compilation a stop abandoned
            # still runs on its thread and holds torch's compile lock: reset would wait for it.)
            reset_compiler()
            free_device_memory()
        elif failure is not None:
            free_device_memory()
        if saved is not None:
            yield StatusChanged(message=f"Saved the trained model's weights to {saved}", lasting=True)
        if failure is not None:
            yield ended("failed", failure.reason, failure.kind, failure.traceback)
        elif stopped_phase is not None:
            at = f"at step {steps_done}, " if steps_done else ""
            yield ended("stopped", f"stopped by {stopped_by(stop)} {at}{stopped_phase}")
        elif stopped_at is not None:
            yield ended("stopped", f"stopped by {stopped_by(stop)} at step {stopped_at}")
        else:
            yield ended("finished")
    finally:
        if session is not None:  # the consumer closed the generator mid-run
            session.close()


def _check_data(config: RunConfig, data: TrainingData, world_size: int) -> None:
    """What only the loaded data can tell about the settings (the form and CLI check it earlier where they can)."""
    train_size = data.train_size
    if train_size < config.batch_size * world_size:
        per_step = f"batch_size {config.batch_size}" + (f" × {world_size} processes" if world_size > 1 else "")
        raise DataError(f"{per_step} is larger than the training set ({train_size} images)")
    problems = steps_problems(config, planned_steps(config, train_size, world_size))
    if problems:
        raise DataError("; ".join(problems))


def _build_session(config: RunConfig, device_info: Any, data: TrainingData,
                   profile_requests: Optional[ProfileRequests]) -> TrainingSession:
    with on_device(resolve(device_info)):  # a helper thread's current CUDA device is 0 until told
        return TrainingSession(config, device_info, data, profile_requests)


def _close_quietly(session: Optional[TrainingSession]) -> None:
    if session is not None:
        session.close()
