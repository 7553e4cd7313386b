"""Trace files read in a process of their own, for ``rank_pool``:
``python -m workbench.trace_analysis.rank_worker PARENT_PID SEVERAL WANT_DIGEST NEWS_FD`` reads its files from its
stdin (``rank_pool.job_text``: a JSON list of [file, fallback rank], one file or a folder's small ones), then
writes the list of ``reading.read_rank_file``'s results, one per file in their order, pickled, to its stdout (a
pipe that only the parent reads: it unpickles only what its own child wrote there), or the TraceError that says
why a lone file cannot be read (raised by its reader as it would have been in its own process). On the pipe
NEWS_FD, as it goes: a line of its files' bytes read in all after each chunk, and ``analysing`` once they are all
read and the last file's figures are being worked out."""

from __future__ import annotations

import gc
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from workbench.engine.worker_lifetime import worker_init
from workbench.trace_analysis.rank_pool import ANALYSING


def main(argv: list[str]) -> int:
    parent, several, want_digest, news_fd = argv
    job = json.loads(sys.stdin.buffer.read())
    # The result's pipe kept apart; anything else printed (a library's stray line) goes to stderr, not into it.
    result_pipe = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # No longer than the reader that started it (its kill, a SIGKILL included), and Ctrl-C is the reader's to
    # answer: as a DataLoader worker lives (engine/worker_lifetime.py).
    worker_init(int(parent), 0)
    gc.disable()  # as read_report does: millions of events kept, none in a cycle
    from workbench.trace_analysis.model import TraceError
    from workbench.trace_analysis.reading import read_rank_file

    # Unbuffered: each line is one write of a few bytes, whole in the pipe (PIPE_BUF), read by the reader's poll.
    with open(int(news_fd), "wb", buffering=0) as news:
        result: Any = []
        done = read = 0  # the bytes of the files read before this one; of this one
        for place, (file, fallback_rank) in enumerate(job):
            def progress(bytes_read: int) -> None:
                nonlocal read
                read = bytes_read
                news.write(b"%d\n" % (done + bytes_read))

            def analysing() -> None:
                if place == len(job) - 1:  # the bar says "reading" until the last file's bytes are read
                    news.write(ANALYSING + b"\n")

            try:
                result.append(read_rank_file(Path(file), int(fallback_rank), several == "1", want_digest == "1",
                                             progress, None, analysing))
            except TraceError as error:  # (a folder's file has it in its result): a lone file's, for its reader
                result = error
                break
            done, read = done + read, 0
    with result_pipe:
        pickle.dump(result, result_pipe, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
