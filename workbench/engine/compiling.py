"""What compiling the model cost and did: its first step's time, and whether CUDA graphs were used.

torch.compile(mode="reduce-overhead") replays each step's kernels as one CUDA graph, but skips the graphs
silently where it cannot capture them (CPU-side ops, dynamic shapes, mutated inputs, …): only its
"cudagraphs" log says why, and that log is off unless TORCH_LOGS asks for it. ``CudaGraphWatch`` listens to it
while the compiled model first runs, so the run can say "CUDA graphs: on" or "skipped: <torch's reason>".
"""

from __future__ import annotations

import logging
from typing import Optional

# Where torch logs "skipping cudagraphs due to …" (inductor's artifact logger, and dynamo's cudagraphs backend).
SKIP_LOGGERS = ("torch._inductor.cudagraph_utils.__cudagraphs", "torch._dynamo.backends.cudagraphs")
SKIP_WORDS = "skipping cudagraphs due to "
NOT_ASKED = None  # cuda_graphs when the run did not ask for them (compile is not reduce-overhead)
ON_CPU = "skipped: the run is on the CPU (CUDA graphs need a CUDA GPU)"


class CudaGraphWatch(logging.Handler):
    """While entered, collects torch's reasons for skipping CUDA graphs; ``report()`` says what happened."""

    def __init__(self, compile_mode: str, device_type: str):
        super().__init__(logging.WARNING)
        self.asked = compile_mode == "reduce-overhead"
        self.device_type = device_type
        self.reasons: list[str] = []
        self._levels: dict[str, int] = {}
        self._skips_before = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if SKIP_WORDS in message:
            self.reasons.append(message.split(SKIP_WORDS, 1)[1].strip())

    def __enter__(self) -> CudaGraphWatch:
        if self.asked and self.device_type == "cuda":
            for name in SKIP_LOGGERS:
                logger = logging.getLogger(name)
                self._levels[name] = logger.level
                logger.setLevel(logging.WARNING)  # the artifact logger is silent unless TORCH_LOGS enables it
                logger.addHandler(self)
            self._skips_before = _skip_count()
        return self

    def __exit__(self, *exc: object) -> None:
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
