"""Hostile traces at the read_report level: each gives one line (TraceError naming the file) or a report whose
notes name what could not be read, never a hang."""

from __future__ import annotations

import gzip
import io
import json
import os

import pytest

from hostile_paths import fifo_unblocked, make_fifo, make_symlink_loop
from trace_builders import input_bound_steps, launched, op, step, trace, write
from workbench.trace_analysis import TraceCancelled, TraceError, json_stream, read_report


def error_line(path, **kwargs) -> str:
    with pytest.raises(TraceError) as caught:
        read_report(path, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


def test_not_json(tmp_path):
    assert "is not a JSON trace" in error_line(write(tmp_path / "t.json", "hello, I am a text file\n"))
    assert "not valid JSON" in error_line(write(tmp_path / "u.json", '{"traceEvents": [{"ph": "X",, }]}'))


def test_binary_and_empty_files(tmp_path):
    (tmp_path / "b.json").write_bytes(b"\xff\xfe\x00\x01" * 100)
    assert "not UTF-8" in error_line(tmp_path / "b.json")
    (tmp_path / "e.json").write_bytes(b"")
    assert "not a JSON trace" in error_line(tmp_path / "e.json")
    assert "no trace events" in error_line(write(tmp_path / "n.json", {"traceEvents": []}))


def test_a_truncated_json_trace(tmp_path):
    text = json.dumps(trace(input_bound_steps()))
    assert "ends early" in error_line(write(tmp_path / "t.json", text[: len(text) // 2]))


def test_a_truncated_gzip(tmp_path):
    data = gzip.compress(json.dumps(trace(input_bound_steps(steps=50))).encode())
    (tmp_path / "t.json.gz").write_bytes(data[: len(data) // 2])
    assert "truncated" in error_line(tmp_path / "t.json.gz")


def test_a_corrupt_gzip(tmp_path):
    data = bytearray(gzip.compress(json.dumps(trace(input_bound_steps(steps=50))).encode()))
    data[len(data) // 2: len(data) // 2 + 64] = bytes(64)
    (tmp_path / "t.json.gz").write_bytes(bytes(data))
    assert "gzip" in error_line(tmp_path / "t.json.gz")


def test_a_gzip_bomb_is_refused_by_its_ratio(tmp_path, monkeypatch):
    """Whitespace inside a valid trace compresses ~1000×: past BOMB_RATIO it is refused, not inflated to the end."""
    monkeypatch.setattr(json_stream, "BOMB_CHECK_BYTES", 1024**2)
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb") as file:
        file.write(b'{"traceEvents": [')
        for _ in range(64):
            file.write(b" " * 1024**2)  # 64 MB of spaces
        file.write(b"]}")
    (tmp_path / "bomb.json.gz").write_bytes(buffer.getvalue())
    assert "gzip bomb" in error_line(tmp_path / "bomb.json.gz")


def test_a_trace_past_the_size_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(json_stream, "MAX_TRACE_BYTES", 10_000)
    big = trace(input_bound_steps(steps=200))
    assert "past the reader's limit" in error_line(write(tmp_path / "t.json", big))
    assert "decompresses to more than" in error_line(write(tmp_path / "t.json.gz", big))


def test_a_2_gb_file_answers_at_once(tmp_path):
    """A sparse 2 GB file (a header, then zeros): refused on its first chunk, not read to the end."""
    path = tmp_path / "huge.json"
    with open(path, "wb") as file:
        file.write(b'{"traceEvents": [')
        file.truncate(2 * 1024**3)
    assert "not valid JSON" in error_line(path)


def test_deep_nesting(tmp_path):
    depth = 200_000
    assert "nested too deeply" in error_line(
        write(tmp_path / "a.json", '{"traceEvents": [' + "[" * depth + "]" * depth + "]}"))
    event = '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": ' + '{"a": ' * depth + "1" + \
        "}" * depth + "}"
    assert "nested too deeply" in error_line(write(tmp_path / "b.json", '{"traceEvents": [' + event + "]}"))
    assert "nested too deeply" in error_line(write(tmp_path / "c.json", '{"meta": ' + "[" * depth + "]" * depth +
                                                   ', "traceEvents": []}'))


def test_a_cpu_only_trace_says_so_instead_of_100_percent_idle(tmp_path):
    events = [step(1, 0, 1000), step(2, 1000, 1000), op("aten::mm", 10, 500)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.cpu_only and rank.kernels == 0 and rank.steps == 2
    assert rank.idle_share is None and rank.compute_share is None and rank.gpu_span is None
    assert any("CPU-only" in note for note in rank.notes)
    assert rank.top_host_ops[0].name == "aten::mm"


def test_negative_durations_are_skipped_and_named(tmp_path):
    events = [step(1, 0, 1000), step(2, 1000, 1000), *launched("k", 10, 100, 500, 1), *launched("bad", 20, 700, -50, 2)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.kernels == 1 and rank.compute_share == pytest.approx(0.25)
    assert "1 events with a negative duration: skipped" in rank.notes


def test_overlapping_kernels_count_once(tmp_path):
    events = [step(1, 0, 1000), *launched("a", 10, 100, 500, 1), *launched("b", 20, 300, 500, 2, stream=9),
              *launched("c", 30, 300, 100, 3)]  # c overlaps a on the same stream (a profiler glitch)
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.compute_share == pytest.approx(0.7) and rank.idle_share == pytest.approx(0.3)
    assert 0 <= rank.idle_for_host_share <= 1 and 0 <= rank.idle_other_share <= 1


@pytest.mark.parametrize("broken", [
    {"ts": "12"}, {"ts": None}, {"dur": [1]}, {"name": 7}, {"ts": float("inf")}, {"ts": float("nan")},
])
def test_missing_or_mistyped_fields_are_skipped_and_counted(tmp_path, broken):
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]
    bad = dict(launched("bad", 20, 700, 50, 2)[1], **broken)
    text = json.dumps(trace([*events, bad, 42, "text"]), allow_nan=True)
    (rank,) = read_report(write(tmp_path / "t.json", text)).ranks
    assert rank.kernels == 1 and rank.compute_share == pytest.approx(0.5)
    assert "1 events with a missing or mistyped name, ts or dur: skipped" in rank.notes
    assert "2 events that are not JSON objects: skipped" in rank.notes


@pytest.mark.parametrize("category", [["kernel"], {"kernel": 1}, 7])
def test_a_category_that_is_not_a_string_is_no_category(tmp_path, category):
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1), dict(launched("bad", 20, 700, 50, 2)[1], cat=category)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.kernels == 1 and rank.compute_share == pytest.approx(0.5)


def test_mistyped_args_and_ids_read_as_unknown(tmp_path):
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]
    events[2]["args"] = ["not", "a", "dict"]  # the kernel: no device, stream or correlation
    events[1]["args"] = {"correlation": "seven"}
    (rank,) = read_report(write(tmp_path / "t.json", trace(events, distributedInfo="rank 3"))).ranks
    assert rank.kernels == 1 and rank.launches == 0 and rank.rank == 0


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = make_fifo(tmp_path / "trace.json")
    with fifo_unblocked(fifo):
        assert "FIFO" in error_line(fifo)


def test_a_symlink_loop_and_a_missing_file(tmp_path):
    assert "symlink loop" in error_line(make_symlink_loop(tmp_path / "loop.json"))
    assert "does not exist" in error_line(tmp_path / "absent.json")
    assert "no readable trace files" in error_line(tmp_path)


def test_a_folder_with_a_fifo_among_its_ranks_reads_the_rest(tmp_path):
    write(tmp_path / "rank-0.json", trace([*launched("k", 10, 100, 500, 1)]))
    fifo = make_fifo(tmp_path / "rank-1.json")
    with fifo_unblocked(fifo):
        report = read_report(tmp_path)
    assert [r.rank for r in report.ranks] == [0]
    assert report.notes == ("left out: rank-1.json is a FIFO (named pipe)",)


def test_a_broken_rank_file_is_named_and_the_other_ranks_read(tmp_path):
    write(tmp_path / "rank-0.json", trace([*launched("k", 10, 100, 500, 1)]))
    write(tmp_path / "rank-1.json", "not a trace")
    report = read_report(tmp_path)
    assert [r.rank for r in report.ranks] == [0]
    assert len(report.notes) == 1 and "rank-1.json: is not a JSON trace" in report.notes[0]
    write(tmp_path / "rank-0.json", "{")
    assert "no rank file could be read" in error_line(tmp_path)


def test_reading_can_be_cancelled_and_reports_progress(tmp_path, monkeypatch):
    monkeypatch.setattr(json_stream, "CHUNK_CHARS", 4096)
    path = write(tmp_path / "t.json", trace(input_bound_steps(steps=300)))
    seen: list[tuple[int, int]] = []
    read_report(path, progress=lambda done, total: seen.append((done, total)))
    size = os.path.getsize(path)
    assert seen[-1] == (size, size) and len(seen) > 3
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    calls = []
    with pytest.raises(TraceCancelled):
        read_report(path, cancelled=lambda: calls.append(1) or len(calls) > 2)


def test_the_garbage_collector_is_left_as_it_was(tmp_path):
    """The reader pauses the cyclic collector while it reads (speed); it must be back on after a read and after
    a refused file, and stay off for a caller that had turned it off."""
    import gc

    good = write(tmp_path / "t.json", trace(input_bound_steps()))
    bad = write(tmp_path / "bad.json", "nope")
    assert gc.isenabled()
    read_report(good)
    with pytest.raises(TraceError):
        read_report(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        read_report(good)
        assert not gc.isenabled()
    finally:
        gc.enable()
