"""Records of kind "trace": kept once per file, listed, compared and exported beside the runs. No Qt."""

from __future__ import annotations

import csv
import sqlite3
from dataclasses import replace

import pytest
from builders import record_complete_run, trace_rank as rank, trace_record as trace

from workbench.config import FIELD_NAMES, RunConfig
from workbench.history.compare import TRACE_HAS_NO_SETTINGS, compare_runs
from workbench.history.database import DATABASE_NAME
from workbench.history.export import RUNS_CSV_COLUMNS, export_runs_csv
from workbench.history.schema import MIGRATIONS, SCHEMA_VERSION
from workbench.history.records import records_count_text
from workbench.history.store import HistoryStore, _app_version
from workbench.history.trace_records import KeptBefore, TraceRecord


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path / "home") as opened:
        yield opened


def test_a_trace_is_kept_as_a_record_of_its_own_kind_with_its_file_and_figures(store):
    run_id, kept_before = store.add_trace(trace())
    assert kept_before is None
    record = store.get_run(run_id)
    assert record.is_trace and record.record_kind == "trace"
    assert record.name == "rank0.json.gz"
    assert record.status == "finished"
    assert record.summary.device_name == "NVIDIA A100-SXM4-80GB"
    assert record.summary.world_size == 2  # its ranks: the processes that trained together
    assert record.trace == trace()  # path, size, sha256, every rank's figures and findings, the notes
    assert [listed.id for listed in store.list_runs()] == [run_id]


def test_a_folder_of_one_ranks_profiling_cycles_is_one_process_not_one_per_file(store):
    """Three cycles of rank 0 (a file each) were kept as world_size 3; a record kept so still reads 1."""
    cycles = trace(sha256="0c" * 32, ranks=[rank(0, 0.5, 0.25), rank(0, 0.4, 0.3), rank(0, 0.45, 0.2)])
    run_id, _ = store.add_trace(cycles)
    assert store.get_run(run_id).summary.world_size == 1
    with store._transaction() as conn:
        assert conn.execute("SELECT world_size FROM runs WHERE id = ?", (run_id,)).fetchone()[0] == 1
        conn.execute("UPDATE runs SET world_size = 3 WHERE id = ?", (run_id,))  # as such a record was kept
    assert store.get_run(run_id).summary.world_size == 1
    two_ranks_twice = trace(sha256="0d" * 32, ranks=[rank(0, 0.5, 0.25), rank(0, 0.4, 0.3), rank(1, 0.45, 0.2),
                                                     rank(1, 0.45, 0.2)])
    assert store.get_run(store.add_trace(two_ranks_twice)[0]).summary.world_size == 2


def test_the_same_bytes_opened_again_give_the_record_already_kept(store):
    first, _ = store.add_trace(trace())
    again, kept_before = store.add_trace(trace(path="/elsewhere/copy.json.gz"))
    assert (again, kept_before) == (first, KeptBefore(figures_replaced=False, app_version=_app_version()))
    assert store.get_run(first).trace == trace()  # its path is the one first opened
    other, kept_before = store.add_trace(trace(sha256="cd" * 32))
    assert other != first and kept_before is None
    assert len(store.list_runs()) == 2


def test_the_same_bytes_analysed_otherwise_now_bring_the_record_up_to_date(store, tmp_path):
    """Kept by an older workbench whose analysis gave other figures (a rule fixed since, a figure added), the
    record kept its first figures when opened again: the Trace tab showed this analysis's, the Runs tab, its
    comparisons and the CSV the older one's of the same bytes. The record takes the new figures and app_version;
    its id, name, note, tags and path stay the user's."""
    first, _ = store.add_trace(trace())
    store.rename(first, "before the fix")
    store.set_note(first, "the baseline")
    store.set_tags(first, ["baseline"])
    with store._transaction() as conn:  # as an older workbench kept it
        conn.execute("UPDATE runs SET app_version = '0.0.1' WHERE id = ?", (first,))
    ranks = (dict(rank(0, 0.5, 0.25), unavailable_reasons={"dataloader_share": "no DataLoader spans"}),
             rank(1, 0.375, 0.5))
    again, kept_before = store.add_trace(trace(path="/elsewhere/copy.json.gz", ranks=ranks))
    assert (again, kept_before) == (first, KeptBefore(figures_replaced=True, app_version="0.0.1"))
    record = store.get_run(first)
    assert record.trace == trace(ranks=ranks)  # this analysis's figures, at the path first opened
    assert (record.name, record.note, record.tags) == ("before the fix", "the baseline", ("baseline",))
    assert record.app_version == _app_version()
    export_runs_csv(store, tmp_path / "runs.csv")
    with open(tmp_path / "runs.csv", encoding="utf-8", newline="") as file:
        (row,) = list(csv.DictReader(file))
    assert row["trace_compute_share"] == "0.5;0.375"
    assert len(store.list_runs()) == 1


def test_runs_kept_before_trace_records_read_as_runs(tmp_path):
    path = tmp_path / "home" / DATABASE_NAME
    path.parent.mkdir()
    conn = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[: SCHEMA_VERSION - 1]:
        migration(conn)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    conn.execute("INSERT INTO runs (name, status, source, started_at, config_json) "
                 "VALUES ('old', 'finished', 'cli', 0, '{}')")
    conn.close()
    with HistoryStore.open(tmp_path / "home") as store:
        (record,) = store.list_runs()
        assert record.record_kind == "run" and not record.is_trace and record.trace is None


def test_a_trace_record_whose_stored_figures_cannot_be_read_still_lists(store):
    run_id, _ = store.add_trace(trace())
    with store._transaction() as conn:
        conn.execute("UPDATE runs SET trace_json = 'not json' WHERE id = ?", (run_id,))
    record = store.get_run(run_id)
    assert record.is_trace and record.trace is None
    assert compare_runs([record])  # and the comparison does not fail on it


def test_side_by_side_a_trace_shows_its_own_figures_and_no_settings_or_run_figures(store):
    run = store.get_run(record_complete_run(store, RunConfig(device="cpu")))
    traced = store.get_run(store.add_trace(trace())[0])
    rows = {(row.section, row.key): row for row in compare_runs([run, traced])}
    assert rows["Run", "record_kind"].texts == ("run", "trace")
    assert all(rows["Settings", name].texts[1] == "not used" for name in FIELD_NAMES)
    assert rows["Settings", "batch_size"].notes[1] == TRACE_HAS_NO_SETTINGS
    assert rows["Results", "steps"].texts[1] == ""  # the trace's steps are not a run's steps
    assert rows["Results", "images_per_sec"].texts[1] == ""
    assert rows["Trace", "trace.sha256"].texts == ("", "ab" * 32)
    assert rows["Trace", "trace.rank0.compute_share"].texts == ("", "50.0 %")
    assert rows["Trace", "trace.rank1.idle_share"].texts == ("", "50.0 %")
    assert rows["Trace", "trace.rank1.idle_share"].label == "rank 1: idle"
    assert rows["Trace", "trace.rank0.gpu_span.idle_share"].texts == ("", "25.0 %")
    assert rows["Trace", "trace.rank0.step_seconds_median"].texts == ("", "250.0 ms")
    assert rows["Trace", "trace.rank0.findings"].texts == ("", "input_bound")
    assert rows["Trace", "trace.rank1.findings"].texts == ("", "none")
    assert rows["Environment", "device_name"].texts[1] == "NVIDIA A100-SXM4-80GB"
    # what one of them does not hold is no difference: a trace's settings and run figures, a run's trace figures
    assert not any(row.differs for row in rows.values() if row.section in ("Settings", "Results", "Trace"))


def test_a_traces_environment_it_does_not_hold_is_no_difference_from_a_runs(store):
    """A trace record knows its GPU's name, not the device type, torch, Python or machine it was taken on: its blank
    cells were flagged as differing from the run's."""
    run = store.get_run(record_complete_run(store, RunConfig(device="cpu")))
    traced = store.get_run(store.add_trace(trace())[0])
    rows = {(row.section, row.key): row for row in compare_runs([run, traced])}
    assert rows["Environment", "torch_version"].texts == ("2.14.1", "")
    assert rows["Environment", "hostname"].texts[1] == ""
    # the devices' names are both held: a CPU's beside an A100's is a difference
    assert [key for (section, key), row in rows.items() if section == "Environment" and row.differs] == [
        "device_name"]


def test_among_runs_and_traces_each_row_compares_the_records_that_hold_it(store):
    small = store.get_run(record_complete_run(store, RunConfig(device="cpu", batch_size=64)))
    large = store.get_run(record_complete_run(store, RunConfig(device="cpu", batch_size=512)))
    first = store.get_run(store.add_trace(trace())[0])
    other = TraceRecord(path="/after.json.gz", size_bytes=1, sha256="ef" * 32,
                        ranks=(rank(0, 0.75, 0.05), rank(1, 0.25, 0.5)))
    second = store.get_run(store.add_trace(other)[0])
    rows = {(row.section, row.key): row for row in compare_runs([small, first, large, second])}
    differing_settings = [key for (section, key), row in rows.items() if section == "Settings" and row.differs]
    assert differing_settings == ["batch_size"]  # the runs' one difference; the traces hold none
    assert rows["Trace", "trace.rank0.compute_share"].differs  # 50 % and 75 %: the traces differ
    assert not rows["Trace", "trace.rank1.idle_share"].differs


def test_two_traces_side_by_side_flag_the_figures_that_differ(store):
    before = store.get_run(store.add_trace(trace())[0])
    changed = TraceRecord(path="/after.json.gz", size_bytes=1, sha256="ef" * 32,
                          ranks=(rank(0, 0.75, 0.05), rank(1, 0.25, 0.5)))
    after = store.get_run(store.add_trace(changed)[0])
    compared = compare_runs([before, after])
    assert {row.section for row in compared} == {"Run", "Trace", "Environment"}  # no settings, no run figures
    assert next(row for row in compared if row.key == "duration_seconds").texts == ("", "")
    rows = {row.key: row for row in compared if row.section == "Trace"}
    assert rows["trace.rank0.compute_share"].differs
    assert not rows["trace.rank1.compute_share"].differs
    assert next(row for row in compared if row.key == "status").texts == ("opened", "opened")  # not "finished"
    assert not rows["trace.path"].compared  # every record has its own path


def test_the_csv_has_a_trace_row_with_its_file_and_each_ranks_figures(store, tmp_path):
    run_id = record_complete_run(store, RunConfig(device="cpu"))
    trace_id, _ = store.add_trace(trace())
    assert records_count_text(export_runs_csv(store, tmp_path / "runs.csv")) == "1 run and 1 trace"
    with open(tmp_path / "runs.csv", encoding="utf-8", newline="") as file:
        header, *lines = list(csv.reader(file))
    assert tuple(header) == RUNS_CSV_COLUMNS
    rows = {int(line[0]): dict(zip(header, line)) for line in lines}
    run, traced = rows[run_id], rows[trace_id]
    assert run["record_kind"] == "run" and run["trace_sha256"] == "" and run["batch_size"] != ""
    assert traced["record_kind"] == "trace"
    assert traced["trace_path"] == "/data/traces/rank0.json.gz"
    assert traced["trace_size_bytes"] == "3000000"
    assert traced["trace_sha256"] == "ab" * 32
    assert traced["trace_rank"] == "0;1"
    assert traced["trace_compute_share"] == "0.5;0.25"
    assert traced["trace_dataloader_share"] == ";"  # not read on either rank: empty, never 0
    assert traced["trace_gpu_span_idle_share"] == "0.25;0.5"
    assert traced["trace_findings"] == "input_bound;none"
    assert traced["device_name"] == "NVIDIA A100-SXM4-80GB"
    assert all(traced[name] == "" for name in FIELD_NAMES)  # its settings are its script's
    assert traced["steps"] == "" and traced["wall_seconds"] == "" and traced["images_per_sec"] == ""


def test_a_run_after_a_trace_is_named_against_the_run_before_it_not_the_trace(store):
    config = RunConfig(device="cpu", batch_size=32)
    record_complete_run(store, config)
    store.add_trace(trace())
    recorder = store.start_run(config)
    assert recorder.name.endswith(": same settings")  # the trace's (default) settings are not the run before


def test_side_by_side_ranks_are_paired_by_their_number_not_their_place(store):
    """A lone rank-1 file beside a folder's ranks 0 and 1: its figures sit beside the folder's rank 1, and the
    folder's rank 0 beside a blank; a folder of files from different jobs repeats a rank, each entry its own row."""
    lone = store.get_run(store.add_trace(trace(sha256="01" * 32, ranks=[rank(1, 0.35, 0.4)]))[0])
    folder = store.get_run(store.add_trace(trace(sha256="02" * 32, ranks=[rank(0, 0.17, 0.55), rank(1, 0.22, 0.5)]))[0])
    mixed = store.get_run(store.add_trace(trace(sha256="03" * 32, ranks=[rank(0, 0.1, 0.2), rank(0, 0.3, 0.4)]))[0])
    rows = {row.key: row for row in compare_runs([lone, folder, mixed]) if row.section == "Trace"}
    assert rows["trace.rank1.compute_share"].texts == ("35.0 %", "22.0 %", "")
    assert rows["trace.rank1.compute_share"].label == "rank 1: compute"
    assert rows["trace.rank0.compute_share"].texts == ("", "17.0 %", "10.0 %")
    assert rows["trace.rank0.2.compute_share"].texts == ("", "", "30.0 %")
    assert rows["trace.rank0.2.compute_share"].label == "rank 0 (entry 2): compute"
    ordered = [row.key for row in compare_runs([lone, folder, mixed]) if row.label.endswith(": compute")]
    assert ordered == ["trace.rank0.compute_share", "trace.rank0.2.compute_share", "trace.rank1.compute_share"]


def test_a_rank_numbered_by_its_files_place_is_marked_where_it_is_set_beside_another(store):
    """A folder's files that name no rank (numbered 0 and 1 by their place) beside a job's ranks 0 and 1: the rows
    read "rank 1: compute" as if they were the same rank, which the step line says they are not known to be. A rank
    beside a blank, and one process each, are not marked; the row keys stay."""
    def unnamed(number):
        return dict(rank(number, 0.3, 0.4), rank_named=False)

    folder = replace(trace(sha256="07" * 32, ranks=[unnamed(0), unnamed(1)]), files=("a.json", "b.json"))
    by_place = store.get_run(store.add_trace(folder)[0])
    named = store.get_run(store.add_trace(trace(sha256="08" * 32, ranks=[rank(1, 0.2, 0.5), rank(2, 0.2, 0.5)]))[0])
    rows = {row.key: row for row in compare_runs([by_place, named]) if row.section == "Trace"}
    marked = rows["trace.rank1.compute_share"]
    assert marked.label == f"rank 1 (#{by_place.id}'s file names no rank): compute"
    assert marked.tooltip == (
        f"no distributedInfo, no rank-N in the file's name: #{by_place.id}'s is numbered 1 by its place among its "
        "folder's files; so it is set beside the other traces' rank 1 by that number alone, not known to be the "
        "same rank")
    assert marked.differs  # the figures differ: the label says whose they are
    assert rows["trace.rank0.compute_share"].label == "rank 0: compute"  # beside nothing: paired with no rank
    cycles = [store.get_run(store.add_trace(trace(sha256=sha * 32, ranks=[unnamed(0), unnamed(0)]))[0])
              for sha in ("09", "0a")]  # one process's two profiling cycles each: one number each side
    assert not any("no rank" in row.label for row in compare_runs(cycles))
    lone = store.get_run(store.add_trace(trace(sha256="0b" * 32, ranks=[unnamed(0)]))[0])  # a file read alone
    rows = {row.key: row for row in compare_runs([lone, named, by_place]) if row.section == "Trace"}
    assert rows["trace.rank0.compute_share"].label == (
        f"rank 0 (#{lone.id}'s and #{by_place.id}'s files name no rank): compute")
    assert f"#{lone.id}'s is numbered 0 as the only file read; #{by_place.id}'s is numbered 0 by its place" in rows[
        "trace.rank0.compute_share"].tooltip


def test_one_rank_each_is_set_side_by_side_whatever_its_number(store):
    """As `workbench trace BEFORE AFTER` compares two single-rank traces: a rank-1 file beside a rank-0 file. The
    label names their numbers in the columns' order (it said "rank 0/1" above rank 1's figures, then rank 0's)."""
    one = store.get_run(store.add_trace(trace(sha256="04" * 32, ranks=[rank(1, 0.35, 0.4)]))[0])
    zero = store.get_run(store.add_trace(trace(sha256="05" * 32, ranks=[rank(0, 0.2, 0.5)]))[0])
    rows = {row.key: row for row in compare_runs([one, zero]) if row.section == "Trace"}
    assert rows["trace.rank1/0.compute_share"].texts == ("35.0 %", "20.0 %")
    assert rows["trace.rank1/0.compute_share"].label == "rank 1/0: compute"
    rows = {row.key: row for row in compare_runs([zero, one]) if row.section == "Trace"}
    assert rows["trace.rank0/1.compute_share"].texts == ("20.0 %", "35.0 %")
    again = store.get_run(store.add_trace(trace(sha256="06" * 32, ranks=[rank(1, 0.3, 0.4)]))[0])
    rows = {row.key: row for row in compare_runs([one, zero, again]) if row.section == "Trace"}
    assert rows["trace.rank1/0.compute_share"].texts == ("35.0 %", "20.0 %", "30.0 %")  # each number once


def test_records_are_counted_by_their_kinds_in_words(store):
    run = store.get_run(record_complete_run(store, RunConfig(device="cpu")))
    traced = store.get_run(store.add_trace(trace())[0])
    assert records_count_text([]) == "0 runs"
    assert records_count_text([run]) == "1 run"
    assert records_count_text([run, run]) == "2 runs"
    assert records_count_text([traced]) == "1 trace"
    assert records_count_text([run, traced, traced]) == "1 run and 2 traces"


def test_a_trace_without_steps_beside_one_with_says_which_window_each_share_is_over(store):
    """A trace without ProfilerStep#N has its shares over its traced window; beside one with steps the Runs tab's
    comparison read "compute 17.1 % | 0.1 %" and "DataLoader share of step 2.7 % | 1.3 %" as a difference, the
    second over the whole trace, and the step time blank without a word."""
    with_steps = store.get_run(store.add_trace(trace())[0])
    without = TraceRecord(path="/benchmark.json.gz", size_bytes=1, sha256="cd" * 32,
                          ranks=(dict(rank(0, 0.001, 0.99, steps=0), step_seconds_median=None, step_seconds_low=None,
                                      step_seconds_high=None, dataloader_share=0.013),))
    rows = {row.key: row for row in compare_runs([with_steps, store.get_run(store.add_trace(without)[0])])}
    compute = rows["trace.rank0.compute_share"]
    assert compute.texts == ("50.0 % (over the steps)", "0.1 % (no steps: over the traced window)")
    assert not compute.differs  # over two windows: not a difference between the traces
    assert rows["trace.rank0.step_seconds_median"].texts[1] == "n/a (no ProfilerStep#N in the trace)"
    assert rows["trace.rank0.dataloader_share"].label == "rank 0: DataLoader share"
    # two traces with steps: as before, no window said, differences flagged
    other = TraceRecord(path="/after.json.gz", size_bytes=1, sha256="ef" * 32, ranks=(rank(0, 0.75, 0.05),))
    rows = {row.key: row for row in compare_runs([with_steps, store.get_run(store.add_trace(other)[0])])}
    assert rows["trace.rank0.compute_share"].texts == ("50.0 %", "75.0 %") and rows["trace.rank0.compute_share"].differs


def test_a_figure_a_trace_could_not_read_says_n_a_and_why_and_is_no_difference(store):
    """A CPU-only trace beside a GPU one in the Runs tab's comparison: its GPU shares read blank, as a cell a record
    does not hold, with no word why, and every one was flagged as differing from the GPU trace's."""
    gpu = store.get_run(store.add_trace(trace(ranks=[rank(0, 0.17, 0.64)]))[0])
    unread = dict.fromkeys(("compute_share", "communication_share", "memory_share", "idle_share",
                            "idle_for_data_share", "idle_for_host_share", "idle_kernel_wait_share",
                            "idle_other_share"))
    cpu_only = dict(rank(0, 0.0, 0.0), device="unknown", gpu_span=dict.fromkeys(("idle_share", "compute_share",
                                                                                 "non_compute_share")),
                    cpu_only=True, **unread,  # and why, as its --json entry says it (report_json)
                    unavailable_reasons=dict.fromkeys([*unread, "gpu_span"], "no GPU work read from this trace"))
    cpu = store.get_run(store.add_trace(trace(sha256="c0" * 32, ranks=[cpu_only]))[0])
    rows = {row.key: row for row in compare_runs([gpu, cpu]) if row.section == "Trace"}
    for key in ("compute_share", "idle_share", "idle_for_host_share", "gpu_span.idle_share"):
        row = rows[f"trace.rank0.{key}"]
        assert row.texts[1] == "n/a (no GPU work read from this trace)", key
        assert not row.differs, key  # unread is not a difference
    assert rows["trace.rank0.steps"].texts == ("5", "5")
    # a record kept before the workbench kept the reasons: n/a all the same, with what it knows
    older = dict(cpu_only)
    del older["unavailable_reasons"]
    kept = store.get_run(store.add_trace(trace(sha256="c1" * 32, ranks=[older]))[0])
    rows = {row.key: row for row in compare_runs([gpu, kept]) if row.section == "Trace"}
    assert rows["trace.rank0.compute_share"].texts[1] == "n/a (not read from this trace)"
    # a rank the other record lacks stays a blank: that record holds no such rank
    folder = store.get_run(store.add_trace(trace(sha256="c2" * 32, ranks=[rank(0, 0.2, 0.5), rank(1, 0.2, 0.5)]))[0])
    assert {row.key: row for row in compare_runs([gpu, folder])}["trace.rank1.compute_share"].texts == ("", "20.0 %")
