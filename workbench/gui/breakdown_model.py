"""What the breakdown view shows about profiler samples and findings, worked out without Qt."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from workbench.engine.events import ProfileSample
from workbench.engine.run_summary import Finding
from workbench.engine.step_shares import step_shares

# The stacked bar's parts, bottom to top: what the GPU did, then what its idle time waited for.
SEGMENTS: tuple[tuple[str, str, str], ...] = (  # key, label, colour
    ("compute", "compute (kernels)", "#2ca02c"),
    ("communication", "communication (NCCL)", "#8c564b"),
    ("memcpy", "memcpy / memset", "#1f77b4"),
    ("data", "waiting for data", "#ff7f0e"),
    ("host", "waiting for host", "#d62728"),
    ("other", "other idle", "#9e9e9e"),
)


@dataclass(frozen=True)
class Segment:
    key: str
    label: str
    colour: str
    fraction: float


def segments(sample: ProfileSample) -> Optional[list[Segment]]:
    """The sample's shares of a step of the run as it runs unprofiled, adding up to 1 (None without a GPU
    timeline); see workbench.engine.step_shares."""
    shares = step_shares(sample)
    if shares is None:
        return None
    fractions = {
        "compute": shares.compute,
        "communication": shares.communication,
        "memcpy": shares.memcpy + shares.memset,
        "data": shares.waiting_for_data,
        # A bar has no negative part: a negative remainder draws as none, and the line under the bars says it.
        "host": max(0.0, shares.waiting_for_host),
        "other": shares.other,
    }
    return [Segment(key, label, colour, fractions[key]) for key, label, colour in SEGMENTS]


def sample_label(sample: ProfileSample) -> str:
    return f"steps {sample.first_step}–{sample.last_step}"


def sample_summary(sample: ProfileSample) -> str:
    """One line under the bars about the chosen sample."""
    if sample.steps == 0:
        return f"No sample: {sample.gpu_unavailable_reason}"
    parts = segments(sample)
    if parts is None:
        wait = sample.fraction(sample.host_data_wait_seconds) or 0.0
        return (f"No GPU timeline ({sample.gpu_unavailable_reason}). Host: waiting for data {wait:.0%} of "
                f"{sample.steps} steps, {sample.images_per_sec:,.0f} images/s while sampled.")
    text = " · ".join(f"{part.label} {part.fraction:.0%}" for part in parts)
    facts = [f"{sample.kernels_per_step:,.0f} kernels/step"]
    if sample.median_kernel_seconds is not None:
        facts.append(f"median kernel {sample.median_kernel_seconds * 1e6:,.1f} µs")
    if sample.launches_per_step is not None:
        facts.append(f"{sample.launches_per_step:,.0f} launches/step")
    facts.append(f"{sample.steps} steps")
    shares = step_shares(sample)
    if shares is not None and shares.rebased:
        facts.append(f"per step of {shares.step_seconds * 1e3:,.2f} ms as the run goes unprofiled "
                     f"({shares.sampled_step_seconds * 1e3:,.2f} ms while sampled)")
    else:
        facts.append(f"over the sampled {sample.window_seconds * 1e3:,.1f} ms (the run's own step time was not "
                     "known yet, so the profiler's cost reads as waiting for the host)")
    note = " · host ops were recorded too, so host waits read high" if sample.timeline_host_ops_recorded else ""
    if shares is not None and shares.waiting_for_host < 0:
        note += "\n" + (f"Flagged: {shares.flag_text()}." if shares.base_shorter_than_gpu_work else
                        f"The host's remainder is negative ({shares.host_remainder_seconds * 1e3:,.2f} ms a step): "
                        "the run's step time is shorter than the parts the timeline measured.")
    return f"{text}\n{', '.join(facts)}{note}"


def short_kernel_name(name: str) -> str:
    """A CUDA kernel's readable part: no return type, template arguments or parameter list."""
    text = name.removeprefix("void ").replace("(anonymous namespace)::", "").strip()
    depth, out = 0, []
    for char in text:
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(0, depth - 1)
        elif char == "(" and depth == 0:
            break
        elif depth == 0:
            out.append(char)
    short = re.sub(r"\s+", " ", "".join(out)).strip()
    return short or name


def grouped(findings: Sequence[Finding]) -> list[tuple[str, list[tuple[str, Finding]]]]:
    """Findings under their problem's headline, each with its remedy sentence: one headline, many Apply rows."""
    groups: list[tuple[str, list[tuple[str, Finding]]]] = []
    for finding in findings:
        remedy = finding.text[len(finding.headline):].strip() if finding.text.startswith(finding.headline) else finding.text
        if groups and groups[-1][0] == finding.headline:
            groups[-1][1].append((remedy, finding))
        else:
            groups.append((finding.headline, [(remedy, finding)]))
    return groups


def apply_label(finding: Finding) -> Optional[str]:
    """The Apply button's text, or None when no setting helps."""
    if finding.field is None:
        return None
    return f"Apply {finding.field}={_value(finding.value)}"


def verify_tooltip(finding: Finding) -> str:
    """What the Verify button does, and what was measured already."""
    measured = f" Measured here before: {finding.measured.describe()}." if finding.measured is not None else ""
    return (f"Measure {finding.field}={_value(finding.value)} against this run's settings: short runs of each, "
            f"interleaved (3 + 3), compared by their steady images/sec. Stop ends it.{measured}")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
