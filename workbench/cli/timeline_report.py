"""How the CLI shows the profiler-sampled timeline, the ceiling and the findings (text and --json)."""

from __future__ import annotations

from typing import Any, Optional

from workbench.config import RunConfig
from workbench.engine.events import ProfileSample
from workbench.engine.run_summary import NamedTime, RunSummary, figure_fields
from workbench.engine.step_shares import step_shares
from workbench.formatting import efficiency_text
from workbench.telemetry_text import summary_text

# The --json `profile` object's GPU figures: RunSummary's timeline figures (None on a CPU, with gpu_unavailable_reason).
GPU_FIELDS = tuple(item.name for item in figure_fields() if item.metadata["timeline"])
# Every RunSummary field the `profile` object holds, and its key there.
PROFILE_KEYS: dict[str, str] = {
    "profile_samples": "samples", "top_ops": "top_ops", "top_kernels": "top_kernels", "trace_paths": "trace_paths",
    "gpu_timeline_unavailable_reason": "gpu_unavailable_reason", **{name: name for name in GPU_FIELDS},
}
SHOWN_OPS = 5


def profile_json(summary: RunSummary, config: Optional[RunConfig]) -> Optional[dict[str, Any]]:
    """The --json `profile` object: None when the run was not profiled and took no sample."""
    if summary.profile_samples == 0 and not (config is not None and config.profile):
        return None
    data: dict[str, Any] = {
        "samples": summary.profile_samples,
        "top_ops": [{"name": op.name, "host_seconds": op.seconds, "calls": op.count} for op in summary.top_ops],
    }
    data.update({name: getattr(summary, name) for name in GPU_FIELDS})
    data["top_kernels"] = [
        {"name": kernel.name, "gpu_seconds": kernel.seconds, "calls": kernel.count} for kernel in summary.top_kernels
    ]
    data["trace_path"] = summary.trace_paths[-1] if summary.trace_paths else None
    data["trace_paths"] = list(summary.trace_paths)
    data["gpu_unavailable_reason"] = summary.gpu_timeline_unavailable_reason
    return data


def findings_json(summary: RunSummary) -> list[dict[str, Any]]:
    return [finding.to_dict() for finding in summary.findings]


def sample_line(sample: ProfileSample) -> str:
    """One line per sample as it arrives."""
    head = f"profile sample, steps {sample.first_step}-{sample.last_step}"
    if sample.steps == 0:
        return f"{head}: none ({sample.gpu_unavailable_reason})"
    shares = step_shares(sample)
    if shares is not None:
        parts = [
            f"kernels {shares.compute:.0%}",
            *([f"communication {shares.communication:.0%}"] if sample.communication_seconds else []),
            f"memcpy {shares.memcpy + shares.memset:.0%}",
            f"idle: data {shares.waiting_for_data:.0%}, host {shares.waiting_for_host:.0%}, other {shares.other:.0%}",
            f"{sample.kernels_per_step:,.0f} kernels/step"
            + (f" (median {sample.median_kernel_seconds * 1e6:,.1f} µs)" if sample.median_kernel_seconds else ""),
            (f"per {shares.step_seconds * 1e3:,.2f} ms step ({shares.sampled_step_seconds * 1e3:,.2f} ms sampled)"
             if shares.rebased else f"over the sampled {sample.window_seconds * 1e3:,.1f} ms"),
        ]
        if shares.base_shorter_than_gpu_work:
            parts.append(f"flagged: {shares.flag_text()}")
    else:
        parts = [f"data wait {sample.fraction(sample.host_data_wait_seconds):.0%}"]
        if sample.top_ops:
            parts.append(f"top op {_op(sample.top_ops[0])}")
    trace = sample.trace_path or sample.trace_unavailable_reason or "no trace"
    return f"{head}: " + " · ".join(parts) + f" · trace {trace}"


def summary_rows(summary: RunSummary, config: Optional[RunConfig]) -> list[tuple[str, str]]:
    """Rows for the run summary: the GPU timeline, the top ops and the ceiling."""
    rows: list[tuple[str, str]] = []
    if summary.kernel_busy_fraction is not None:
        rows.append(("GPU timeline", (
            f"kernels {summary.kernel_busy_fraction:.0%}, "
            + (f"communication {summary.communication_fraction:.0%}, " if summary.communication_fraction else "")
            + f"memcpy {summary.memcpy_fraction:.0%}, idle waiting for "
            f"data {summary.idle_waiting_for_data_fraction:.0%}, for the host {summary.idle_waiting_for_host_fraction:.0%}, "
            f"other {summary.idle_other_fraction:.0%} ({summary.profile_samples} sample"
            f"{'s' if summary.profile_samples != 1 else ''})"
        )))
        def per_step(value: Optional[float]) -> str:
            return f"{value:,.0f}" if value is not None else "n/a"

        median = (f"{summary.median_kernel_seconds * 1e6:,.1f} µs" if summary.median_kernel_seconds is not None
                  else "n/a")
        rows.append(("kernels", f"{per_step(summary.kernels_per_step)} per step, median {median}, "
                     f"{per_step(summary.launches_per_step)} launches per step"))
        if summary.timeline_flag is not None:
            rows.append(("timeline flag", summary.timeline_flag))
    elif summary.profile_samples or (config is not None and config.profile):
        rows.append(("GPU timeline", f"n/a ({summary.gpu_timeline_unavailable_reason})"))
    telemetry = summary_text(summary)
    if telemetry is not None:
        rows.append(("GPU telemetry", telemetry))
    if summary.top_ops:
        rows.append(("top host ops by self time", ", ".join(_op(op) for op in summary.top_ops[:SHOWN_OPS])))
    if summary.trace_paths:
        rows.append(("trace", summary.trace_paths[-1]))
    if summary.ceiling_images_per_sec is not None:
        rows.append(("ceiling", f"{summary.ceiling_images_per_sec:,.0f} images/s (model alone, on-device batches)"))
    if summary.pipeline_efficiency is not None:
        rows.append(("efficiency", efficiency_text(summary.pipeline_efficiency)))
    return rows


def finding_lines(summary: RunSummary) -> list[str]:
    """The findings, numbered, each with the setting to change."""
    return [f"{number}. {finding.text}" for number, finding in enumerate(summary.findings, start=1)]


def _op(op: NamedTime) -> str:
    return f"{op.name} {op.seconds * 1e3:,.1f} ms"
