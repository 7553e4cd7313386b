"""A ceiling probe stopped while one of its steps is in flight: that step blocks until the test releases it, and
runs on, abandoned, on the probe's helper thread (engine/ceiling.py)."""

from __future__ import annotations

import dataclasses
import threading

from workbench.engine.requests import StopRequest

STEP_BLOCKS_AT_MOST_S = 10.0  # without the fix the probe waits this long, then fails the test rather than hang


def counting_steps(monkeypatch, before_each=lambda steps: None, after_each=lambda steps: None) -> list[int]:
    """The probe's steps, counted as they start; ``before_each(steps)`` runs at each step's start, ``after_each(steps)``
    once it has returned."""
    from workbench.engine import train_step

    steps: list[int] = []
    build = train_step.build_training

    def counting_build(*args, **kwargs):
        training = build(*args, **kwargs)

        def counted(images, labels):
            steps.append(len(steps) + 1)
            before_each(steps)
            result = training.step(images, labels)
            after_each(steps)
            return result

        return dataclasses.replace(training, step=counted)

    monkeypatch.setattr(train_step, "build_training", counting_build)
    return steps


def stopped_in_step(monkeypatch, blocked_step: int, after_each=lambda steps: None):
    """The probe's steps counted, step ``blocked_step`` blocking until ``released`` is set, and a thread (started)
    that sets ``stop`` once that step is in flight: (steps, stop, the thread, released)."""
    in_step, released = threading.Event(), threading.Event()

    def block(steps):
        if len(steps) == blocked_step:
            in_step.set()
            released.wait(STEP_BLOCKS_AT_MOST_S)

    steps = counting_steps(monkeypatch, block, after_each)
    stop = StopRequest()
    stopper = threading.Thread(target=lambda: in_step.wait(STEP_BLOCKS_AT_MOST_S) and stop.set())
    stopper.start()
    return steps, stop, stopper, released
