"""The compute ceiling: how fast the chosen model trains when data costs nothing.

The probe trains the run's own model and step, built where the run builds them (train_step.build_training: its
precision, memory format, compile setting, batch, optimizer, loss, accumulation and gradient clipping) on one batch
that already sits on the device: no loader, no augmentation, no host round trip. After a warm-up (cuDNN autotuning,
compilation) it times chunks of steps between two synchronisations, each at least
``MIN_CHUNK_SECONDS`` long, until the rate is steady (``ceiling_cache.steady_chunks``: the last
``STEADY_CHUNKS`` or more chunks within ``STEADY_TOLERANCE`` of each other over at least
``STEADY_MIN_SECONDS``). Two agreeing one-step chunks are not a measurement: a CPU ceiling of 67
images/s called steady after two of them was beaten by 35 % by the runs it bounded. A run's pipeline
efficiency is its steady-state images/sec ÷ this ceiling: what its data path, augmentation and logging
leave of what the model could do.

A stop lands within ``interruptible.POLL_SECONDS``: the probe runs on a helper thread the caller polls, since one step
of a large model on a CPU (or the first, compiling, one) takes many seconds inside calls that never look at the stop
flag. The step in flight is abandoned: it runs to its end in the background, where the probe sees the stop before
its next step and frees its model; a stopped probe gives no figure. Until then it holds the device: a probe started
meanwhile waits for it before it builds anything, and so does a run (trainer.run); and a probe waits, as a run does,
for whatever else a stop left running (a stopped run's torch.compile or model build: phases.left_running), so none
times its steps on a device that abandoned work shares.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Callable, Optional

import torch

from workbench.config import RunConfig
from workbench.device_info import DeviceInfo
from workbench.engine.ceiling_cache import Ceiling, ProbeStopped, ceiling_key, num_classes_of, steady_chunks
from workbench.engine.garbage import collect_garbage
from workbench.engine.interruptible import HelperCall, Stopped, wait_for_abandoned
from workbench.engine.phases import CEILING_PROBE, left_running, waiting_for
from workbench.engine.requests import never

WARMUP_STEPS = 5  # cuDNN picks its algorithms on the first step of a shape; compile on the first call
# Timing chunks shorter than this are dominated by the two synchronisations around them.
MIN_CHUNK_SECONDS = 0.25
DEFAULT_BUDGET_SECONDS = 30.0


def measure_ceiling(
    config: RunConfig,
    device: DeviceInfo,
    num_classes: Optional[int] = None,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    stop: Callable[[], bool] = never,
    progress: Optional[Callable[[str], None]] = None,
) -> Ceiling:
    """Measure (never read the cache): the model's images/sec on on-device batches, for these settings.

    Once ``stop()`` is true the probe raises ``ProbeStopped`` (a stopped probe gives no figure, not even a rough one:
    it was never steady, and the cache must not keep it) within ``interruptible.POLL_SECONDS``, without waiting for
    the step in flight (see the module's docstring). A KeyboardInterrupt while it waits abandons the probe too."""
    if num_classes is None:
        num_classes = num_classes_of(config)
        if num_classes is None:
            from workbench.engine.datasets import load_data

            num_classes = load_data(config).num_classes
    if stop():
        raise ProbeStopped("stopped before the model was built")
    left = left_running()  # a stopped run's compile or build, a stopped probe's step: their time would be the probe's
    if left:
        waiting = waiting_for(left)
        (progress or (lambda message: None))(f"{waiting} ({'it' if len(left) == 1 else 'they'} would share the "
                                              "device with the probe's timed steps)…")
        if not wait_for_abandoned(stop=stop):
            raise ProbeStopped(f"stopped while {waiting}")
    probe = _Probe(config, device, num_classes, budget_seconds, stop, progress or (lambda message: None))
    try:
        return HelperCall(probe.measure, PHASE).wait(stop)
    except Stopped:
        raise ProbeStopped(f"stopped {probe.where}") from None
    finally:
        probe.ended.set()  # abandoned, the probe stops before its next step


PHASE = CEILING_PROBE  # the helper thread's name (interruptible.abandoned_phases)
# One probe measures at a time: a probe started right after a stop waits for the stopped one's step in flight,
# which would otherwise share the device (or the CPU's cores) with its timed chunks. (A run waits for it as for any
# abandoned phase: trainer.run.)
_measuring = threading.Lock()


class _Probe:
    """One measurement, on the helper thread; ``where`` says how far it got (a stopped probe's message)."""

    def __init__(self, config: RunConfig, device: DeviceInfo, num_classes: int, budget_seconds: float,
                 stop: Callable[[], bool], say: Callable[[str], None]):
        self.config, self.device, self.num_classes = config, device, num_classes
        self.budget_seconds, self._stop, self.say = budget_seconds, stop, say
        self.ended = threading.Event()  # the caller stopped waiting (a stop, a KeyboardInterrupt)
        self.where = "while the model was built"

    def stopping(self) -> bool:
        return self.ended.is_set() or self._stop()

    def check_stop(self) -> None:
        """Asked before every step (a step may take seconds; once abandoned, the probe must not start another)."""
        if self.stopping():
            raise ProbeStopped(f"stopped {self.where}")

    def measure(self) -> Ceiling:
        from workbench.engine.device import on_device, resolve

        target = resolve(self.device)
        if not _measuring.acquire(blocking=False):
            self.where = "while waiting for a stopped probe's last step to end"
            self.say("waiting for a stopped probe's last step to end…")
            _measuring.acquire()
        try:
            with on_device(target):  # each thread starts on CUDA device 0
                self.check_stop()
                self.where = "while the model was built"
                return self._measure_on(target)
        finally:
            _measuring.release()

    def _measure_on(self, target: torch.device) -> Ceiling:
        from workbench.engine.train_step import build_training

        config, say = self.config, self.say
        cuda = target.type == "cuda"
        torch.manual_seed(config.seed)
        step = build_training(config, self.num_classes, target).step  # the run's own model and step, clipping included
        memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
        images = torch.randn(config.batch_size, 3, config.image_size, config.image_size,
                             device=target).contiguous(memory_format=memory_format)
        labels = torch.randint(0, self.num_classes, (config.batch_size,), device=target)

        def synchronize() -> None:
            if cuda:
                torch.cuda.synchronize(target)

        try:
            say(f"warming up {config.model} (batch {config.batch_size}, {config.precision}) on {self.device.name}…")
            began = time.perf_counter()
            for warmed in range(WARMUP_STEPS):
                self.where = f"while warming up ({warmed} of {WARMUP_STEPS} warm-up steps done)"
                self.check_stop()
                step(images, labels)
            synchronize()
            budget_end = time.perf_counter() + max(0.0, self.budget_seconds - (time.perf_counter() - began) / 2)
            chunk, settled = 1, None
            chunks: list[tuple[int, float]] = []  # (images, seconds) of each timed chunk
            while True:
                self.where = (f"while timing ({len(chunks)} chunk{'s' if len(chunks) != 1 else ''} timed, "
                              "not yet steady)")
                start = time.perf_counter()
                for _ in range(chunk):
                    self.check_stop()  # a flag's read: far below a step's time, and a stopped chunk is never used
                    step(images, labels)
                synchronize()
                seconds = time.perf_counter() - start
                if seconds < MIN_CHUNK_SECONDS and time.perf_counter() < budget_end:
                    chunk *= 2  # too short to time well: longer chunks, and this one does not count
                    continue
                chunks.append((chunk * config.batch_size, seconds))
                say(f"{chunks[-1][0] / seconds:,.0f} images/s over {chunk} step{'s' if chunk != 1 else ''}")
                settled = steady_chunks(chunks)
                if settled is not None or time.perf_counter() >= budget_end:
                    break
            # Steady: the agreeing chunks' images ÷ their seconds. Not steady: the median chunk, a rough figure.
            timed = settled or chunks
            value = (sum(images for images, _ in settled) / sum(seconds for _, seconds in settled) if settled
                     else statistics.median(images / seconds for images, seconds in chunks))
            return Ceiling(
                images_per_sec=value, steady=settled is not None,
                timed_steps=sum(images for images, _ in timed) // config.batch_size,
                timed_seconds=sum(seconds for _, seconds in timed),
                key=ceiling_key(config, self.device, self.num_classes), measured_at=time.time(),
            )
        finally:
            del step, images, labels
            collect_garbage()
            if cuda:
                torch.cuda.empty_cache()
