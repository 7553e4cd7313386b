"""Truth against HTA on real GPU traces (../shared/traces, HTA 0.5.0's committed figures in hta-0.5.0.json).

Our gpu_span counts all device work in HTA's window, at the trace's ns. HTA's differs by exactly two rules
(docs/gpu-time.md): it drops device work launched outside the steps, and rounds fractional-µs timestamps
inward. The tests show that: HTA's rules replayed on our events give HTA's figures to its own rounding (0.01
point), and our figure is that replay with both rules off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.trace_analysis import hta_rules, read_report, reading

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
FIGURES = TRACES / "hta-0.5.0.json"
LARGE = {"a100-training.json.gz", "v100-training.json.gz"}  # seconds each to read on a loaded 2-core machine
HTA_ROUNDING = 0.006  # HTA prints percentages to 2 decimals


def cases():
    if not FIGURES.is_file():
        return [pytest.param("absent", marks=pytest.mark.skip(reason=f"no {FIGURES}"))]
    return [pytest.param(name, marks=[pytest.mark.slow] if name in LARGE else [])
            for name in json.loads(FIGURES.read_text())]


def percent(span):
    return {key.removesuffix("_share"): 100 * value for key, value in span.items()}


def close(ours, hta, tolerance):
    return all(abs(ours[key] - hta[key]) <= tolerance for key in ("idle", "compute", "non_compute"))


# The traces come with the project's shared folder (beside a checkout and CI's clone); without it these skip.
needs_traces = pytest.mark.skipif(not FIGURES.is_file(), reason=f"no {FIGURES}")


@pytest.fixture(scope="module")
def figures():
    return json.loads(FIGURES.read_text())


@pytest.fixture(scope="module")
def reports():
    """read_report of each trace, read once for the module: two tests check the same report (the large traces take
    seconds each to read on a loaded 2-core machine)."""
    read: dict[str, object] = {}

    def report_of(name: str):
        if name not in read:
            read[name] = read_report(TRACES / name)
        return read[name]

    return report_of


@pytest.mark.parametrize("name", cases())
def test_gpu_span_differs_from_hta_by_exactly_its_two_rules(name, figures):
    expected = figures[name]
    (events,) = reading.read_trace(TRACES / name).ranks(0)
    args = (events.device_work, events.gpu_markers, events.launches_and_steps, events.fractional_timestamps)
    assert events.device_index == expected["device_index"]
    assert close(percent(hta_rules.hta_gpu_span(*args)), expected["hta_temporal_pct"], HTA_ROUNDING)
    assert close(percent(hta_rules.hta_gpu_span(*args, round_us=False)),
                 expected["hta_temporal_pct_without_us_rounding"], HTA_ROUNDING)
    ours = hta_rules.gpu_span(events.device_work, events.gpu_markers)
    assert ours == hta_rules.hta_gpu_span(*args, drop_unlaunched=False, round_us=False)
    # Where neither rule applies, ours is HTA's to the last printed digit; elsewhere it is the rules' whole effect.
    if hta_rules.launched_before_last_step(events.device_work, events.launches_and_steps) is None and \
            not events.fractional_timestamps:
        assert close(percent(ours), expected["hta_temporal_pct"], HTA_ROUNDING)


@pytest.mark.parametrize("name", cases())
def test_each_real_trace_reads_with_its_gpu_and_steps(name, figures, reports):
    expected = figures[name]
    (rank,) = reports(name).ranks
    assert rank.steps == expected["profiler_steps_in_file"]
    assert rank.kernels > 0 and not rank.cpu_only
    assert rank.device == (expected["gpu"][0] if expected["gpu"] else f"cuda:{expected['device_index']}")
    assert rank.rank == expected["rank"]
    assert close(percent(rank.gpu_span_as_hta), expected["hta_temporal_pct"], HTA_ROUNDING)
    shares = (rank.compute_share, rank.communication_share, rank.memory_share, rank.idle_share)
    assert sum(shares) == pytest.approx(1) and all(share >= 0 for share in shares)
    idle = (rank.idle_for_data_share, rank.idle_for_host_share, rank.idle_kernel_wait_share, rank.idle_other_share)
    assert sum(idle) == pytest.approx(1)


@needs_traces
def test_the_folder_of_two_ranks_reads_both_with_their_own_gpus(figures):
    report = read_report(TRACES / "two-ranks")
    assert [(r.rank, r.device_index) for r in report.ranks] == [(0, 0), (1, 1)]
    for rank in report.ranks:
        expected = figures[f"two-ranks/rank-{rank.rank}.json.gz"]["hta_temporal_pct"]
        assert close(percent(rank.gpu_span_as_hta), expected, HTA_ROUNDING)


@needs_traces
def test_nccl_kernels_are_kept_apart_as_hta_keeps_them():
    (rank,) = read_report(TRACES / "a100-nccl.json.gz").ranks
    assert rank.communication_share > 0.03  # ncclKernel_AllReduce / Broadcast: not compute


@pytest.mark.parametrize("name", cases())
def test_htas_per_stream_idle_split_is_replayed_to_its_last_digit(name, figures, reports):
    """HTA's idle split: each stream's gaps, host wait where the next launch began after the previous ended,
    kernel wait under 30 µs (its consecutive_kernel_delay=30 is documented as ns, but its clock is µs)."""
    (rank,) = reports(name).ranks
    expected = figures[name]["hta_idle_split_of_idle"]
    for key in ("host_wait", "kernel_wait", "other"):
        assert rank.per_stream_idle_split[key] == pytest.approx(expected[key], abs=0.00006), key


@pytest.mark.parametrize("name", cases())
def test_htas_per_stream_idle_split_from_the_events_alone_is_the_same(name, figures):
    """The replay as the benchmark calls it, reading the launches from the host's events itself (the report hands
    it the launches the analysis already mapped)."""
    (events,) = reading.read_trace(TRACES / name).ranks(0)
    split = hta_rules.hta_idle_split(events.device_work, events.launches_and_steps, events.fractional_timestamps)
    expected = figures[name]["hta_idle_split_of_idle"]
    for key in ("host_wait", "kernel_wait", "other"):
        assert split[key] == pytest.approx(expected[key], abs=0.00006), key
