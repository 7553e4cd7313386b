"""Where one step of a run goes, as shares of the step as the run runs unprofiled (see StepShares).

The figures come from a sampled timeline window (``engine.timeline``'s ProfileSample) and the run's own step timers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from workbench.engine.events import ProfileSample


@dataclass(frozen=True)
class StepShares:
    """Where one step's time goes, as fractions of it that add up to 1.

    The sampled window is slower than the run's own steps: CUPTI adds microseconds to every launch (on an
    H100, resnet18 bf16 batch 512 ran 9.9 ms a step unprofiled and 13.7 ms with only the GPU activities
    recorded), and the host's extra time shows as the GPU waiting for the host. So the time base is the
    run's own step outside samples: kernel, copy and fill time come from the GPU's timeline (the device's
    durations barely change under CUPTI), the step's length and its wait for data from the loop's own
    timers outside the sample, "other" idle from the timeline, and what is left of the step is the GPU
    waiting for the host. ``rebased`` is False where no unprofiled step was known: then the shares are
    over the sampled window itself.

    That remainder is kept signed: an error in the base step time lands in it whole, where it can be
    seen (on the resnet18 H100 fixture, ±10 % on the base moves it by ±10 % of the step). A base shorter
    than the GPU's own work per step (kernels, and copies and fills not hidden behind them) cannot be
    the step the sample saw: ``base_shorter_than_gpu_work`` flags it, the remainder is negative, and no
    finding reads a host wait from it.
    """

    compute: float
    memcpy: float
    memset: float
    waiting_for_data: float
    waiting_for_host: float  # the remainder: negative where the base is shorter than the rest
    other: float
    step_seconds: float  # the time base: the run's own step (or the sampled step where that is unknown)
    sampled_step_seconds: float  # a step inside the sampled window
    rebased: bool
    base_shorter_than_gpu_work: bool = False
    gpu_work_seconds: float = 0.0  # kernels, communication, copies and fills per step, from the timeline
    communication: float = 0.0  # NCCL / RCCL kernels not hidden behind compute (part of the GPU's work)

    @property
    def idle(self) -> float:
        return self.waiting_for_data + self.waiting_for_host + self.other

    @property
    def host_remainder_seconds(self) -> float:
        """The step's remainder after its other parts, in seconds (signed)."""
        return self.waiting_for_host * self.step_seconds

    @property
    def profiler_slowdown(self) -> Optional[float]:
        """How much longer a sampled step took than the run's own (0.38 = 38 % longer); None if unknown."""
        if not self.rebased or self.step_seconds <= 0:
            return None
        return self.sampled_step_seconds / self.step_seconds - 1.0

    def flag_text(self) -> Optional[str]:
        """Why the sample's shares are not the run's, in words (None when they are)."""
        if not self.base_shorter_than_gpu_work:
            return None
        return (f"the run's step ({self.step_seconds * 1e3:,.2f} ms) is shorter than the GPU's work per step in the "
                f"sample ({self.gpu_work_seconds * 1e3:,.2f} ms): the sample's host wait is a remainder of "
                f"{self.host_remainder_seconds * 1e3:,.2f} ms, not a measurement")


def step_shares(
    sample: ProfileSample,
    step_seconds: Optional[float] = None,
    data_wait_seconds: Optional[float] = None,
) -> Optional[StepShares]:
    """The sample's GPU time per step of the run (see StepShares); None without a GPU timeline.

    ``step_seconds`` / ``data_wait_seconds`` (per step) override the sample's own unprofiled figures, e.g.
    with the run's whole steady state when the run has ended.
    """
    steps = sample.steps
    if sample.kernel_busy_seconds is None or steps <= 0 or sample.window_seconds <= 0:
        return None
    compute = sample.kernel_busy_seconds / steps
    memcpy = (sample.memcpy_seconds or 0.0) / steps
    memset = (sample.memset_seconds or 0.0) / steps
    communication = (sample.communication_seconds or 0.0) / steps
    busy = compute + communication + memcpy + memset
    sampled = sample.window_seconds / steps
    base = step_seconds if step_seconds is not None else sample.unprofiled_step_seconds
    wait = data_wait_seconds if data_wait_seconds is not None else sample.unprofiled_data_wait_seconds
    other = (sample.idle_other_seconds or 0.0) / steps
    flagged = False
    if base is None or base <= 0:
        data = (sample.idle_waiting_for_data_seconds or 0.0) / steps
        host = (sample.idle_waiting_for_host_seconds or 0.0) / steps
        total = max(sampled, busy + data + host + other)
        rebased = False
    else:
        total = base
        flagged = base < busy
        # The GPU waits for data only while it is idle: the host's wait beyond the step's idle time overlapped
        # kernels still queued. No other bound: what the base gets wrong stays in the remainder.
        data = wait if wait is not None else (sample.idle_waiting_for_data_seconds or 0.0) / steps
        data = min(data, max(0.0, base - busy))
        host = base - busy - data - other
        rebased = True
    return StepShares(
        compute=compute / total, memcpy=memcpy / total, memset=memset / total, waiting_for_data=data / total,
        waiting_for_host=host / total, other=other / total, step_seconds=total, sampled_step_seconds=sampled,
        rebased=rebased, base_shorter_than_gpu_work=flagged, gpu_work_seconds=busy,
        communication=communication / total,
    )
