"""One rank file read in a process of its own, for ``rank_pool``:
``python -m workbench.trace_analysis.rank_worker PARENT_PID FILE FALLBACK_RANK WANT_DIGEST`` writes
``reading.read_rank_file``'s result, pickled, to its stdout (a pipe that only the parent reads: it unpickles only
what its own child wrote there)."""

from __future__ import annotations

import gc
import os
import pickle
import sys
from pathlib import Path

from workbench.engine.worker_lifetime import worker_init


def main(argv: list[str]) -> int:
    parent, file, fallback_rank, want_digest = argv
    # The result's pipe kept apart; anything else printed (a library's stray line) goes to stderr, not into it.
    result_pipe = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # No longer than the reader that started it (its kill, a SIGKILL included), and Ctrl-C is the reader's to
    # answer: as a DataLoader worker lives (engine/worker_lifetime.py).
    worker_init(int(parent), 0)
    gc.disable()  # as read_report does: millions of events kept, none in a cycle
    from workbench.trace_analysis.reading import read_rank_file

    result = read_rank_file(Path(file), int(fallback_rank), True, want_digest == "1")
    with result_pipe:
        pickle.dump(result, result_pipe, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
