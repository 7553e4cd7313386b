"""What compiling the model cost and did: its first step's time, and whether CUDA graphs were used.

torch.compile(mode="reduce-overhead" or "max-autotune") replays each step's kernels as one CUDA graph, but
skips the graphs silently where it cannot capture them (CPU-side ops, dynamic shapes, mutated inputs, …):
only its "cudagraphs" log says why, and that log is off unless TORCH_LOGS asks for it. ``CudaGraphWatch``
listens to it for the whole run (a graph can be skipped at any later call: a re-recording limit, a new shape),
so the run can say "CUDA graphs: on" or "skipped: <torch's reason>", read again at the run's end.
"""

from __future__ import annotations

import logging
import re
from typing import Optional

import torch

from workbench.config import CUDA_GRAPH_MODES

# Where torch logs "skipping cudagraphs due to …" (inductor's artifact loggers, and dynamo's cudagraphs backend).
SKIP_LOGGERS = (
    "torch._inductor.cudagraph_utils.__cudagraphs",
    "torch._inductor.cudagraph_trees.__cudagraphs",
    "torch._dynamo.backends.cudagraphs",
)
# torch 2.14 writes both "skipping cudagraphs due to …" (cudagraph_utils.format_default_skip_message) and
# "skipping cudagraph due to function … exceeding max re-recording limit" (cudagraph_trees).
SKIP_WORDS = re.compile(r"skipping cudagraphs? due to ")
NOT_ASKED = None  # cuda_graphs when the run did not ask for them (compile is not one of CUDA_GRAPH_MODES)
ON_CPU = "skipped: the run is on the CPU (CUDA graphs need a CUDA GPU)"


class CudaGraphWatch(logging.Handler):
    """While entered, collects torch's reasons for skipping CUDA graphs; ``report()`` says what happened."""

    def __init__(self, compile_mode: str, device_type: str):
        super().__init__(logging.WARNING)
        self.asked = compile_mode in CUDA_GRAPH_MODES
        self.device_type = device_type
        self.reasons: list[str] = []
        self._levels: dict[str, int] = {}
        self._skips_before = 0

    def emit(self, record: logging.LogRecord) -> None:
        parts = SKIP_WORDS.split(record.getMessage(), maxsplit=1)
        if len(parts) == 2:
            self.reasons.append(parts[1].strip())

    def __enter__(self) -> CudaGraphWatch:
        self.listen()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_listening()

    def listen(self) -> CudaGraphWatch:
        """Attach to torch's loggers (once: a second call changes nothing) until ``stop_listening``."""
        if self.asked and self.device_type == "cuda" and not self._levels:
            for name in SKIP_LOGGERS:
                logger = logging.getLogger(name)
                self._levels[name] = logger.level
                logger.setLevel(logging.WARNING)  # the artifact logger is silent unless TORCH_LOGS enables it
                logger.addHandler(self)
            self._skips_before = _skip_count()
        return self

    def stop_listening(self) -> None:
        for name, level in self._levels.items():
            logger = logging.getLogger(name)
            logger.removeHandler(self)
            logger.setLevel(level)
        self._levels.clear()

    def report(self) -> Optional[str]:
        """None when not asked for; "on"; or "skipped: …" with torch's reason."""
        if not self.asked:
            return NOT_ASKED
        if self.device_type != "cuda":
            return ON_CPU
        if self.reasons:
            return "skipped: " + "; ".join(dict.fromkeys(self.reasons))
        if _skip_count() > self._skips_before:
            return "skipped: torch counted a skip but logged no reason"
        return "on"


def _skip_count() -> int:
    """torch's own count of skipped CUDA graphs (0 where this torch does not keep one)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return 0
    return int(counters["inductor"]["cudagraph_skips"])


def reset_compiler() -> None:
    """Drop torch.compile's in-process state: compiled code, guards, and the CUDA-graph trees with their memory
    pool (pytorch #104095). Without it the next run in this process (sweeps, tune, verify, max-batch, the
    window) starts with the last run's graphs' memory held, which "Release cached memory" cannot free."""
    torch.compiler.reset()
