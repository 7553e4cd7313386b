"""What ended a run that failed, in words a user can act on: the reason, its kind and (for the
unexpected ones) the traceback as text.

Only strings leave here. The exception's traceback holds the frames of the failed step (its
activations, the model, the optimizer state); nothing may keep it once the run reports its end.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from workbench.config import RunConfig
from workbench.engine.data import DataError
from workbench.engine.run_summary import FailureKind


class ModelError(ValueError):
    """The model spec cannot give this run a model (engine/models.py); the message names what went wrong, in one
    line. Bad input: refused before the run starts."""


class Diverged(RuntimeError):
    """The loss or the fp16 loss scale says training has broken down; the message says what to change."""


@dataclass(frozen=True)
class Failure:
    reason: str
    kind: FailureKind
    traceback: Optional[str] = None  # for failures the user did not cause and cannot read from the reason


# What the CUDA caching allocator, cuBLAS/cuDNN workspaces and the CPU allocator say when memory runs
# out. cuDNN and the allocator raise plain RuntimeErrors ("CUDA error: out of memory",
# "CUDNN_STATUS_ALLOC_FAILED") rather than torch.OutOfMemoryError.
_OUT_OF_MEMORY = re.compile(r"out of memory|ALLOC_FAILED|can't allocate memory", re.IGNORECASE)
_CPU_OUT_OF_MEMORY = re.compile(r"DefaultCPUAllocator", re.IGNORECASE)
_TRIED_TO_ALLOCATE = re.compile(r"Tried to allocate [\d.]+ [KMGT]?i?B")
# DataLoader worker trouble, as torch words it: a worker that died ("DataLoader worker (pid 123) is
# killed by signal: Killed.", "... exited unexpectedly"), or an error raised in one ("Caught
# RuntimeError in DataLoader worker process 0."). Shared-memory exhaustion shows as a write or mmap
# failure on a /dev/shm file named torch_*, or as a bus error in a worker.
_DATALOADER = re.compile(r"DataLoader worker|in DataLoader worker process")
_SHARED_MEMORY = re.compile(r"shared memory|</?torch_|bus error|No space left on device", re.IGNORECASE)
# A worker hands each batch's shared memory over as a file descriptor through multiprocessing's resource
# sharer; one that dies in the middle leaves the training thread an EOFError or a refused or reset
# connection from there, with no word of a worker in it (a kill lands there about one time in three).
_HANDOVER_ERRORS = (EOFError, ConnectionError, FileNotFoundError)


def user_exit_words(error: BaseException) -> str:
    """How the user's code tried to end the process: "called sys.exit(3)", "raised KeyboardInterrupt"."""
    if isinstance(error, SystemExit):
        return f"called sys.exit({'' if error.code is None else repr(error.code)})"
    return f"raised {type(error).__name__}"


def is_out_of_memory(error: BaseException) -> bool:
    oom_types = tuple(t for t in (getattr(torch, "OutOfMemoryError", None), torch.cuda.OutOfMemoryError) if t)
    if isinstance(error, oom_types):
        return True
    return isinstance(error, RuntimeError) and bool(_OUT_OF_MEMORY.search(str(error)))


def describe_failure(error: BaseException, config: RunConfig) -> Failure:
    """The reason, kind and traceback text of an exception that ended a run."""
    if isinstance(error, DataError):
        return Failure(_worker_error_words(str(error)), "data")
    if isinstance(error, ModelError):
        return Failure(str(error), "config")
    if isinstance(error, Diverged):
        return Failure(str(error), "diverged")
    text = str(error)
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    if _DATALOADER.search(text):
        return Failure(_data_loader_reason(text, config), "data_loader", trace)
    if _worker_died_handing_over_a_batch(error):
        words = f"{type(error).__name__} while receiving a batch" + (f": {text}" if text else "")
        return Failure(_worker_died_reason(words, config), "data_loader", trace)
    if _forkserver_died_starting_a_worker(error):
        return Failure(
            f"the forkserver process that starts the DataLoader's workers died as it started one "
            f"({type(error).__name__}: {text or 'no message'}): the system's out-of-memory killer may have ended it, "
            f"or another process did. Try fewer workers (num_workers is {config.num_workers}), or "
            "worker_start_method=spawn", "data_loader", trace)
    if is_out_of_memory(error):
        return Failure(out_of_memory_reason(text, config), "out_of_memory", trace)
    return Failure(f"{type(error).__name__}: {text}", "error", trace)


def _worker_error_words(text: str) -> str:
    """A DataError raised in a DataLoader worker comes back as "Caught DataError in DataLoader worker process 0.
    Original Traceback …": its own words are the traceback's last line (after the exception's name)."""
    if "Original Traceback" not in text:
        return text
    last = [line for line in text.strip().splitlines() if line.strip()][-1]
    return last.split("DataError: ", 1)[-1].strip()


def out_of_memory_reason(text: str, config: RunConfig) -> str:
    where = "host (CPU) memory ran out" if _CPU_OUT_OF_MEMORY.search(text) else "CUDA out of memory"
    tried = _TRIED_TO_ALLOCATE.search(text)
    advice = "try a smaller batch with accumulation_steps"
    if config.batch_size > 1:
        smaller = max(1, config.batch_size // 2)
        advice += (f" (batch_size={smaller} with accumulation_steps={config.accumulation_steps * 2} keeps the "
                   f"effective batch of {config.effective_batch_size})")
    if config.precision == "fp32":
        advice += ", or fp16/bf16"
    return (f"{where} with {config.model} at batch_size={config.batch_size}, {config.precision}"
            + (f" ({tried.group(0)})" if tried else "") + f": {advice}")


def _data_loader_reason(text: str, config: RunConfig) -> str:
    words = _torch_words(text)
    if _SHARED_MEMORY.search(text):
        return (f"DataLoader workers ran out of shared memory (/dev/shm): {words}. Raise the shared-memory "
                "limit (Docker: --shm-size=2g or --ipc=host), or lower num_workers, prefetch_factor or "
                "batch_size, or use pipeline=gpu-resident")
    if "killed by signal" in text or "exited unexpectedly" in text:
        return _worker_died_reason(words, config)
    return (f"a DataLoader worker raised an error: {words}. It ran the dataset's loading and augmentation "
            "code; num_workers=0 runs that code in the training thread, where it is easier to debug")


def _worker_died_reason(words: str, config: RunConfig) -> str:
    return (f"a DataLoader worker process died ({words}): the system's out-of-memory killer may have "
            f"ended it, or another process did. Try fewer workers (num_workers is {config.num_workers}) "
            "or a smaller prefetch_factor, or num_workers=0 to load batches in the training thread")


def _worker_died_handing_over_a_batch(error: BaseException) -> bool:
    if not isinstance(error, _HANDOVER_ERRORS):
        return False
    files = [Path(frame.filename) for frame in traceback.extract_tb(error.__traceback__)]
    return any(file.name == "resource_sharer.py" and file.parent.name == "multiprocessing" for file in files)


def _forkserver_died_starting_a_worker(error: BaseException) -> bool:
    """An EOFError (or a broken connection) from multiprocessing's forkserver as it starts a worker: the server
    process is gone ("EOFError: unexpected EOF" said nothing of it)."""
    if not isinstance(error, (EOFError, ConnectionError)):
        return False
    files = [Path(frame.filename) for frame in traceback.extract_tb(error.__traceback__)]
    return any(file.name in ("forkserver.py", "popen_forkserver.py") and file.parent.name == "multiprocessing"
               for file in files)


def _torch_words(text: str) -> str:
    """torch's own message, short: a worker's re-raised error ends with its original last line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "no message"
    if lines[0].startswith("Caught ") and len(lines) > 1:
        return lines[-1].rstrip(".")
    return lines[0].rstrip(".")
