"""Opening a trace without a window: off-thread reading with progress and Cancel, refused paths, the history record,
and the page the Trace tab draws. No Qt."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from pathlib import Path

import pytest

from workbench.controller.trace_opening import RECORDING, TraceOpening
from workbench.controller.trace_page import history_line, trace_page
from workbench.formatting import format_short_seconds
from workbench.history.store import HistoryError, HistoryStore
from workbench.controller.trace_opening import read_with_findings
from workbench.trace_analysis.model import (Finding, Fingerprint, NamedSeconds, RankReport, TraceCancelled, TraceError,
                                            TraceReport)

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"


def rank_report(rank: int = 0, **changes) -> RankReport:
    values = dict(
        rank=rank, device="NVIDIA A100-SXM4-80GB", steps=5, step_seconds=(0.24, 0.25, 0.27),
        step_seconds_median=0.25, step_seconds_low=0.24, step_seconds_high=0.27,
        compute_share=0.5, communication_share=0.125, memory_share=0.125, idle_share=0.25,
        idle_for_data_share=0.5, idle_for_host_share=0.25, idle_kernel_wait_share=0.0, idle_other_share=0.25,
        dataloader_share=0.334, gpu_span={"idle_share": 0.25, "compute_share": 0.5, "non_compute_share": 0.25},
        top_kernels=(NamedSeconds("volta_sgemm_128x64_nn", 0.0125), NamedSeconds("k" * 500, 0.0000125)),
        top_host_ops=(NamedSeconds("aten::conv2d", 1.5),), sync_calls=(), runtime_calls={}, kernels=1234, notes=(),
        findings=(Finding("input_bound", "The GPU waits for the DataLoader", 0.334, 0.1,
                          "DataLoader(num_workers=4, pin_memory=True, persistent_workers=True)"),),
    )
    values.update(changes)
    return RankReport(**values)


def fake_read(report: TraceReport, during=None):
    """A reader that reports half its bytes read, hashes the file where asked (as read_report does, in its one
    pass) and gives ``report``, naming the file it read."""
    def read(path, *, progress=None, cancelled=None, fingerprints=None, analysing=None):
        progress(50, 100)
        if during is not None:
            during()
        if cancelled():
            raise TraceCancelled("cancelled")
        if fingerprints is not None:
            data = Path(path).read_bytes()
            fingerprints[path] = Fingerprint(hashlib.sha256(data).hexdigest(), len(data))
        return report if report.files else dataclasses.replace(report, files=(path,))

    return read


@pytest.fixture
def trace_file(tmp_path) -> Path:
    path = tmp_path / "rank0.pt.trace.json"
    path.write_bytes(b'{"traceEvents": []}' + b" " * 3000)
    return path


def test_a_fifo_is_refused_by_stat_before_anything_opens_it(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    outcome = []

    def open_it():
        try:
            TraceOpening(fifo, tmp_path / "home").run()
        except TraceError as error:
            outcome.append(str(error))

    thread = threading.Thread(target=open_it, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "opening a FIFO waited for a writer"
    assert outcome == [f"{fifo} is a FIFO (named pipe)"]
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        assert store.list_runs() == []


def test_progress_is_what_the_reader_reported_and_then_the_recording(trace_file, tmp_path):
    seen = []
    opening = TraceOpening(trace_file, tmp_path / "home", read=fake_read(TraceReport(str(trace_file), (rank_report(),)),
                                                                         during=lambda: seen.append(opening.progress())))
    opened = opening.run()
    assert seen[0].phase == "reading" and seen[0].fraction == 0.5
    assert opening.progress().phase == RECORDING and opened.record_id is not None


def test_cancel_while_reading_stops_and_keeps_nothing(trace_file, tmp_path):
    opening = TraceOpening(trace_file, tmp_path / "home", read=fake_read(TraceReport(str(trace_file), (rank_report(),)),
                                                                         during=lambda: opening.cancel()))
    with pytest.raises(TraceCancelled):
        opening.run()
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        assert store.list_runs() == []


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/traces is not beside the checkout")
def test_the_record_holds_the_digest_of_the_bytes_its_figures_came_from(tmp_path):
    """A profiler's next cycle may rewrite the file under the same name while it is opened: the record keeps the
    sha256 of the bytes the figures were read from, never one of the bytes found at a second read."""
    trace = tmp_path / "rank0.pt.trace.json.gz"
    trace.write_bytes((TRACES / "a100-nccl.json.gz").read_bytes())
    read_bytes = trace.read_bytes()

    def read_then_rewritten(path, **options):
        report = read_with_findings(path, **options)
        trace.write_bytes((TRACES / "a100-training.json.gz").read_bytes())
        return report

    opened = TraceOpening(trace, tmp_path / "home", read=read_then_rewritten).run()
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        kept = store.get_run(opened.record_id).trace
    assert kept.sha256 == hashlib.sha256(read_bytes).hexdigest() and kept.size_bytes == len(read_bytes)
    assert kept.ranks[0]["steps"] == opened.report.ranks[0].steps == 3  # a100-nccl's figures, with its digest


def test_a_trace_keeps_the_profiler_options_it_was_taken_with(trace_file, tmp_path):
    report = TraceReport(str(trace_file), (rank_report(profiler_options=("with_stack", "profile_memory")),))
    opened = TraceOpening(trace_file, tmp_path / "home", read=fake_read(report)).run()
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        (kept,) = store.get_run(opened.record_id).trace.ranks
    assert kept["profiler_options"] == ["with_stack", "profile_memory"]


def test_a_trace_that_cannot_be_read_says_why_and_keeps_nothing(tmp_path):
    bad = tmp_path / "not-a-trace.json"
    bad.write_text("this is not JSON")
    with pytest.raises(TraceError) as raised:
        TraceOpening(bad, tmp_path / "home").run()
    assert str(bad) in str(raised.value) and "\n" not in str(raised.value)
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        assert store.list_runs() == []


def test_a_trace_is_kept_with_its_sha256_and_size_and_once_only(trace_file, tmp_path):
    report = TraceReport(str(trace_file), (rank_report(),))
    first = TraceOpening(trace_file, tmp_path / "home", read=fake_read(report)).run()
    assert first.report.ranks == report.ranks and not first.kept_before
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        record = store.get_run(first.record_id)
    assert record.is_trace and record.trace.path == str(trace_file)
    assert record.trace.sha256 == hashlib.sha256(trace_file.read_bytes()).hexdigest()
    assert record.trace.size_bytes == trace_file.stat().st_size
    (kept,) = record.trace.ranks
    assert kept["compute_share"] == 0.5 and kept["dataloader_share"] == 0.334 and kept["gpu_span"]["idle_share"] == 0.25
    assert kept["findings"][0]["kind"] == "input_bound" and kept["findings"][0]["threshold"] == 0.1
    assert kept["profiler_options"] == []  # none on: known, not unknown (a record kept before them has no key)
    again = TraceOpening(trace_file, tmp_path / "home", read=fake_read(report)).run()
    assert (again.record_id, again.kept_before) == (first.record_id, True)
    assert "Opened before" in history_line(again.record_id, again.kept_before, again.history_note)


def test_a_trace_analysed_otherwise_now_brings_its_record_up_to_date_and_says_so(trace_file, tmp_path):
    """Opened again by a workbench whose analysis gives other figures (a rule fixed, a figure added), the Trace tab
    showed the new figures while the Runs tab, its comparisons and the CSV kept the first opening's, and the status
    line said "kept once, since its figures are the same". The record now holds what the Trace tab shows."""
    first = TraceOpening(trace_file, tmp_path / "home",
                         read=fake_read(TraceReport(str(trace_file), (rank_report(),)))).run()
    with HistoryStore.open(tmp_path / "home") as store:
        store.rename(first.record_id, "the baseline")
        store.set_tags(first.record_id, ["input-bound"])
    now = TraceReport(str(trace_file), (rank_report(compute_share=0.625, idle_share=0.125),))
    again = TraceOpening(trace_file, tmp_path / "home", read=fake_read(now)).run()
    assert (again.record_id, again.kept_before) == (first.record_id, True)
    line = history_line(again.record_id, again.kept_before, again.history_note)
    assert line.startswith(f"Opened before: the Runs tab lists it as #{first.record_id}")
    assert "its figures there were brought up to date with this analysis: those kept by workbench" in line
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        record = store.get_run(first.record_id)
    (kept,) = record.trace.ranks
    assert (kept["compute_share"], kept["idle_share"]) == (0.625, 0.125) == (now.ranks[0].compute_share,
                                                                             now.ranks[0].idle_share)
    assert (record.name, record.tags) == ("the baseline", ("input-bound",))
    same = TraceOpening(trace_file, tmp_path / "home", read=fake_read(now)).run()
    assert same.history_note is None and "with these figures" in history_line(same.record_id, True, None)


def test_a_record_of_other_figures_that_takes_no_write_now_is_said_to_hold_them(trace_file, tmp_path, monkeypatch):
    """The disk full, the record cannot be brought up to date: the status line says its figures are not these."""
    first = TraceOpening(trace_file, tmp_path / "home",
                         read=fake_read(TraceReport(str(trace_file), (rank_report(),)))).run()

    def disk_full(self, trace, source="gui"):
        raise HistoryError("cannot write the run history: the disk is full")

    monkeypatch.setattr(HistoryStore, "add_trace", disk_full)
    now = TraceReport(str(trace_file), (rank_report(compute_share=0.625),))
    again = TraceOpening(trace_file, tmp_path / "home", read=fake_read(now)).run()
    assert (again.record_id, again.kept_before) == (first.record_id, True)
    assert again.history_note.startswith("the figures kept there by workbench ")
    assert again.history_note.endswith("are an earlier analysis's, not these, and could not be brought up to date: "
                                       "cannot write the run history: the disk is full")


def test_a_trace_kept_before_is_said_kept_though_the_disk_takes_no_write_now(trace_file, tmp_path, monkeypatch):
    """Opened again once the disk filled up: "not kept in the history: … the disk is full", though it was kept as
    #1 (the lookup ran inside a write). The record kept is read without writing."""
    report = TraceReport(str(trace_file), (rank_report(),))
    first = TraceOpening(trace_file, tmp_path / "home", read=fake_read(report)).run()

    def disk_full(self, trace, source="gui"):
        raise HistoryError("cannot write the run history: the disk is full")

    monkeypatch.setattr(HistoryStore, "add_trace", disk_full)
    again = TraceOpening(trace_file, tmp_path / "home", read=fake_read(report)).run()
    assert (again.record_id, again.kept_before, again.history_note) == (first.record_id, True, None)


def test_a_history_that_cannot_be_opened_leaves_the_report_shown(trace_file, tmp_path):
    not_a_folder = tmp_path / "home"
    not_a_folder.write_text("a file where the history's folder should be")
    opened = TraceOpening(trace_file, not_a_folder, read=fake_read(TraceReport(str(trace_file), (rank_report(),)))).run()
    assert opened.record_id is None and opened.report.ranks
    assert opened.history_note.startswith("not kept in the history:")


@pytest.mark.skipif(not (TRACES / "two-ranks").is_dir(), reason="../shared/traces is not beside the checkout")
def test_a_real_folder_of_ranks_is_read_and_kept_with_the_digest_of_its_files(tmp_path):
    folder = TRACES / "two-ranks"
    opened = TraceOpening(folder, tmp_path / "home").run()
    assert [rank.rank for rank in opened.report.ranks] == [0, 1]
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        trace = store.get_run(opened.record_id).trace
    names = sorted(path.name for path in folder.glob("*.json.gz"))
    assert trace.files == tuple(names)
    expected = hashlib.sha256()
    for name in names:
        expected.update(f"{name}\0{hashlib.sha256((folder / name).read_bytes()).hexdigest()}\n".encode())
    assert trace.sha256 == expected.hexdigest()
    assert trace.size_bytes == sum((folder / name).stat().st_size for name in names)
    assert [rank["rank"] for rank in trace.ranks] == [0, 1]


def test_the_page_shows_each_ranks_steps_splits_tops_and_findings():
    page = trace_page(TraceReport("/t/rank0.json.gz", (rank_report(0), rank_report(1, dataloader_share=None))),
                      "Kept in the history as #3")
    assert page.title == "/t/rank0.json.gz"
    first, second = page.sections
    assert first.title == "Rank 0 · NVIDIA A100-SXM4-80GB"
    assert first.steps == "5 steps (ProfilerStep#N), 250.0 ms each (median), from 240.0 ms to 270.0 ms"
    assert [share.text for share in first.gpu_time] == ["compute 50.0 %", "communication 12.5 %", "memory 12.5 %",
                                                        "idle 25.0 %"]
    assert [share.text for share in first.idle] == ["waiting for data 50.0 %", "waiting for the host 25.0 %",
                                                    "kernel wait 0.0 %", "other 25.0 %"]
    assert first.top_kernels[0] == ("volta_sgemm_128x64_nn", "12.5 ms")
    assert len(first.top_kernels[1][0]) <= 110 and first.top_kernels[1][1] == "12.5 µs"
    assert first.top_host_ops == (("aten::conv2d", "1.5 s"),)
    (finding,) = first.findings
    assert finding.text == "The GPU waits for the DataLoader"  # its figure and threshold are its own words: not added
    assert len(finding.changes) == 1 and finding.changes[0].startswith("DataLoader(num_workers=4")
    assert any(fact.startswith("DataLoader: 33.4 % of the step") for fact in first.facts)
    assert not any(fact.startswith("DataLoader") for fact in second.facts)  # not read: not said, never 0 %
    assert page.prove == ("To see what a change did: make one, trace again, and open the new trace too and select "
                          "both in the Runs tab: the steps are compared with their spread, and a gain is called only "
                          "beyond it.")


def test_a_page_without_findings_does_not_say_how_to_prove_a_change():
    assert trace_page(TraceReport("/t.json", (rank_report(0, findings=()),)), "").prove == ""


def test_a_figure_that_cannot_be_read_says_n_a_as_the_text_report_does():
    rank = rank_report(idle_for_data_share=None, dataloader_share=None,
                       gpu_span={"idle_share": 0.25, "compute_share": None})
    (section,) = trace_page(TraceReport("/t.json", (rank,)), "").sections
    assert "Over HTA's window (first to last GPU event): idle 25.0 %, compute n/a, non-compute n/a" in section.facts[0]
    assert any(fact.startswith("Waiting for data: n/a (the trace has no DataLoader spans)") for fact in section.facts)
    assert not any("unknown" in fact for fact in section.facts)
    rank = rank_report(gpu_span={"idle_share": 0.9, "compute_share": 0.1, "non_compute_share": 0.0},
                       gpu_span_as_hta={"idle_share": 0.9, "compute_share": 0.1, "non_compute_share": -0.00004})
    (section,) = trace_page(TraceReport("/t.json", (rank,)), "").sections
    assert "non-compute 0.0 %" in section.facts[0] and "-0.0" not in section.facts[0]


def test_one_step_and_one_kernel_read_in_the_singular():
    rank = rank_report(steps=1, step_seconds=(13.34,), step_seconds_median=13.34, step_seconds_low=13.34,
                       step_seconds_high=13.34, kernels=1)
    (section,) = trace_page(TraceReport("/t.json", (rank,)), "").sections
    assert section.steps == "1 step (ProfilerStep#N): 13.34 s" and "1 kernel" in section.facts


def test_a_cpu_only_trace_has_no_gpu_bars_and_says_so():
    rank = rank_report(cpu_only=True, compute_share=None, communication_share=None, memory_share=None,
                       idle_share=None, gpu_span={}, steps=0, step_seconds_median=None, kernels=0, device="unknown")
    page = trace_page(TraceReport("/t.json", (rank, dataclasses.replace(rank, rank=1))), "")
    section = page.sections[0]
    assert section.title == "Rank 0 · no GPU work read"  # not "unknown": no GPU was read at all
    assert page.ranks_rows[0][-1] == "no GPU work read"
    assert section.gpu_time == () and section.idle == ()
    assert section.facts[0].startswith("No GPU work read from this trace")
    assert not any("kernel" in fact for fact in section.facts)  # none read is not none run (a range profiler's)
    assert section.steps == "No ProfilerStep#N in the trace: the figures are over the first to the last host event"


def test_short_spans_read_in_their_unit():
    assert [format_short_seconds(value) for value in (2.5, 0.251, 0.0123, 0.00084, 1500.0, None)] == [
        "2.5 s", "251 ms", "12.3 ms", "840 µs", "1,500 s", ""]


def test_the_history_spreads_out_every_figure_of_the_json_contract():
    from workbench.history.trace_records import GPU_SPAN_KEYS, RANK_FIGURE_KEYS
    from workbench.trace_analysis import report_json

    assert ("rank", *RANK_FIGURE_KEYS, "gpu_span", "findings") == report_json.RANK_KEYS
    assert GPU_SPAN_KEYS == report_json.GPU_SPAN_KEYS


@pytest.mark.skipif(not (TRACES / "a100-nccl.json.gz").is_file(), reason="../shared/traces is not beside the checkout")
def test_the_record_keeps_whether_each_file_named_its_rank(tmp_path):
    """The Runs tab's step line says a rank numbered by its file's place is paired by that number alone: the record
    keeps which are."""
    unranked = tmp_path / "unranked"  # two files with no distributedInfo and no rank-N in their names
    unranked.mkdir()
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 100, "dur": 500,
               "args": {"device": 0, "stream": 7, "correlation": 1}}]
    for name in ("a.json", "b.json"):
        (unranked / name).write_text(json.dumps({"traceEvents": events}))
    kept = []
    for folder in (TRACES / "two-ranks", unranked):
        opened = TraceOpening(folder, tmp_path / "home").run()
        with HistoryStore.open_for_reading(tmp_path / "home") as store:
            kept.append([rank["rank_named"] for rank in store.get_run(opened.record_id).trace.ranks])
    assert kept == [[True, True], [False, False]]


@pytest.mark.skipif(not (TRACES / "a100-nccl.json.gz").is_file(), reason="../shared/traces is not beside the checkout")
def test_the_record_keeps_what_workbench_trace_json_prints(tmp_path):
    from workbench.trace_analysis.report_json import to_json

    opened = TraceOpening(TRACES / "a100-nccl.json.gz", tmp_path / "home").run()
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        trace = store.get_run(opened.record_id).trace
    printed = to_json(opened.report)["ranks"]
    assert [{key: rank[key] for key in printed[0]} for rank in trace.ranks] == printed
    assert [rank["step_seconds"] for rank in trace.ranks] == [list(rank.step_seconds) for rank in opened.report.ranks]


def test_a_problem_offered_several_changes_reads_once_with_each_change():
    text = "Launch-bound: the GPU sat idle waiting for the host"
    findings = (Finding("launch-bound", text, 0.41, 0.2, "a larger batch"),
                Finding("launch-bound", text, 0.41, 0.2, 'torch.compile(model, mode="reduce-overhead")'),
                Finding("communication-bound", "NCCL not hidden", 0.21, 0.15, "DDP(bucket_cap_mb=50)"))
    (section,) = trace_page(TraceReport("/t.json", (rank_report(findings=findings),)), "").sections
    assert [(line.kind, line.changes) for line in section.findings] == [
        ("launch-bound", ("a larger batch", 'torch.compile(model, mode="reduce-overhead")')),
        ("communication-bound", ("DDP(bucket_cap_mb=50)",))]


def test_a_trace_opened_by_a_relative_path_is_kept_by_its_absolute_one(trace_file, tmp_path, monkeypatch):
    monkeypatch.chdir(trace_file.parent)
    report = TraceReport(trace_file.name, (rank_report(),))
    opened = TraceOpening(trace_file.name, tmp_path / "home", read=fake_read(report)).run()
    with HistoryStore.open_for_reading(tmp_path / "home") as store:
        assert store.get_run(opened.record_id).trace.path == str(trace_file)


def test_several_ranks_read_side_by_side_with_the_slowest_named():
    slow = rank_report(1, step_seconds=(0.29, 0.30, 0.31), step_seconds_median=0.3)
    page = trace_page(TraceReport("/t", (rank_report(0), slow)), "")
    assert page.ranks_header[:3] == ("rank", "steps", "median step")
    assert page.ranks_rows[1][:4] == ("1", "5", "300.0 ms", "50.0 %")
    assert page.slowest.startswith("Slowest rank: rank 1, its median step 50 ms (20%) longer than rank 0's")
    assert trace_page(TraceReport("/t", (rank_report(0),)), "").ranks_rows == ()  # one rank: nothing to set beside


def test_without_a_history_the_trace_is_shown_and_not_hashed(trace_file):
    asked = []

    def read(path, **options):
        asked.append("fingerprints" in options)
        return TraceReport(path, (rank_report(),), files=(path,))

    opened = TraceOpening(trace_file, None, read=read).run()
    assert asked == [False]
    assert opened.record_id is None and opened.history_note == "no run history is open: the trace is shown, not kept"


def test_sections_of_a_folder_name_their_files():
    page = trace_page(TraceReport("/job", (rank_report(0, file="/job/x.json"), rank_report(0, file="/job/y.json"))), "")
    assert [section.title for section in page.sections] == ["Rank 0 · NVIDIA A100-SXM4-80GB · x.json",
                                                            "Rank 0 · NVIDIA A100-SXM4-80GB · y.json"]
    assert page.slowest.startswith("Slowest rank: none named: rank 0 appears in more than one file")


def test_the_page_says_what_the_host_was_in_while_the_gpu_waited_for_it():
    rank = rank_report(host_wait_seconds=0.010, host_wait_calls=(NamedSeconds("cudaFree", 0.006),
                                                                 NamedSeconds("cudaMemsetAsync", 0.00001)))
    (section,) = trace_page(TraceReport("/t.json", (rank,)), "").sections
    assert ("While the GPU waited for the host (10.0 ms), the host was in: cudaFree 60% of that wait"
            in section.facts)  # a call that rounds to 0 % left out


def test_the_gpu_time_bar_says_what_window_it_is_over():
    (section,) = trace_page(TraceReport("/t.json", (rank_report(),)), "").sections
    assert section.gpu_time_title == "GPU time over the steps"
    no_steps = rank_report(steps=0, step_seconds=(), step_seconds_median=None, step_seconds_low=None,
                           step_seconds_high=None)
    (section,) = trace_page(TraceReport("/t.json", (no_steps,)), "").sections
    assert section.gpu_time_title == "GPU time over the first to the last GPU event"


def test_two_long_kernel_names_that_differ_at_the_end_are_told_apart():
    template = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_" + "x" * 200
    kernels = (NamedSeconds(template + "128x64_nn, 3, true>", 0.2), NamedSeconds(template + "64x64_tn, 4, false>", 0.1))
    (section,) = trace_page(TraceReport("/t/t.json", (rank_report(0, top_kernels=kernels),)), "").sections
    first, second = (name for name, _ in section.top_kernels[:2])
    assert first != second and len(first) == len(second) == 110
    assert first.startswith("void cutlass::Kernel<") and first.endswith("128x64_nn, 3, true>") and "…" in first


def test_a_folder_of_thousands_draws_the_first_ranks_in_full_and_every_rank_in_the_table():
    """2,000 rank sections held the window 1 s while drawn: the first MAX_SECTIONS are drawn, the table has all."""
    from workbench.controller.trace_page import MAX_SECTIONS

    report = TraceReport("/job", tuple(rank_report(number, file=f"/job/rank-{number}.json") for number in range(2000)))
    page = trace_page(report, "")
    assert len(page.sections) == MAX_SECTIONS and len(page.ranks_rows) == 2000
    assert page.notes[-1].startswith(f"The first {MAX_SECTIONS} of the 2,000 reports are drawn in full below")
    few = trace_page(TraceReport("/job", report.ranks[:3]), "")
    assert len(few.sections) == 3 and not few.notes


H100_INPUT_BOUND = Path(__file__).resolve().parents[1] / "trace_analysis" / "data" / "h100" / \
    "h100-input-bound.pt.trace.json.gz"


def test_the_analysis_says_its_phase_and_a_cancel_during_it_ends_it_at_its_next_stage(tmp_path, monkeypatch):
    """After the bytes, the figures take seconds on a large trace (12 of 22 s on 174 MB): the bar stood at "reading
    100%", and Cancel or a closed window waited for all of them (19 s). The phase is named, and a cancel ends the
    analysis at its next stage. Read in this process, as a folder's small files are (the window's lone file is read
    in a process of its own, killed on Cancel: test_trace_opening_in_a_process.py)."""
    from workbench.controller import trace_opening
    from workbench.trace_analysis import ranks

    opening = TraceOpening(H100_INPUT_BOUND, tmp_path / "home", read=read_with_findings)
    phases, later_stages = [], []
    breakdown = ranks.timeline.analyse_sorted

    def cancelled_mid_analysis(*args, **kwargs):
        phases.append(opening.progress().phase)
        opening.cancel()  # Cancel pressed, or the window closed, while the figures are worked out
        return breakdown(*args, **kwargs)

    monkeypatch.setattr(ranks.timeline, "analyse_sorted", cancelled_mid_analysis)
    monkeypatch.setattr(ranks.hta_rules, "hta_figures", lambda *args, **kwargs: later_stages.append(1) or (None, None))
    with pytest.raises(TraceCancelled):
        opening.run()
    assert phases == [trace_opening.ANALYSING]
    assert later_stages == []  # the stages after the cancel did not run
    assert not (tmp_path / "home").exists() or HistoryStore.open(tmp_path / "home").list_runs() == []
