"""Real two-rank DDP jobs over gloo on a CPU (tests/trace_analysis/data/gloo, scripts/make_gloo_rank_traces.py),
read as a folder of ranks: each rank numbered by its distributedInfo or its file's name, the collectives read on the
host (no GPU figures: null with the reason, never 0), the rank the other waits for named only beyond the steps'
jitter, and a cut rank file left out with a note."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trace_builders import op, step, trace, write
from workbench.cli import main
from workbench.trace_analysis import read_report
from workbench.trace_analysis.comparing import straggler
from workbench.trace_analysis.report_text import report_lines

GLOO = Path(__file__).resolve().parent / "data" / "gloo"
JOBS = ("gloo-balanced", "gloo-straggler", "gloo-unnamed")


@pytest.mark.parametrize("job", JOBS)
def test_each_jobs_two_ranks_are_read_numbered_and_without_gpu_figures(job):
    report = read_report(GLOO / job)
    assert [rank.rank for rank in report.ranks] == [0, 1] and not report.notes
    for rank in report.ranks:
        assert rank.rank_named and rank.steps == 3 and rank.cpu_only
        assert rank.compute_share is None and rank.communication_share is None and rank.idle_share is None
        assert any(note.startswith("a CPU-only trace") for note in rank.notes)
        # gloo's collectives are the host's: DDP's all-reduce on gloo's threads, a wait in every step
        assert rank.communication_by_step is not None and len(rank.communication_by_step) == 3
        assert all(seconds > 0 for seconds in rank.communication_by_step)
        assert "gloo:all_reduce" in [item.name for item in rank.top_host_ops]


def test_files_under_the_handlers_default_names_take_their_ranks_from_distributedinfo():
    """<host>_<pid>.<time>.pt.trace.json.gz names no rank: only Kineto's distributedInfo does."""
    report = read_report(GLOO / "gloo-unnamed")
    assert all("rank" not in Path(rank.file).name for rank in report.ranks)
    assert all(rank.rank_named for rank in report.ranks)
    assert not straggler(report.ranks).startswith("none named:")  # one job's ranks, so held against each other


def test_the_straggler_is_named_by_the_wait_of_the_rank_that_waited_for_it():
    """Rank 1 sorts a million floats before each backward: rank 0 waits for it in DDP's all-reduce most of each
    step, while the step times match."""
    report = read_report(GLOO / "gloo-straggler")
    verdict = straggler(report.ranks)
    assert verdict.startswith("rank 1, by the others' wait:") and "in 3 of the 3 steps" in verdict
    rank0, rank1 = report.ranks
    assert rank0.top_host_ops[0].name == "gloo:all_reduce"  # where rank 0's time went, in its own report
    assert rank1.top_host_ops[0].name == "aten::sort"  # and what rank 1 did instead
    assert all(waited - waiting > 0.5 * step for waited, waiting, step in
               zip(rank0.communication_by_step or (), rank1.communication_by_step or (), rank0.step_seconds))


def test_a_balanced_jobs_jitter_names_no_straggler():
    """Both ranks do the same work; on a loaded 2-core machine rank 0 still waited 4.4 ms a step (20 % of the step)
    longer than rank 1, but by 2.2 ms in one step, within the steps' own spread (2.3 ms). Named by that total alone (10 % of the step),
    it read "rank 1, by the others' wait"."""
    verdict = straggler(read_report(GLOO / "gloo-balanced").ranks)
    assert verdict.startswith("none stands out: rank 1 spends"), verdict
    assert "in only 2 of the 3 steps: within the steps' jitter" in verdict


def test_a_wait_that_comes_and_goes_between_steps_names_no_straggler(tmp_path):
    """Rank 0 waits 8 ms in two steps of five and 1 ms in the others: its total is longer by far more than a tenth
    of the step, but in three steps of five it waits as long as rank 1."""
    (tmp_path / "job").mkdir()
    for rank, waits in enumerate([(8000, 1000, 8000, 1000, 1000), (1000,) * 5]):
        events = []
        for number, wait_us in enumerate(waits):
            begin = number * 10_000
            events += [step(number + 1, begin, 10_000), op("aten::mm", begin + 10, 500),
                       op("gloo:all_reduce", begin + 600, wait_us, tid=7, cat="user_annotation")]
        write(tmp_path / "job" / f"rank-{rank}.json", trace(events))
    verdict = straggler(read_report(tmp_path / "job").ranks)
    assert verdict.startswith("none stands out: rank 1 spends 1 ms a step in collectives"), verdict
    assert "in only 2 of the 5 steps" in verdict


def test_a_cut_rank_file_is_left_out_with_a_note_and_the_other_rank_read(capsys):
    report = read_report(GLOO / "gloo-cut")
    (rank,) = report.ranks
    assert rank.rank == 0 and rank.steps == 3
    left_out, lacking = report.notes
    assert left_out.startswith("left out:") and "rank1." in left_out and "truncated" in left_out
    assert lacking == ("the files' distributedInfo names a job of 2 ranks (world_size); rank 1 has no file read here "
                       "(not written, or left out above)")
    assert "note: left out:" in "\n".join(report_lines(report))
    assert main(["trace", str(GLOO / "gloo-cut"), "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out.splitlines()[-1])
    assert [entry["rank"] for entry in data["ranks"]] == [0]
    assert "left out:" in err and "truncated" in err
    # a tool reading the JSON alone is told of the rank left out, not shown one rank and no word
    assert data["notes"] == list(report.notes) and data["slowest"] is None


def test_the_json_of_a_folder_names_its_slowest_rank_as_the_text_does(capsys):
    assert main(["trace", str(GLOO / "gloo-straggler"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert data["slowest"].startswith("rank 1, by the others' wait")
    assert data["slowest"] == straggler(read_report(GLOO / "gloo-straggler").ranks)


@pytest.mark.parametrize("job", [*JOBS, "gloo-cut"])
def test_the_cli_reads_each_folder_in_text_and_json_with_no_figure_made_up(capsys, job):
    assert main(["trace", str(GLOO / job)]) == 0
    text = capsys.readouterr().out
    assert "GPU time: no GPU work read from this trace" in text
    # a rank with no GPU work is not titled "unknown" (a GPU that could not be named): none was read
    assert "rank 0 · no GPU work read" in text and "unknown" not in text
    assert main(["trace", str(GLOO / job), "--json"]) == 0
    for entry in json.loads(capsys.readouterr().out.splitlines()[-1])["ranks"]:
        assert entry["compute_share"] is None and entry["communication_share"] is None
        assert entry["unavailable_reasons"]["communication_share"] == "no GPU work read from this trace"
        assert entry["device"] == "unknown"  # the contract's value where the trace names no device


def test_a_folder_missing_one_ranks_file_reads_the_other(tmp_path):
    """A crashed job may leave one rank's file and not the other's."""
    (kept,) = (GLOO / "gloo-balanced").glob("rank1.*")
    shutil.copy(kept, tmp_path / kept.name)
    report = read_report(tmp_path)
    assert [rank.rank for rank in report.ranks] == [1]
    assert straggler(report.ranks) == "n/a (fewer than two ranks with steps)"
    # the job's other rank is said to be lacking: "1 rank" alone read as the whole job
    assert report.notes == ("the files' distributedInfo names a job of 2 ranks (world_size); rank 0 has no file read "
                            "here (not written, or not in this folder)",)


def job_folder(folder: Path, named: dict[int, dict]) -> Path:
    """Rank files of three steps each, their heads' distributedInfo as given, by rank."""
    folder.mkdir()
    for rank, info in named.items():
        events = [step(number + 1, number * 1000, 1000) for number in range(3)]
        write(folder / f"rank-{rank}.json", trace(events, distributedInfo=info))
    return folder


def test_a_job_lacking_a_ranks_file_names_the_rank_and_that_the_slowest_is_among_those_read(tmp_path):
    report = read_report(job_folder(tmp_path / "job", {rank: {"backend": "nccl", "rank": rank, "world_size": 4}
                                                       for rank in (0, 1, 3)}))
    assert report.notes == ("the files' distributedInfo names a job of 4 ranks (world_size); rank 2 has no file read "
                            "here (not written, or not in this folder): the slowest rank is named among the 3 read "
                            "only",)
    # one rank asked for: the others are not missed
    assert not any("world_size" in note for note in read_report(tmp_path / "job", rank=1).notes)


@pytest.mark.parametrize("infos, words", [
    ({0: {"rank": 0, "world_size": 10**12}}, "ranks 1, 2, 3, 4, 5, 6, 7, 8 and 999,999,999,991 more have"),
    ({0: {"rank": 0, "world_size": 2}, 1: {"rank": 1, "world_size": 4}}, None),  # two jobs' files: none known
    ({0: {"rank": 0, "world_size": 3}, 1: {"rank": 1}}, None),  # a file names no world: its job is not known
    ({0: {"rank": 0, "world_size": 2}, 1: {"rank": 1, "world_size": 2}}, None),  # every rank there
    ({0: {"rank": 5, "world_size": 2}}, None),  # a rank outside its world: no job read from it
], ids=["a-world-of-a-trillion", "two-world-sizes", "no-world-size", "all-there", "rank-outside-the-world"])
def test_ranks_lacking_are_named_only_for_one_job_known_and_never_listed_one_by_one(tmp_path, infos, words):
    notes = [note for note in read_report(job_folder(tmp_path / "job", infos)).notes if "world_size" in note]
    if words is None:
        assert not notes
    else:
        (note,) = notes
        assert words in note


def test_a_collective_on_several_threads_at_once_is_said_to_be_summed_over_them():
    """DDP's two buckets all-reduce at once on gloo's two threads: rank 0's gloo:all_reduce reads 780 ms of self
    time over 472 ms of steps, which without a word read as more time than was traced."""
    from workbench.controller.trace_page import trace_page

    report = read_report(GLOO / "gloo-straggler")
    rank0, rank1 = report.ranks
    assert rank0.top_host_ops[0].seconds > rank0.window_seconds
    words = ("host op time is summed over the threads each ran on: longer than the 471.6 ms of the steps, "
             "gloo:all_reduce (780.0 ms) ran on several threads at once")
    lines = report_lines(report)
    top = lines.index(next(line for line in lines if line.startswith("  top host ops by self time: gloo:")))
    assert lines[top + 1] == f"  {words}"  # said under the figure it is of
    assert sum(words in line for line in lines) == 1  # rank 1's collectives fit within its steps: nothing said
    first, second = trace_page(report, "").sections
    assert words[0].upper() + words[1:] in first.facts and not any("summed" in fact for fact in second.facts)


def test_one_long_step_among_many_does_not_hide_a_rank_waited_for_in_every_step(tmp_path):
    """Twenty steps of 10 ms, one of them 100 ms (a checkpoint's): rank 0 waits 6 ms longer than rank 1 in every
    step. Held against the steps' fastest to slowest (90 ms), no wait would ever clear it; their 10th to 90th
    percentile is their jitter."""
    (tmp_path / "job").mkdir()
    for rank, wait_us in enumerate([7000, 1000]):
        events, begin = [], 0
        for number in range(20):
            length = 100_000 if number == 10 else 10_000
            events += [step(number + 1, begin, length), op("aten::mm", begin + 10, 500),
                       op("gloo:all_reduce", begin + length - wait_us - 100, wait_us, tid=7, cat="user_annotation")]
            begin += length
        write(tmp_path / "job" / f"rank-{rank}.json", trace(events))
    verdict = straggler(read_report(tmp_path / "job").ranks)
    assert verdict.startswith("rank 1, by the others' wait:") and "in 20 of the 20 steps" in verdict, verdict
