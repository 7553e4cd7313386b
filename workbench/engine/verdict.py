"""A plain verdict on what bounds a run, from its data-wait and device-span fractions.

Data wait is host time blocked on the next batch; the device span is the CUDA-event span of the
steps over wall time. A span includes idle gaps between kernels, so a launch-bound GPU can still
show a span near 100 %: only the profiler's kernel timeline tells busy from idle.
"""

from __future__ import annotations

from typing import Optional

INPUT_BOUND_WAIT = 0.15  # waiting for data this much of the time is worth fixing first
HOST_BOUND_SPAN = 0.70  # steps spanning less than this of wall time with data ready: the host is the limit


def bottleneck_verdict(
    data_wait_fraction: Optional[float], device_span_fraction: Optional[float], device: Optional[str]
) -> Optional[str]:
    if data_wait_fraction is None or device_span_fraction is None:
        return None
    wait, span = data_wait_fraction, device_span_fraction
    if wait >= INPUT_BOUND_WAIT:
        return (
            f"Input-bound: training waited for the next batch {wait:.0%} of the time. "
            "Try augment=gpu, more num_workers, or pipeline=gpu-resident."
        )
    if device == "cuda" and span < HOST_BOUND_SPAN:
        return (
            f"Host-bound: data was ready, yet the steps spanned only {span:.0%} of the time on the GPU "
            "(Python and kernel-launch overhead per step). Try a larger batch_size, channels_last or compile."
        )
    where = "GPU" if device == "cuda" else "CPU"
    return (
        f"Compute-bound: the steps spanned {span:.0%} of the time on the {where} and data waits were {wait:.0%}. "
        + ("Only faster math helps: fp16/bf16, channels_last, compile, or a smaller model."
           if device == "cuda" else "A CUDA GPU, or a smaller model, is what would help.")
    )
