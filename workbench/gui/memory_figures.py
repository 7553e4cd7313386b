"""What the memory plot shows and says, by where the run trains (no Qt).

On a GPU: torch reserved, torch allocated and NVML used, the last device-wide. On a CPU: the
training process's resident memory. Colour is the run's (as on every plot); the line style says
which figure it is, and the caption below the plot says so in words.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional

from workbench.formatting import format_bytes


@dataclass(frozen=True)
class MemoryFigure:
    key: str  # the series key (a StepStats memory field and a history step column)
    name: str  # what the caption calls it
    line: str  # "solid", "dash" or "dot"
    glyph: str  # the line style drawn in text, for the caption


GPU_FIGURES = (
    MemoryFigure("torch_reserved", "torch reserved", "solid", "━━"),
    MemoryFigure("torch_allocated", "torch allocated", "dash", "╍╍"),
    MemoryFigure("nvml_device_used", "NVML used (device-wide: all processes)", "dot", "┈┈"),
)
CPU_FIGURES = (MemoryFigure("process_rss", "resident memory (RSS) of this process", "solid", "━━"),)
ALL_FIGURES = GPU_FIGURES + CPU_FIGURES
TOOLTIPS = {
    "gpu": "torch reserved: what PyTorch's caching allocator holds (torch.cuda.memory_reserved).\n"
           "torch allocated: what live tensors use (torch.cuda.memory_allocated).\n"
           "NVML used: the whole device as the driver sees it: every process, and the CUDA context.",
    "cpu": "Resident set size of the process that trains (from /proc/self/statm, at each log point): "
           "host memory in RAM. DataLoader worker processes are not included.",
}
BEFORE_A_RUN = ("Memory appears here during a run: the GPU's figures on a CUDA GPU, this process's resident "
                "memory on a CPU.")


def figures(mode: str) -> tuple[MemoryFigure, ...]:
    return GPU_FIGURES if mode == "gpu" else CPU_FIGURES


def caption_html(mode: str, cpu_note: str = "", unavailable_reason: Optional[str] = None, ranks: int = 0) -> str:
    """The key to the lines, then (on a CPU) why a figure is missing and the note the window gives.
    ``ranks`` > 1: a multi-process run, whose merged lines are the highest rank's and each rank draws its own."""
    text = " &nbsp; ".join(f"<b>{figure.glyph}</b>&nbsp;{html.escape(figure.name)}" for figure in figures(mode))
    if ranks > 1:
        figure = "torch reserved" if mode == "gpu" else "resident memory"
        text += (f"<br>{ranks} processes: these lines are the highest rank's; the thin lines, one per "
                 f"{'GPU' if mode == 'gpu' else 'process'} (named at their end), are each rank's own {figure}.")
    if mode == "cpu":
        if unavailable_reason:
            text += f"<br>Not measured here: {html.escape(unavailable_reason)}."
        if cpu_note:
            text += f"<br>{cpu_note}"
    return text


def title(mode: str, peak: Optional[float], total: Optional[int]) -> str:
    if mode == "gpu":
        if peak is not None and total:
            return f"Device memory · peak {format_bytes(peak)} of {format_bytes(total)} ({peak / total:.0%})"
        return "Device memory"
    return "Process memory (RSS)" + (f" · peak {format_bytes(peak)}" if peak is not None else "")

