"""What the finding rules read about one run (``RunFacts``: its settings, its figures, its device and data), and
what follows from it for memory: the bytes each sample takes and the batch that would fit.

Pure Python (no torch): the history reads it too.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from workbench.config import RANGES, RunConfig
from workbench.engine.run_summary import RunSummary

# Above this the ceiling measured slower than the run itself (stale, or timed before it settled): the
# share is no figure, and no rule reads it.
CEILING_STALE_ABOVE = 1.0
# Plan with this share of the device's memory: fragmentation and cuDNN workspaces need the rest.
USABLE_MEMORY_FRACTION = 0.85


@dataclass(frozen=True)
class RunFacts:
    """What the rules read about one run: its settings, its measured figures (its RunSummary, every figure
    the run has: a rule reads any of them), and facts of its device and data."""

    config: RunConfig
    summary: RunSummary
    device_type: Optional[str]
    training_peak_allocated_bytes: Optional[int] = None  # torch's peak before the first evaluation
    total_memory_bytes: Optional[int] = None
    bf16_supported: bool = False
    cuda_available: bool = False
    cpu_count: int = 1
    parameter_count: Optional[int] = None
    train_size: Optional[int] = None
    test_size: Optional[int] = None

    @classmethod
    def of(cls, summary: RunSummary, config: RunConfig, device: Any, run_info: Any = None,
           training_peak_allocated_bytes: Optional[int] = None) -> RunFacts:
        """From a run's summary, a DeviceInfo or its dict, and a RunStarted or the history's run-info dict."""
        device_facts = facts_mapping(device)
        info = facts_mapping(run_info)
        return cls(
            config=config,
            summary=summary,
            device_type=device_facts.get("type") or summary.device_type,
            training_peak_allocated_bytes=training_peak_allocated_bytes,
            total_memory_bytes=device_facts.get("total_memory_bytes"),
            bf16_supported=bool(device_facts.get("bf16_supported")),
            cuda_available=bool(device_facts.get("cuda_available")),
            cpu_count=int(device_facts.get("cpu_count") or 1),
            parameter_count=info.get("parameter_count"),
            train_size=info.get("train_size"),
            test_size=info.get("test_size"),
        )

    @property
    def efficiency(self) -> Optional[float]:
        """The pipeline efficiency the rules read: None where the ceiling is stale (the run beat it)."""
        efficiency = self.summary.pipeline_efficiency
        return None if efficiency is None or efficiency > CEILING_STALE_ABOVE else efficiency

    @property
    def has_timeline(self) -> bool:
        return self.summary.kernel_busy_fraction is not None

    @property
    def timeline_missing_though_profiled(self) -> Optional[str]:
        """Why a run that had profile=true has no timeline (asking for profile=true again would not help)."""
        if self.has_timeline or not self.config.profile:
            return None
        return (f"it ran with profile=true, but has no GPU timeline: "
                f"{self.summary.gpu_timeline_unavailable_reason or 'no sample was recorded'}")


def fixed_bytes(facts: RunFacts) -> Optional[int]:
    """Memory a run holds whatever its batch: weights, gradients and optimizer state (fp32), the
    test split on the device (a folder's streams through the loader: not held), and the training set when it
    is resident there."""
    if facts.parameter_count is None:
        return None
    states = 2 if facts.config.optimizer == "adamw" else 1
    fixed = facts.parameter_count * 4 * (2 + states)
    if facts.config.dataset != "folder":
        fixed += (facts.test_size or 0) * bytes_per_image(facts)
    if facts.config.pipeline == "gpu-resident":
        fixed += (facts.train_size or 0) * bytes_per_image(facts)
    return fixed


def bytes_per_image(facts: RunFacts) -> int:
    """One uint8 CHW image as the data sits on the device: at the run's image size for a folder or synthetic data
    (made at it), at 32×32 for CIFAR and .npz arrays (scaled on the device, batch by batch)."""
    side = facts.config.image_size if facts.config.dataset in ("folder", "synthetic") else 32
    return 3 * side**2


def per_sample_bytes(facts: RunFacts) -> Optional[float]:
    fixed = fixed_bytes(facts)
    peak = facts.training_peak_allocated_bytes
    if fixed is None or peak is None or peak <= fixed:
        return None
    return (peak - fixed) / facts.config.batch_size


def max_batch_estimate(facts: RunFacts) -> Optional[int]:
    """About how large the batch could grow at the measured bytes per sample (None where unknown)."""
    per_sample = per_sample_bytes(facts)
    if facts.device_type != "cuda" or per_sample is None or not facts.total_memory_bytes:
        return None
    room = facts.total_memory_bytes * USABLE_MEMORY_FRACTION - (fixed_bytes(facts) or 0)
    return max(0, int(room // per_sample))


def larger_batch(facts: RunFacts, wanted: int, as_large_as_fits: bool = False) -> Optional[int]:
    """A power-of-two batch: the largest that fits (as_large_as_fits), else ``wanted`` if it fits."""
    limit = int(RANGES["batch_size"][1])
    estimate = max_batch_estimate(facts)
    if as_large_as_fits:
        if estimate is None:
            return None
        value = 2 ** int(math.log2(max(1, min(estimate, limit))))
        return value if value >= wanted else None
    if wanted > limit or (estimate is not None and wanted > estimate):
        return None
    return wanted


def dataset_fits(facts: RunFacts) -> bool:
    """The training set would take at most a quarter of the device's memory (unknown sizes: assume so)."""
    if facts.device_type != "cuda" or not facts.total_memory_bytes or facts.train_size is None:
        return True
    return facts.train_size * bytes_per_image(facts) <= facts.total_memory_bytes / 4


def facts_mapping(value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    return {}
