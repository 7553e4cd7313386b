"""A plain verdict on what bounds a run, from its data-wait and device-busy fractions.

Data wait is host time blocked on the next batch; device busy is the device time of the
steps (CUDA events) over wall time. Together they separate the three usual stories.
"""

from __future__ import annotations

from typing import Optional

INPUT_BOUND_WAIT = 0.15  # waiting for data this much of the time is worth fixing first
HOST_BOUND_BUSY = 0.70  # a GPU busy less than this with data ready is starved by Python/launches


def bottleneck_verdict(
    data_wait_fraction: Optional[float], device_busy_fraction: Optional[float], device: Optional[str]
) -> Optional[str]:
    if data_wait_fraction is None or device_busy_fraction is None:
        return None
    wait, busy = data_wait_fraction, device_busy_fraction
    if wait >= INPUT_BOUND_WAIT:
        return (
            f"Input-bound: training waited for the next batch {wait:.0%} of the time. "
            "Try augment=gpu, more num_workers, or pipeline=gpu-resident."
        )
    if device == "cuda" and busy < HOST_BOUND_BUSY:
        return (
            f"Host-bound: data was ready, yet the GPU was busy only {busy:.0%} of the time "
            "(Python and kernel-launch overhead per step). Try a larger batch_size, channels_last or compile."
        )
    where = "GPU" if device == "cuda" else "CPU"
    return (
        f"Compute-bound: the {where} was busy {busy:.0%} of the time and data waits were {wait:.0%}. "
        + ("Only faster math helps: fp16/bf16, channels_last, compile, or a smaller model."
           if device == "cuda" else "A CUDA GPU, or a smaller model, is what would help.")
    )
