"""A trace file that holds its events twice (two copies of an event list joined into one) reads as the file that
holds them once, with a note saying how many copies were left out."""

from __future__ import annotations

import dataclasses

from trace_builders import input_bound_steps, kernel, launched, op, runtime, step, trace, write
from workbench.trace_analysis import read_report
from workbench.trace_analysis.duplicates import COPIES


def _events():
    """Three input-bound steps, a copy and a sync each, ops nested on the host, a second stream."""
    events = input_bound_steps()
    for index in range(3):
        begin = index * 10000
        events += [op("aten::to", begin + 6100, 400), op("aten::copy_", begin + 6110, 380),
                   runtime("cudaMemcpyAsync", begin + 6120, 30, 100 + index),
                   kernel("Memcpy HtoD (Pinned -> Device)", begin + 6200, 150, 100 + index, stream=9,
                          cat="gpu_memcpy"),
                   op("aten::item", begin + 9000, 900),
                   runtime("cudaStreamSynchronize", begin + 9010, 880, 200 + index)]
    return events


def _only_rank(path):
    (rank,) = read_report(path).ranks
    return rank


def _without_notes_and_file(rank):
    return dataclasses.replace(rank, notes=(), file=None)


def test_a_file_holding_its_events_twice_reads_as_the_file_holding_them_once(tmp_path):
    once = _only_rank(write(tmp_path / "once.json", trace(_events())))
    twice = _only_rank(write(tmp_path / "twice.json", trace(_events() + _events())))
    assert twice.kernels == once.kernels == 3 and twice.launches == once.launches
    assert [(k.name, k.count) for k in twice.top_kernels] == [(k.name, k.count) for k in once.top_kernels]
    assert [(o.name, o.count) for o in twice.top_host_ops] == [(o.name, o.count) for o in once.top_host_ops]
    assert [(s.name, s.count) for s in twice.sync_calls] == [("aten::item → cudaStreamSynchronize", 3)]
    # every figure, the copies' and the steps' too
    assert _without_notes_and_file(twice) == _without_notes_and_file(once)
    assert [note for note in twice.notes if note not in once.notes] == [
        f"{len(_events())} {COPIES}: left out, each event counted once"]


def test_device_events_written_twice_are_counted_once_and_the_hosts_equal_ops_both_kept(tmp_path):
    """Kernels held twice, the host once: the host's two zero-length aten::to at one µs (two calls, as a real
    trace holds them: they differ only in an External id the reader does not read) stay two."""
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1), *launched("m", 20, 600, 100, 2),
              op("aten::to", 700, 0), op("aten::to", 700, 0)]
    kernels = [event for event in events if event["cat"] == "kernel"]
    rank = _only_rank(write(tmp_path / "t.json", trace(events + kernels)))
    assert rank.kernels == 2 and {k.name: k.count for k in rank.top_kernels} == {"k": 1, "m": 1}
    assert {o.name: o.count for o in rank.top_host_ops}["aten::to"] == 2
    assert f"2 {COPIES}: left out, each event counted once" in rank.notes


def test_equal_host_ops_alone_are_two_events_not_a_copy(tmp_path):
    """No event with a correlation id is held twice: the equal host ops are two calls, both counted, no note."""
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1), op("aten::to", 700, 0), op("aten::to", 700, 0)]
    rank = _only_rank(write(tmp_path / "t.json", trace(events)))
    assert {o.name: o.count for o in rank.top_host_ops}["aten::to"] == 2
    assert not any("identical" in note for note in rank.notes)


def test_each_gpu_of_a_file_held_twice_reads_its_own_work_once(tmp_path):
    events = [*launched("a", 10, 100, 500, 1, device=0), *launched("b", 20, 100, 200, 2, device=1)]
    report = read_report(write(tmp_path / "t.json", trace(events + events)))
    assert [(r.device_index, r.kernels, r.launches) for r in report.ranks] == [(0, 1, 1), (1, 1, 1)]
    assert all(f"4 {COPIES}: left out, each event counted once" in r.notes for r in report.ranks)


def test_a_cpu_only_trace_held_twice_counts_its_ops_once(tmp_path):
    """No runtime call to prove a copy: the host's equal neighbours, half its activities, do."""
    events = [step(1, 0, 1000), step(2, 1000, 1000)]
    for begin in (0, 1000):
        events += [op("aten::linear", begin + 10, 500), op("aten::addmm", begin + 20, 480),
                   op("aten::to", begin + 600, 0), op("aten::to", begin + 600, 0)]
    once = _only_rank(write(tmp_path / "once.json", trace(events)))
    twice = _only_rank(write(tmp_path / "twice.json", trace(events + events)))
    assert {o.name: o.count for o in once.top_host_ops} == {"aten::addmm": 2, "aten::linear": 2, "aten::to": 4}
    assert [(o.name, o.count) for o in twice.top_host_ops] == [("aten::addmm", 2), ("aten::linear", 2),
                                                                 ("aten::to", 2)]
    assert [o.seconds for o in twice.top_host_ops] == [o.seconds for o in once.top_host_ops]
    assert f"{len(events) + 2} {COPIES}: left out, each event counted once" in twice.notes
