"""How the `workbench` process ends when work a stop abandoned is still running once the command is done.

An abandoned phase (engine/interruptible.py) that outlives the command's wait for it runs on a helper thread,
often inside torch's C++ code. Left to Python's exit, two things went wrong:
- Python's exit joins the DataLoader workers the phase started, which ignore the stop signals
  (engine/worker_lifetime.py): a worker stuck in the user's dataset kept the command from ever ending.
- A thread still in torch when Python finalizes is stopped where it next takes the GIL; inside a C++ frame that
  may not unwind, the process aborts ("terminate called without an active exception", exit -6) after the run
  was recorded (seen once in CI after a Ctrl-C during spawn workers' start-up).
So the workers are killed (SIGKILL: they ignore the rest), which ends a worker start-up: torch finds its workers
dead and raises, and the phase releases what it made. The process then exits as usual, with no thread left in
torch. Work that ends by no kill (a stuck download) gets a while, then the process leaves with os._exit; a join
that waits for other processes of a run (engine/distributed/rank.py) gets no while: it ends only when they come.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time

from workbench.cli.interrupts import flush_output
from workbench.engine.interruptible import abandoned_phases

# torch's DataLoader looks at its workers every 5 s (MP_STATUS_CHECK_INTERVAL) while it waits for a batch; this
# is that and the margin of a loaded machine.
WINDING_DOWN_S = 15.0
KILL_EVERY_S = 0.1  # a start-up still starting workers starts more: each is killed as it appears


def end_program(code: int) -> int:
    """``code``, for sys.exit, once nothing abandoned still runs; the process ends here with it otherwise."""
    running = abandoned_phases()
    if running:
        say(f"workbench: {' and '.join(running)} still running when the command ended: ending it")
        if hasattr(signal, "SIGCHLD"):  # torch's handler raises "worker exited unexpectedly" in this thread
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        deadline = time.monotonic() + WINDING_DOWN_S
        while abandoned_phases() and time.monotonic() < deadline:
            for child in multiprocessing.active_children():  # this process's workers only: the command is done
                child.kill()
            time.sleep(KILL_EVERY_S)
    if not abandoned_phases() and not abandoned_phases(ended_by_others=True):
        return code
    # What is left ends by no kill: a stuck download, or a join whose other processes never came (torch gives up
    # after 30 minutes; the run already said it stopped while waiting, so nothing more is said of it).
    flush_output()
    os._exit(code)


def say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
