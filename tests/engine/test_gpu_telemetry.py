"""On a CUDA GPU: NVML's telemetry is read at every log window (GPM on Hopper and newer), or None with the reason."""

import pytest
import torch
from engine_helpers import run_to_end, tiny_config

from workbench.engine.events import StepStats

pytestmark = pytest.mark.gpu


def test_each_window_carries_power_clock_and_on_hopper_gpm():
    events = run_to_end(tiny_config(device="cuda", model="resnet18", synthetic_size=4096, batch_size=256,
                                    pipeline="gpu-resident", max_steps=120, log_every=10, evaluate=False))
    ended = events[-1]
    assert ended.status == "finished", ended.reason
    steady = [event.telemetry for event in events if isinstance(event, StepStats)][1:]
    for telemetry in steady:
        assert (telemetry.power_watts is None) == (telemetry.power_unavailable_reason is not None)
        assert telemetry.sm_clock_mhz is not None and telemetry.sm_clock_mhz > 0, telemetry.sm_clock_unavailable_reason
        assert telemetry.clock_event_reasons is not None, telemetry.clock_events_unavailable_reason
    hopper = torch.cuda.get_device_capability()[0] >= 9
    summary = ended.summary
    if hopper:  # GPM over intervals of at least GPM_MIN_SECONDS: a window shorter than that says so
        read = [t for t in steady if t.sm_activity is not None]
        assert read, steady[-1].gpm_unavailable_reason
        assert all(0 < t.sm_activity <= 1 and 0 <= t.tensor_activity <= 1 for t in read)
        assert all(t.gpm_unavailable_reason.startswith("GPM measures over at least") for t in steady if t not in read)
        assert summary.sm_activity_fraction is not None and summary.gpm_unavailable_reason is None
    else:
        assert summary.sm_activity_fraction is None and summary.gpm_unavailable_reason
    assert 0 < summary.nvml_kernel_time_fraction <= 1 and summary.sm_clock_mhz > 0
