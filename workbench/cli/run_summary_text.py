"""The run's summary as the aligned text `workbench run` prints at its end."""

from __future__ import annotations

from typing import Optional

from workbench.cli import timeline_report
from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.engine.run_summary import RunSummary
from workbench.formatting import format_bytes, format_duration, printable


def print_summary(ended: RunEnded, config: Optional[RunConfig] = None) -> None:
    s = ended.summary
    rows = [
        ("status", s.status + (f" ({s.reason})" if s.reason else "")),
        ("device", f"{s.device_name} [{s.device_type}]" if s.device_type else "n/a"),
        ("test accuracy", f"{s.test_accuracy:.1%}" if s.test_accuracy is not None else "n/a"),
        ("final loss", f"{s.final_loss:.4f}" if s.final_loss is not None else "n/a"),
        ("img/s", images_per_sec_text(s)),
        ("data wait", f"{s.data_wait_fraction:.1%} of training time" if s.data_wait_fraction is not None
         else "n/a" if s.no_steady_state_reason is None else "n/a (no steady window)"),
        ("peak memory", peak_memory_text(s)),
        *_rank_rows(s),
        ("wall time", format_duration(s.wall_seconds)),
        *timeline_report.summary_rows(s, config),
        ("verdict", s.verdict or ("n/a" if s.no_steady_state_reason is None else "n/a (no steady window)")),
    ]
    if s.skipped_optimizer_steps:
        rows.insert(4, ("skipped steps", f"{s.skipped_optimizer_steps:,} fp16 optimizer steps (inf/NaN gradients)"))
    if s.skipped_bad_images:
        rows.insert(1, ("skipped images", f"{s.skipped_bad_images:,} unreadable (--skip-bad-images)"))
    if s.compile_seconds is not None:
        graphs = f"; CUDA graphs: {s.cuda_graphs}" if s.cuda_graphs is not None else ""
        rows.insert(5, ("compile", f"{s.compile_seconds:,.1f} s, the first step (left out of img/s){graphs}"))
    for label, value in rows:
        print(f"{label:>14}  {printable(value)}")  # a reason may quote a path or a model's error
    lines = timeline_report.finding_lines(s)
    if lines:
        print(f"{'findings':>14}")
        for line in lines:
            print(f"{'':>14}  {line}")


def images_per_sec_text(s: RunSummary) -> str:
    """"1,234 over the steady windows (within this run 1,200–1,260, 90 %; the next run may differ by more)"."""
    if s.images_per_sec is None:
        return "n/a" if s.no_steady_state_reason is None else f"n/a: {s.no_steady_state_reason}"
    if s.images_per_sec_low is not None and s.images_per_sec_high is not None:
        spread = (f"within this run {s.images_per_sec_low:,.0f}–{s.images_per_sec_high:,.0f} (90 % of its windows' "
                  "spread); the next run may differ by more")
    else:
        spread = "no interval: fewer than 3 steady windows"
    return f"{s.images_per_sec:,.0f} over the steady windows ({spread})"


def peak_memory_text(s: RunSummary) -> str:
    """The torch and NVML peaks on a GPU; on a CPU, where they do not exist, the process's resident memory."""
    rss = f"process RSS {format_bytes(s.peak_process_rss_bytes)}"
    if s.peak_allocated_bytes is None and s.peak_reserved_bytes is None and s.peak_nvml_device_used_bytes is None:
        if s.peak_process_rss_bytes is None:
            return "n/a"
        return f"{rss} (the training process's resident memory; the torch and NVML figures need a CUDA GPU)"
    return (f"torch allocated {format_bytes(s.peak_allocated_bytes)}, reserved {format_bytes(s.peak_reserved_bytes)}; "
            f"NVML used {format_bytes(s.peak_nvml_device_used_bytes)} device-wide, "
            f"{format_bytes(s.peak_nvml_process_used_bytes)} this process; {rss}")


def _rank_rows(s: RunSummary) -> list[tuple[str, str]]:
    if s.world_size == 1:
        return []
    rows = [("processes", f"{s.world_size}: img/s above is all of them together; data wait and peak memory "
                          "are the highest rank's")]
    for rank, (allocated, reserved) in enumerate(zip(s.rank_peak_allocated_bytes, s.rank_peak_reserved_bytes)):
        if allocated is not None or reserved is not None:
            rows.append((f"rank {rank} peak", f"allocated {format_bytes(allocated)}, reserved {format_bytes(reserved)}"))
    return rows
