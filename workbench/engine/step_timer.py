"""The device-time span of each training step, read only at log points."""

from __future__ import annotations

import time

import torch


class StepTimer:
    """CUDA events on a GPU (no sync until read), the host clock on a CPU.

    A CUDA-event pair measures a span on the stream, idle gaps included: it is not GPU busy time.
    """

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._pairs: list = []
        self._host_seconds = 0.0
        self._began = 0.0

    def start(self) -> None:
        if self.cuda:
            begin = torch.cuda.Event(enable_timing=True)
            begin.record()
            self._pairs.append((begin, None))
        else:
            self._began = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._pairs[-1] = (self._pairs[-1][0], end)
        else:
            self._host_seconds += time.perf_counter() - self._began

    def read_seconds(self) -> float:
        """Total since the last read; call after synchronising."""
        if self.cuda:
            seconds = sum(begin.elapsed_time(end) for begin, end in self._pairs) / 1000.0
            self._pairs.clear()
            return seconds
        seconds, self._host_seconds = self._host_seconds, 0.0
        return seconds
