"""The phases a run or a ceiling probe waits on in one blocking call (``interruptible.HelperCall``'s names), and how
each is said: what the run was doing when a stop ended it, and what of it a stop left running.

A stopped phase is abandoned and runs on to its end in the background (interruptible.py): until then it shares the
device (or the CPU's cores) with whatever starts next, so a run and a probe first wait for it
(``left_running``), saying what they wait for.
"""

from __future__ import annotations

from workbench.engine.interruptible import abandoned_phases

LOAD_DATA = "load data"
BUILD = "build"
WORKER_START_UP = "worker start-up"
COMPILE = "torch.compile"
EVALUATION = "evaluation"
CEILING_PROBE = "ceiling probe"

# What the run was doing when a stop ended the phase (a stopped run's reason: "stopped by the user while …").
WHILE = {
    LOAD_DATA: "while loading the data",
    BUILD: "while building the model",
    WORKER_START_UP: "while the DataLoader workers started",
    COMPILE: "while torch.compile compiled the model",
    EVALUATION: "during evaluation",
}
# What a stop left running of the phase, as the run or probe that waits for it says it.
LEFT_RUNNING = {
    LOAD_DATA: "a stopped run's data loading",
    BUILD: "a stopped run's model build",
    WORKER_START_UP: "a stopped run's DataLoader worker start-up",
    COMPILE: "a stopped run's torch.compile",
    CEILING_PROBE: "a stopped ceiling probe's last step",
}


def left_running() -> list[str]:
    """What a stop left running in this process, in words ("a stopped run's torch.compile"), which the next run or
    probe waits for (``interruptible.wait_for_abandoned``); [] where nothing is."""
    return [LEFT_RUNNING.get(phase, f"a stopped {phase}") for phase in abandoned_phases()]


def waiting_for(left: list[str]) -> str:
    """"waiting for a stopped run's torch.compile and a stopped run's model build to end"."""
    return f"waiting for {' and '.join(left)} to end"
