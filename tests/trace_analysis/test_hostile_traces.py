"""Hostile traces at the read_report level: each gives one line (TraceError naming the file) or a report whose
notes name what could not be read, never a hang."""

from __future__ import annotations

import gzip
import io
import json
import os

import pytest

from hostile_paths import fifo_unblocked, make_fifo, make_symlink_loop
from trace_builders import input_bound_steps, kernel, launched, op, runtime, step, trace, write
from workbench.trace_analysis import TraceCancelled, TraceError, file_ranks, json_stream, ranks, read_report
from workbench.trace_analysis.script_findings import findings_for


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
    assert error_line(tmp_path / "e.json").endswith("e.json: is empty (no JSON in it)")
    (tmp_path / "s.json").write_bytes(b"  \n")
    assert error_line(tmp_path / "s.json").endswith("s.json: holds only white space (no JSON)")
    assert "no trace events" in error_line(write(tmp_path / "n.json", {"traceEvents": []}))
    # JSON whose events are none of them objects (a metrics.json beside the traces): no trace, not a rank of nothing
    assert "no trace events" in error_line(write(tmp_path / "m.json", [1, 2, 3]))
    assert "no trace events" in error_line(write(tmp_path / "l.json", {"traceEvents": [1, "x", [None]]}))


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


def test_bytes_after_the_gzip_stream_are_named_as_such(tmp_path):
    data = gzip.compress(json.dumps(trace(input_bound_steps(steps=50))).encode())
    (tmp_path / "t.json.gz").write_bytes(data + b"junk appended")
    assert error_line(tmp_path / "t.json.gz").endswith(
        "holds bytes after the end of its gzip stream that are not gzip (something appended to the file, or two "
        "files run together)")
    (tmp_path / "u.json.gz").write_bytes(b"\x1f\x8b junk that starts as gzip does")
    assert "is not readable gzip" in error_line(tmp_path / "u.json.gz")


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


@pytest.fixture
def figures_of_what_was_read(monkeypatch):
    """The GPU figures of the device events read, however many could not be: these traces have one broken event
    of two, where a real one has a few of thousands (the limit's own tests are below)."""
    monkeypatch.setattr(ranks, "UNREADABLE_DEVICE_EVENTS", float("inf"))


def test_negative_durations_are_skipped_and_named(tmp_path, figures_of_what_was_read):
    events = [step(1, 0, 1000), step(2, 1000, 1000), *launched("k", 10, 100, 500, 1), *launched("bad", 20, 700, -50, 2)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.kernels == 1 and rank.compute_share == pytest.approx(0.25)
    assert "1 event with a negative duration: skipped" in rank.notes


def test_overlapping_kernels_count_once(tmp_path):
    events = [step(1, 0, 1000), *launched("a", 10, 100, 500, 1), *launched("b", 20, 300, 500, 2, stream=9),
              *launched("c", 30, 300, 100, 3)]  # c overlaps a on the same stream (a profiler glitch)
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.compute_share == pytest.approx(0.7) and rank.idle_share == pytest.approx(0.3)
    assert 0 <= rank.idle_for_host_share <= 1 and 0 <= rank.idle_other_share <= 1


@pytest.mark.parametrize("broken", [
    {"ts": "12"}, {"ts": None}, {"dur": [1]}, {"name": 7}, {"ts": float("inf")}, {"ts": float("nan")},
])
def test_missing_or_mistyped_fields_are_skipped_and_counted(tmp_path, broken, figures_of_what_was_read):
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]
    bad = dict(launched("bad", 20, 700, 50, 2)[1], **broken)
    text = json.dumps(trace([*events, bad, 42, "text"]), allow_nan=True)
    (rank,) = read_report(write(tmp_path / "t.json", text)).ranks
    assert rank.kernels == 1 and rank.compute_share == pytest.approx(0.5)
    assert "1 event with a missing or mistyped name, ts or dur: skipped" in rank.notes
    assert "2 events that are not JSON objects: skipped" in rank.notes


@pytest.mark.parametrize("category", [["kernel"], {"kernel": 1}, 7])
def test_a_category_that_is_not_a_string_is_no_category(tmp_path, category, figures_of_what_was_read):
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1), dict(launched("bad", 20, 700, 50, 2)[1], cat=category)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.kernels == 1 and rank.compute_share == pytest.approx(0.5)
    assert "1 event with a missing or mistyped cat: skipped" in rank.notes  # it may have been the GPU's


def test_mistyped_args_and_ids_read_as_unknown(tmp_path, figures_of_what_was_read):
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]
    events[2]["args"] = ["not", "a", "dict"]  # the kernel: no device, stream or correlation
    events[1]["args"] = {"correlation": "seven"}
    (rank,) = read_report(write(tmp_path / "t.json", trace(events, distributedInfo="rank 3"))).ranks
    assert rank.kernels == 1 and rank.launches == 0 and rank.rank == 0
    assert "1 event whose args is not an object: read without its correlation, device and stream" in rank.notes


BROKEN_KERNELS = {"negative dur": {"dur": -50}, "ts a string": {"ts": "12"}, "cat a number": {"cat": 7},
                  "args a list": {"args": [1, 2]}}


@pytest.mark.parametrize("broken", BROKEN_KERNELS.values(), ids=BROKEN_KERNELS.keys())
def test_gpu_figures_are_not_given_where_many_device_events_cannot_be_read(tmp_path, broken):
    """Every kernel but one broken: its figures would say compute 2 % (or, without the kernels' streams, idle of
    no cause) and fire findings on them. None is given, and the note says why."""
    good = launched("k", 10, 100, 20, 1)
    bad = [dict(launched(f"b{n}", 20, 200 + 10 * n, 5, 2 + n)[1], **broken) for n in range(49)]
    (rank,) = read_report(write(tmp_path / "t.json", trace([step(1, 0, 1000), *good, *bad]))).ranks
    assert rank.cpu_only and rank.compute_share is None and rank.gpu_span is None and not rank.findings
    assert rank.kernels == 0 and not rank.top_kernels
    assert ("49 of the file's 50 kernel, copy and fill events (98%) were skipped or read in part (named above): past 1% "
            "of them the GPU figures would be wrong, so none are given") in rank.notes


def test_a_few_unreadable_device_events_of_many_leave_the_figures(tmp_path):
    kernels = [event for n in range(199) for event in launched(f"k{n}", 5 * n, 5 * n, 4, 1 + n)]
    bad = dict(launched("bad", 20, 995, 5, 500)[1], dur=-5)
    (rank,) = read_report(write(tmp_path / "t.json", trace([step(1, 0, 1000), *kernels, bad]))).ranks
    assert rank.kernels == 199 and rank.compute_share == pytest.approx(199 * 4 / 1000)
    assert "1 event with a negative duration: skipped" in rank.notes
    assert not any("were skipped or read in part" in note for note in rank.notes)


def test_a_gpus_unreadable_events_are_held_to_its_own_count_in_a_file_of_several(tmp_path):
    """One process's trace of two GPUs, cuda:1's kernels broken 5 in 100, cuda:0's all read (900): counted over
    the file (0.5 %), cuda:1's figures were given from the 95 read, and the other way round a GPU whose events
    were all read lost its figures to another's. Each GPU is held to its own events; one that names no GPU of
    the file counts for each."""
    def kernels(device: int, count: int, first: int) -> list[dict]:
        return [event for n in range(count)
                for event in launched(f"k{n}", n, n + 1, 0.5, first + n, device=device, stream=7 + device)]

    broken = [dict(launched(f"b{n}", 1, 2 + n, 0.5, 5000 + n, device=1)[1], dur=-1) for n in range(5)]
    events = [step(1, 0, 1000), *kernels(0, 900, 1), *kernels(1, 95, 1000), *broken]
    first, second = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert (first.device_index, second.device_index) == (0, 1)
    assert first.kernels == 900 and first.compute_share is not None
    assert second.cpu_only and second.compute_share is None and not second.findings
    assert ("5 of cuda:1's 100 kernel, copy and fill events (5%) were skipped or read in part (named above): past 1% "
            "of them the GPU figures would be wrong, so none are given") in second.notes
    # a broken kernel whose device cannot be read may be either GPU's: it counts for both
    unnamed = dict(launched("u", 1, 3, 0.5, 9000)[1], dur=-1, pid="?", args={"device": "?", "stream": 7})
    many_broken = [dict(event, dur=-1) for event in kernels(0, 10, 8000)[1::2]]
    events = [step(1, 0, 1000), *kernels(0, 1000, 1), *many_broken, *kernels(1, 199, 2000), unnamed]
    first, second = read_report(write(tmp_path / "u.json", trace(events))).ranks
    # cuda:0: 10 of its own and the unnamed one, of 1,011 (1.1 %); cuda:1: the unnamed one of 200 (0.5 %)
    assert first.cpu_only and "11 of cuda:0's 1,011 kernel, copy and fill events (1%)" in " ".join(first.notes)
    assert not second.cpu_only and second.kernels == 199


TOO_LONG = "events longer than a day (a corrupt duration: no profiler records a span that long): skipped"


@pytest.mark.parametrize("epoch_us", [0, 1_700_000_000_000_000])
def test_a_kernel_longer_than_a_day_is_skipped_not_read_as_compute(tmp_path, figures_of_what_was_read, epoch_us):
    """One kernel of 1e15 µs (31 years) made an input-bound trace read compute 100 % and compute-bound; an op at
    ts 0 in a trace on the epoch's clock (a corrupt start) must not switch the bound off."""
    events = [*input_bound_steps(5), *launched("void evil_kernel()", 100, 200, 1e15, correlation=99)]
    for event in events:
        event["ts"] += epoch_us
    events.append(op("aten::empty", 0, 1))
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.kernels == 5 and "void evil_kernel()" not in [kernel.name for kernel in rank.top_kernels]
    assert rank.compute_share < 0.5 and [finding.kind for finding in findings_for(rank)] == ["input-bound"]
    assert f"1 {TOO_LONG}".replace("events", "event") in rank.notes


def test_a_host_span_longer_than_a_day_is_skipped(tmp_path):
    events = [*input_bound_steps(5), step(6, 50_000, 1e15), op("aten::evil", 100, 1e12)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.steps == 5 and rank.step_seconds_high == pytest.approx(0.010)
    assert "aten::evil" not in [op.name for op in rank.top_host_ops]
    assert f"2 {TOO_LONG}" in rank.notes


def test_events_timed_a_day_away_from_the_rest_are_skipped_not_read_as_the_window(tmp_path, figures_of_what_was_read):
    """A ts of 0 in a trace on the epoch's clock stretched HTA's window (first to last GPU event) over 54 years."""
    events = [event for n in range(200) for event in launched("k", 10 + 1000 * n, 100 + 1000 * n, 500, n + 1)]
    for event in events:
        event["ts"] += 1_700_000_000_000_000
    clean = read_report(write(tmp_path / "clean.json", trace(events))).ranks[0]
    stray = [kernel("stray", 0, 10, 7777, stream=3), op("aten::empty", 0, 1, tid=9)]  # on lists of their own
    (rank,) = read_report(write(tmp_path / "t.json", trace(events + stray))).ranks
    assert rank.gpu_span == clean.gpu_span and rank.window_seconds == clean.window_seconds
    assert "2 events timed more than a day away from the rest of the trace (a corrupt timestamp): skipped" in (
        rank.notes)


def test_many_events_a_day_from_the_rest_are_clocks_that_disagree_read_as_they_are(tmp_path):
    """Past 1 % of the file they are not a few corrupt timestamps: a thread of ops timed from 0, over a third of the
    file, must not outvote the rest (the real events were all dropped) nor be dropped itself; a note says the
    figures that span them may be wrong."""
    events = [event for n in range(50) for event in launched("k", 10 + 1000 * n, 100 + 1000 * n, 500, n + 1)]
    for event in events:
        event["ts"] += 1_700_000_000_000_000
    flood = [op("aten::empty", n, 1, tid=5) for n in range(60)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events + flood))).ranks
    assert rank.kernels == 50 and rank.compute_share == pytest.approx(0.5, abs=0.01)  # the real events read
    assert ("60 events of the file's 160 are timed more than a day away from the rest (clocks that "
            "disagree?): read as they are, so the figures that span them may be wrong") in rank.notes


def test_long_real_spans_are_kept(tmp_path):
    """A 75 s kernel that a 75 s sync waits for, and a 70 s step with nothing else in it, are real: kept."""
    second = 1e6
    kernel_trace = [step(1, 0, 80 * second), *launched("k", 10, 100, 75 * second, 1),
                    runtime("cudaDeviceSynchronize", 20, 75 * second)]
    (rank,) = read_report(write(tmp_path / "k.json", trace(kernel_trace))).ranks
    assert rank.kernels == 1 and rank.compute_share == pytest.approx(75 / 80, abs=1e-4)
    step_trace = [step(1, 0, 70 * second), *launched("k", 10, 100, 1, 1)]
    (rank,) = read_report(write(tmp_path / "s.json", trace(step_trace))).ranks
    assert rank.steps == 1 and rank.step_seconds_median == pytest.approx(70)
    assert not any("longer than a day" in note for note in rank.notes)


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = make_fifo(tmp_path / "trace.json")
    with fifo_unblocked(fifo):
        assert "FIFO" in error_line(fifo)


def test_a_symlink_loop_and_a_missing_file(tmp_path):
    assert "symlink loop" in error_line(make_symlink_loop(tmp_path / "loop.json"))
    assert "does not exist" in error_line(tmp_path / "absent.json")
    assert "no readable trace files (*.json, *.json.gz); left out: loop.json is a symlink loop" in error_line(tmp_path)


def test_a_byte_order_mark_in_front_is_passed_over(tmp_path):
    """An editor may save one; JSON readers pass over it (HTA's included), so the trace reads as it is."""
    text = json.dumps(trace([step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]))
    (tmp_path / "t.json").write_bytes("\ufeff".encode() + text.encode())
    (rank,) = read_report(tmp_path / "t.json").ranks
    assert rank.kernels == 1


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


class CountingDecoders:
    """Counts the characters json_stream hands its two batch decoders and searches for cuts: the work of a read, which must stay a
    small multiple of the file's length whatever the file holds (a wall-clock bound would fail a loaded machine)."""

    def __init__(self, monkeypatch):
        self.chars = 0
        typed_decoder, loads = json_stream.msgspec.json.Decoder, json_stream.json.loads
        counter = self

        class Typed:
            def __init__(self, *args):
                self.decoder = typed_decoder(*args)

            def decode(self, text):
                counter.chars += len(text)
                return self.decoder.decode(text)

        def counted_loads(text, *args, **kwargs):
            counter.chars += len(text)
            return loads(text, *args, **kwargs)

        class Boundary:  # the search for the last event boundary, over the buffer's tail
            def finditer(self, text, start):
                counter.chars += len(text) - start
                return boundary.finditer(text, start)

        boundary = json_stream._EVENT_BOUNDARY
        monkeypatch.setattr(json_stream.msgspec.json, "Decoder", Typed)
        monkeypatch.setattr(json_stream.json, "loads", counted_loads)
        monkeypatch.setattr(json_stream, "_EVENT_BOUNDARY", Boundary())


def test_event_boundaries_inside_names_cost_one_decode_each_not_one_per_event(tmp_path, monkeypatch):
    """'},{' in a name ("fn<{a},{b}>") makes a false cut at a chunk's end: the events up to it are decoded one by
    one once, never the whole batch again for each of them (15 s per MB before)."""
    events = [step(1, 0, 100_000)] + [op(f"user_fn<{{a}},{{b}}>#{i}", 10 + i, 5) for i in range(3000)]
    path = write(tmp_path / "t.json", trace(events))
    plain = write(tmp_path / "plain.json", json.dumps(trace(events)).replace("},{", ")-(").replace("{a}", "(a)"))
    monkeypatch.setattr(json_stream, "CHUNK_CHARS", 4096)
    counted = CountingDecoders(monkeypatch)
    (rank,) = read_report(path).ranks
    assert counted.chars < 4 * path.stat().st_size
    assert [op.count for op in rank.top_host_ops] == [op.count for op in read_report(plain).ranks[0].top_host_ops]


def test_items_that_are_not_events_are_read_in_batches(tmp_path, monkeypatch):
    """Items without a '},{' between them (numbers) are cut at commas: C speed, not one value at a time with the
    buffer's tail searched again before each (a 32 KB gzip of '0,0,…' ran for minutes)."""
    text = json.dumps(trace([step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]))
    text = text[:-2] + ", " + ", ".join(["0"] * 200_000) + "]}"
    path = write(tmp_path / "t.json", text)
    monkeypatch.setattr(json_stream, "CHUNK_CHARS", 65536)
    counted = CountingDecoders(monkeypatch)
    (rank,) = read_report(path).ranks
    assert rank.kernels == 1 and "200,000 events that are not JSON objects: skipped" in rank.notes
    assert counted.chars < 4 * path.stat().st_size


def test_numbers_past_pythons_digit_limit_give_one_line(tmp_path):
    huge = "9" * 5000
    events = json.dumps([step(1, 0, 1000), *launched("k", 10, 100, 500, 1)])
    assert "more than 4,300 digits" in error_line(write(tmp_path / "a.json", events.replace('"ts": 0', f'"ts": {huge}', 1)))
    assert "more than 4,300 digits" in error_line(
        write(tmp_path / "b.json", '{"distributedInfo": {"rank": ' + huge + '}, "traceEvents": ' + events + "}"))
    as_text = events.replace('"correlation": 1', f'"correlation": "{huge}"')  # a string of digits: no id, read on
    (rank,) = read_report(write(tmp_path / "c.json", '{"traceEvents": ' + as_text + "}")).ranks
    assert rank.kernels == 1


def test_what_a_json_reader_would_take_one_way_or_the_other_is_refused(tmp_path):
    events = json.dumps([step(1, 0, 1000), *launched("k", 10, 100, 500, 1)])
    twice = '{"traceEvents": ' + events + ', "traceEvents": ' + events + "}"
    assert 'holds "traceEvents" twice' in error_line(write(tmp_path / "twice.json", twice))
    assert "text after the events' closing bracket" in error_line(write(tmp_path / "tail.json", events + " GARBAGE {{"))


def test_a_large_value_beside_the_events_is_refused_and_unread_keys_are_not_kept(tmp_path, monkeypatch):
    """A profiler writes a few KB beside its events; a hostile file's megabytes there were held whole (25× the
    text: 1.6 GB for a 63 MB file)."""
    monkeypatch.setattr(json_stream, "MAX_META_CHARS", 1024)
    monkeypatch.setattr(json_stream, "CHUNK_CHARS", 256)
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]
    message = error_line(write(tmp_path / "big.json", trace(events, junk=[{}] * 1000)))
    assert 'holds a top-level "junk" larger than' in message
    from workbench.trace_analysis.parsed_trace import read_trace

    parsed = read_trace(write(tmp_path / "small.json", trace(events, other=[1, 2], distributedInfo={"rank": 3})))
    assert set(parsed.meta) == {"distributedInfo"}


def test_steps_of_zero_length_are_left_out_and_a_nested_step_hides_nothing(tmp_path):
    """A 0 µs step is no step time (its 0 divided the straggler and the sync figures); a short step nested in
    another is a record_function named like a step, not a step of the loop (counted, it made 4 steps of a loop's
    3), and must not end the steps' window before the kernels that ran in the outer one."""
    events = [step(1, 0, 40_000), step(2, 5, 10), step(3, 50_000, 0), *launched("k", 100, 1000, 30_000, 1)]
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.steps == 1 and rank.step_seconds == (0.040,)
    assert rank.window_seconds == pytest.approx(0.040) and rank.compute_share == pytest.approx(0.75)
    assert "1 ProfilerStep spans of zero length: left out (a step time of 0 is no step time)" in rank.notes
    assert ("1 ProfilerStep span wholly inside another step: left out (a record_function named like a step, not a "
            "step of the loop)") in rank.notes


def test_the_profilers_closing_step_of_no_work_is_no_step(tmp_path):
    """The profiler opens a step at the loop's last step() and closes it on exit: 49 µs and empty after steps of
    9 ms in HTA's MI250 trace, it made the spread's low end and one more step. Short but holding work, or holding
    none but as long as the others, a last step is kept."""
    loop = [step(1, 0, 9000), step(2, 9000, 9000), *launched("k", 10, 100, 500, 1), *launched("k", 9010, 9100, 500, 2)]
    (rank,) = read_report(write(tmp_path / "t.json", trace([*loop, step(3, 18_000, 50)]))).ranks
    assert rank.steps == 2 and rank.step_seconds == (0.009, 0.009)
    assert any("closed it on exit): left out" in note for note in rank.notes)
    short_with_work = [*loop, step(3, 18_000, 50), *launched("k", 18_010, 18_020, 20, 3)]
    assert read_report(write(tmp_path / "work.json", trace(short_with_work))).ranks[0].steps == 3
    long_and_empty = [*loop, step(3, 18_000, 9000)]
    assert read_report(write(tmp_path / "long.json", trace(long_and_empty))).ranks[0].steps == 3


def test_the_closing_step_holding_the_loops_last_dataloader_fetch_is_no_step(tmp_path):
    """A loop that ends when its DataLoader runs out: the profiler's closing step holds that last
    enumerate(DataLoader)#…__next__ (30 µs, which found no batch), and nothing else. Read as work, it kept a step of
    98 µs beside one of 52 ms in a real torch 2.14 trace: "median 26.0 ms (spread 98 µs–51.9 ms)"."""
    fetch = op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 18_010, 30, cat="user_annotation")
    loop = [step(1, 0, 9000), step(2, 9000, 9000), *launched("k", 10, 100, 500, 1), *launched("k", 9010, 9100, 500, 2)]
    (rank,) = read_report(write(tmp_path / "t.json", trace([*loop, step(3, 18_000, 98), fetch]))).ranks
    assert rank.steps == 2 and rank.step_seconds == (0.009, 0.009)
    assert any("closed it on exit): left out" in note for note in rank.notes)


def test_a_trace_whose_device_events_could_not_be_read_is_not_called_cpu_only(tmp_path):
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]
    events[2]["ts"] = "100"  # the one kernel, mistyped
    (rank,) = read_report(write(tmp_path / "t.json", trace(events))).ranks
    assert rank.cpu_only and not any("a CPU-only trace" in note for note in rank.notes)
    assert "no kernel, copy or fill event could be read (1 event skipped, named above)" in " ".join(rank.notes)


def test_a_file_naming_more_gpus_than_a_node_holds_gives_one_line(tmp_path, monkeypatch):
    """Each GPU is a report over all the host's events: 2,000 device indices took 31 s and 42 MB of notes."""
    monkeypatch.setattr(file_ranks, "MAX_GPUS_PER_FILE", 4)
    events = [step(1, 0, 10_000)] + [event for device in range(5)
                                     for event in launched("k", 10 + device, 100 + device, 50, device + 1, device=device)]
    assert "its device events name 5 GPUs" in error_line(write(tmp_path / "t.json", trace(events)))
    folder = tmp_path / "ranks"  # in a folder, that file is left out and the other ranks read
    folder.mkdir()
    write(folder / "rank-0.json", trace([step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]))
    write(folder / "rank-1.json", trace(events))
    report = read_report(folder)
    assert [rank.rank for rank in report.ranks] == [0]
    assert any(note.startswith("left out: ") and "name 5 GPUs" in note for note in report.notes)


def test_a_folder_that_cannot_be_listed_gives_one_line(tmp_path, monkeypatch):
    folder = tmp_path / "ranks"
    folder.mkdir()
    write(folder / "rank-0.json", trace([step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]))

    def refused(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(folder), "iterdir", refused)  # as a folder of mode 0311 is to a user not its owner
    assert "the folder cannot be listed (permission denied)" in error_line(folder)


def test_begin_and_end_marks_are_said_not_dropped_unsaid(tmp_path):
    """A trace whose spans are "B"/"E" pairs (written by another tool) read as "no GPU activity recorded … profiled
    without ProfilerActivity.CUDA?", its kernels in the file."""
    events = [step(1, 0, 1000), *launched("k", 10, 100, 500, 1)]
    pairs = [dict(event, ph=mark, ts=event["ts"] + (event.get("dur", 0) if mark == "E" else 0))
             for event in events[1:] for mark in ("B", "E")]
    (rank,) = read_report(write(tmp_path / "t.json", trace([events[0], *pairs]))).ranks
    assert ('4 events that are begin or end marks ("ph": "B"/"E"; torch.profiler writes spans as "X"): skipped'
            in rank.notes)
