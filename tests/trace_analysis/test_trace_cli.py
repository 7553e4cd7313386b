"""`workbench trace` at the command line: real traces, the input-bound traces made on this CPU, two traces
compared, and every hostile trace as one line with exit code 2 (or a report that names what it could not read)."""

from __future__ import annotations

import gzip
import json
import os
import statistics
from pathlib import Path

import pytest

from hostile_paths import fifo_unblocked, make_fifo, make_symlink_loop
from trace_reports import CONTRACT_RANK_KEYS, null_figures
from workbench.cli import main
from workbench.engine.findings import INPUT_BOUND_WAIT

DATA = Path(__file__).resolve().parents[1] / "engine" / "data"
INPUT_HEAVY = DATA / "cpu-input-heavy-num_workers0.pt.trace.json.gz"
LOADER_KEEPS_UP = DATA / "cpu-loader-keeps-up-num_workers0.pt.trace.json.gz"
SHARED_TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
H100 = Path(__file__).resolve().parent / "data" / "h100"
BATCH_32 = H100 / "h100-launch-bound.pt.trace.json.gz"  # the MLP at batch 32, and the same at 8192 (one run)
BATCH_8192 = H100 / "h100-launch-larger-batch.pt.trace.json.gz"


def run_json(capsys, *argv: str) -> dict:
    assert main(["trace", *argv, "--json"]) == 0
    out = capsys.readouterr().out
    return json.loads(out.strip().splitlines()[-1])


def refused(capsys, *argv: str) -> str:
    """The one line a refused trace gets (exit 2, nothing on stdout)."""
    assert main(["trace", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("workbench trace: ")
    return lines[0]


# -- the input-bound finding on traces made on this CPU (issue 27, done-when 2) ------------------------------


def test_an_input_heavy_cpu_trace_gets_the_input_bound_finding_naming_num_workers(capsys):
    (rank,) = run_json(capsys, str(INPUT_HEAVY))["ranks"]
    assert rank["compute_share"] is None  # a CPU-only trace: no GPU figure is made up
    (finding,) = [f for f in rank["findings"] if f["kind"] == "input-bound"]
    assert finding["figure"] == rank["dataloader_share"] and finding["figure"] >= INPUT_BOUND_WAIT
    assert finding["threshold"] == INPUT_BOUND_WAIT
    assert "num_workers=" in finding["change"]


def test_a_trace_whose_loader_keeps_up_gets_no_input_bound_finding(capsys):
    (rank,) = run_json(capsys, str(LOADER_KEEPS_UP))["ranks"]
    assert rank["dataloader_share"] is not None and rank["dataloader_share"] < INPUT_BOUND_WAIT
    assert [f for f in rank["findings"] if f["kind"] == "input-bound"] == []


def test_the_text_report_of_a_cpu_only_trace_says_so_and_names_the_change(capsys):
    assert main(["trace", str(INPUT_HEAVY)]) == 0
    captured = capsys.readouterr()
    assert "a CPU-only trace" in captured.out
    assert "inside the DataLoader's __next__" in captured.out and "Try: DataLoader(" in captured.out
    assert "note: a CPU-only trace" in captured.out  # the report names what it could not read


# -- two traces side by side ----------------------------------------------------------------------------------


def test_two_traces_are_compared_step_time_categories_and_ops(capsys):
    assert main(["trace", str(INPUT_HEAVY), str(LOADER_KEEPS_UP)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("before: ") and "after:  " in out
    assert "shorter steps in these two traces: a gain" in out
    assert "host ops that changed most" in out and "aten::sort" in out
    assert "findings: before: input-bound (95%); after: none" in out


def test_a_trace_against_itself_is_not_a_gain(capsys):
    data = run_json(capsys, str(LOADER_KEEPS_UP), str(LOADER_KEEPS_UP))
    assert set(data) == {"before", "after", "comparison"}
    (comparison,) = data["comparison"]
    assert comparison["verdict"] == "within_noise"


@pytest.mark.parametrize("options", [["--json"], ["--rank", "0"], ["--batch-size", "32", "64"]])
def test_options_between_the_two_paths_are_read_as_before_them(capsys, options):
    assert main(["trace", *options, str(LOADER_KEEPS_UP), str(INPUT_HEAVY)]) == 0
    expected = capsys.readouterr()
    assert main(["trace", str(LOADER_KEEPS_UP), *options, str(INPUT_HEAVY)]) == 0
    between = capsys.readouterr()
    assert between.err == expected.err
    # the same report, but for the time each read took (a JSON "seconds" aside, none is printed)
    assert between.out.splitlines()[0] == expected.out.splitlines()[0]
    assert len(between.out.splitlines()) == len(expected.out.splitlines())


def test_an_unknown_flag_between_the_paths_is_still_refused(capsys):
    assert "unknown flag --jsn" in refused(capsys, str(LOADER_KEEPS_UP), "--jsn", str(INPUT_HEAVY))


def test_folders_of_one_processs_cycles_compare_cycle_with_cycle(capsys, tmp_path):
    """Two folders, each one process's two profiling cycles (one rank in two files): the n-th file of each is
    compared with the other's n-th, and a third cycle with nothing to be held against is said, not paired with
    another (the rank's last file was paired with each: cycle 1's 1 ms steps "3.00×" against cycle 2's 3 ms)."""
    from trace_builders import step, trace, write as write_trace

    for folder, cycles in (("before", (1.0, 3.0)), ("after", (1.0, 3.0, 2.0))):
        (tmp_path / folder).mkdir()
        for cycle, milliseconds in enumerate(cycles):
            steps = [step(n, 100_000 * cycle + n * milliseconds * 1000, milliseconds * 1000) for n in range(5)]
            write_trace(tmp_path / folder / f"host_5.{cycle + 10}.pt.trace.json", trace(steps))
    data = run_json(capsys, str(tmp_path / "before"), str(tmp_path / "after"))
    assert [(entry["rank"], entry["step_time_ratio"]) for entry in data["comparison"]] == [(0, 1.0), (0, 1.0)]
    # each entry names its file: the rank's entries are otherwise told apart only by their order
    cycle_files = [f"host_5.{cycle}.pt.trace.json" for cycle in (10, 11)]
    assert [(Path(entry["file"]).name, Path(entry["after_file"]).name) for entry in data["comparison"]] == [
        (name, name) for name in cycle_files]
    assert [Path(entry["file"]).name for entry in data["after"]["ranks"]] == [*cycle_files, "host_5.12.pt.trace.json"]
    assert main(["trace", str(tmp_path / "before"), str(tmp_path / "after")]) == 0
    captured = capsys.readouterr()
    assert f"before: {tmp_path / 'before'} (rank 0, no GPU work read, host_5.11.pt.trace.json)" in captured.out
    assert "rank 0 is in more files than in the other trace: its files are compared in name order" in captured.err


def test_a_larger_batch_is_compared_by_samples_per_second_where_the_batches_are_given(capsys):
    """Batch 32 -> 8192 on the H100: the step takes as long, so by step time it is no gain; given each trace's
    samples per step, the samples per second are ~260x, a gain; without them the report says the work per step
    moved and how to compare."""
    assert main(["trace", str(BATCH_32), str(BATCH_8192)]) == 0
    out = capsys.readouterr().out
    assert "within the steps' own spread: not a gain" in out
    assert "if the batch size changed, compare samples per second with --batch-size BEFORE AFTER" in out
    assert main(["trace", str(BATCH_32), str(BATCH_8192), "--batch-size", "32", "8192"]) == 0
    out = capsys.readouterr().out
    assert "samples per second (32 then 8,192 per step)" in out and "more samples per second in these two traces: a gain" in out
    (comparison,) = run_json(capsys, str(BATCH_32), str(BATCH_8192), "--batch-size", "32", "8192")["comparison"]
    assert comparison["verdict"] == "within_noise" and comparison["samples_verdict"] == "faster"
    assert (comparison["samples_per_step_before"], comparison["samples_per_step_after"]) == (32, 8192)
    assert 200 < comparison["samples_per_second_ratio_low"] <= comparison["samples_per_second_ratio"] \
        <= comparison["samples_per_second_ratio_high"] < 300
    (plain,) = run_json(capsys, str(BATCH_32), str(BATCH_8192))["comparison"]
    assert plain["samples_per_second_ratio"] is None and plain["samples_verdict"] is None


@pytest.mark.parametrize("argv, words", [
    (["--batch-size", "32", "64"], "compares two traces: give two paths"),
    (["--batch-size", "0", "64", "second"], "expected a number from 1 up, got 0"),
])
def test_batch_sizes_without_two_traces_or_below_one_are_refused(capsys, argv, words):
    argv = [str(BATCH_32) if word == "second" else word for word in argv]
    assert words in refused(capsys, str(BATCH_32), *argv)


def test_more_than_two_paths_are_refused(capsys):
    line = refused(capsys, str(INPUT_HEAVY), str(INPUT_HEAVY), str(INPUT_HEAVY))
    assert "give one trace" in line


# -- the real GPU traces ----------------------------------------------------------------------------------------


LARGE = {"a100-training.json.gz", "v100-training.json.gz"}  # seconds each to read on a loaded 2-core machine


def shared_traces() -> list:
    if not SHARED_TRACES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no real traces at {SHARED_TRACES}"))]
    paths = sorted(SHARED_TRACES.glob("*.json.gz")) + [p for p in sorted(SHARED_TRACES.iterdir()) if p.is_dir()]
    return [pytest.param(p, id=p.name, marks=[pytest.mark.slow] if p.name in LARGE else []) for p in paths]


@pytest.mark.parametrize("path", shared_traces())
def test_every_real_trace_gives_the_contracts_keys(capsys, path):
    data = run_json(capsys, str(path))
    assert data["path"] == str(path)
    for rank in data["ranks"]:
        assert set(rank) == CONTRACT_RANK_KEYS
        assert set(rank["unavailable_reasons"]) == null_figures(rank)  # each null figure says why
        shares = [rank[k] for k in ("compute_share", "communication_share", "memory_share", "idle_share")]
        assert abs(sum(shares) - 1) < 1e-6
        for finding in rank["findings"]:
            assert set(finding) == {"kind", "text", "figure", "threshold", "change"}
            assert finding["figure"] >= finding["threshold"]


@pytest.mark.skipif(not (SHARED_TRACES / "two-ranks").is_dir(), reason="no two-rank trace")
def test_a_folder_of_ranks_sets_them_side_by_side(capsys):
    assert main(["trace", str(SHARED_TRACES / "two-ranks")]) == 0
    out = capsys.readouterr().out
    # 2 steps a rank: rank 1 is 1 % slower, too few steps to name it a straggler
    assert "ranks side by side:" in out and "slowest: none named: rank 1's median step is" in out
    (rank,) = run_json(capsys, str(SHARED_TRACES / "two-ranks"), "--rank", "1")["ranks"]
    assert rank["rank"] == 1


def steady_trace(kernel_us: float) -> dict:
    """Five 1 ms steps, each with one kernel of ``kernel_us``: two of them tell apart which file was read."""
    from trace_builders import launched, step, trace

    return trace([event for n in range(5) for event in
                  [step(n, n * 1000, 1000), *launched("k", n * 1000 + 10, n * 1000 + 20, kernel_us, n + 1)]])


def test_a_file_that_is_not_a_trace_takes_no_rank_number_from_the_traces_beside_it(capsys, tmp_path):
    """A metrics.json sorting first took number 0, so every trace after it moved up one: t0 was compared with the
    other folder's t1, and --rank 0 found no trace."""
    from trace_builders import write as write_trace

    for folder in ("with-metrics", "plain"):
        (tmp_path / folder).mkdir()
        write_trace(tmp_path / folder / "t0.json.gz", steady_trace(100))
        write_trace(tmp_path / folder / "t1.json.gz", steady_trace(700))
    (tmp_path / "with-metrics" / "a-metrics.json").write_text('{"loss": 1.0}')
    data = run_json(capsys, str(tmp_path / "with-metrics"), str(tmp_path / "plain"))
    assert [(entry["rank"], Path(entry["file"]).name, Path(entry["after_file"]).name)
            for entry in data["comparison"]] == [(0, "t0.json.gz", "t0.json.gz"), (1, "t1.json.gz", "t1.json.gz")]
    (rank,) = run_json(capsys, str(tmp_path / "with-metrics"), "--rank", "0")["ranks"]
    assert Path(rank["file"]).name == "t0.json.gz"


def test_a_file_numbered_by_its_place_is_paired_with_a_rank_of_that_number_only_with_a_caveat(capsys, tmp_path):
    """a.json and b.json name no rank: numbered 0 and 1 by their place, they were compared with the other folder's
    ranks 0 and 1 as if they were those ranks. One process each (one unranked script's file or cycles each side)
    is compared as it was, without the caveat."""
    from trace_builders import write as write_trace

    for folder, names in (("unranked", ("a.json", "b.json")), ("ranked", ("rank-0.json", "rank-1.json"))):
        (tmp_path / folder).mkdir()
        for name, kernel_us in zip(names, (100, 700)):
            write_trace(tmp_path / folder / name, steady_trace(kernel_us))
    caveat = ("the before file names no rank (no distributedInfo, no rank-N in the name): it is numbered 1 by its "
              "place among its folder's files, so it is paired with the after trace's rank 1 by that number alone")
    assert main(["trace", str(tmp_path / "unranked"), str(tmp_path / "ranked")]) == 0
    assert caveat in capsys.readouterr().out
    data = run_json(capsys, str(tmp_path / "unranked"), str(tmp_path / "ranked"))
    assert [entry["pairing_caveat"].startswith("the before file names no rank") for entry in data["comparison"]] == [
        True, True]
    assert all(entry["pairing_caveat"] is None for entry in run_json(
        capsys, str(tmp_path / "ranked"), str(tmp_path / "ranked"))["comparison"])
    for folder in ("one-before", "one-after"):  # one tensorboard_trace_handler worker's two cycles each
        (tmp_path / folder).mkdir()
        for cycle in (10, 11):
            write_trace(tmp_path / folder / f"host_5.{cycle}.pt.trace.json", steady_trace(100))
    data = run_json(capsys, str(tmp_path / "one-before"), str(tmp_path / "one-after"))
    assert [entry["pairing_caveat"] for entry in data["comparison"]] == [None, None]
    data = run_json(capsys, str(tmp_path / "unranked" / "a.json"), str(tmp_path / "ranked" / "rank-1.json"))
    assert [entry["pairing_caveat"] for entry in data["comparison"]] == [None]


def test_a_lone_file_naming_no_rank_is_paired_with_a_folders_rank_0_only_with_a_caveat(capsys, tmp_path):
    """One script's trace (no distributedInfo, no rank-N in its name) beside a job's ranks 0 and 1: it was taken as
    rank 0 and compared with the job's rank 0 as if it were that rank. Two such files, one each side, are compared
    as they were, without a caveat."""
    from trace_builders import write as write_trace

    (tmp_path / "ranked").mkdir()
    for name, kernel_us in (("a.json", 100), ("b.json", 100), ("ranked/rank-0.json", 100), ("ranked/rank-1.json", 700)):
        write_trace(tmp_path / name, steady_trace(kernel_us))
    data = run_json(capsys, str(tmp_path / "a.json"), str(tmp_path / "ranked"))
    assert [(entry["rank"], entry["pairing_caveat"]) for entry in data["comparison"]] == [(0, (
        "the before file names no rank (no distributedInfo, no rank-N in the name): it is numbered 0 as the only file "
        "read, so it is paired with the after trace's rank 0 by that number alone, not known to be the same rank"))]
    assert main(["trace", str(tmp_path / "ranked"), str(tmp_path / "a.json")]) == 0
    assert "the after file names no rank (no distributedInfo, no rank-N in the name): it is numbered 0 as the only" \
        in capsys.readouterr().out
    data = run_json(capsys, str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert [entry["pairing_caveat"] for entry in data["comparison"]] == [None]
    assert data["before"]["notes"] == []  # the folder's numbering note is not a lone file's


def test_files_numbered_by_place_take_the_numbers_no_named_rank_takes(capsys, tmp_path):
    """a.json beside rank-1.json was numbered 1 by its place (second) too: "rank 1 in more than one file"."""
    from trace_builders import write as write_trace

    write_trace(tmp_path / "rank-1.json", steady_trace(100))
    write_trace(tmp_path / "a.json", steady_trace(700))
    ranks = run_json(capsys, str(tmp_path))["ranks"]
    assert [(entry["rank"], Path(entry["file"]).name) for entry in ranks] == [(0, "a.json"), (1, "rank-1.json")]


def test_a_lone_rank_file_keeps_the_rank_its_name_gives_and_folders_sharing_no_rank_say_how_to_compare(
        capsys, tmp_path):
    from trace_builders import write as write_trace

    for folder, ranks in (("first", (0, 1)), ("second", (2, 3))):
        (tmp_path / folder).mkdir()
        for number in ranks:
            write_trace(tmp_path / folder / f"rank-{number}.json", steady_trace(100 + 100 * number))
    # read alone, rank-3.json is rank 3, as in its folder (it read as rank 0, so --rank 3 found nothing)
    (rank,) = run_json(capsys, str(tmp_path / "second" / "rank-3.json"), "--rank", "3")["ranks"]
    assert rank["rank"] == 3
    line = refused(capsys, str(tmp_path / "first"), str(tmp_path / "second"))
    assert "share no rank (ranks 0, 1 against 2, 3): compare one rank of each by giving its file" in line
    data = run_json(capsys, str(tmp_path / "first" / "rank-0.json"), str(tmp_path / "second" / "rank-2.json"))
    assert [(entry["rank"], entry["after_rank"]) for entry in data["comparison"]] == [(0, 2)]


def test_gpu_work_all_outside_the_steps_is_said_beside_the_idle_it_leaves(capsys, tmp_path):
    """Steps over 0-40 ms and every kernel at 100 ms and later read "idle 100 %" with no note, where HTA's window
    read the GPU 80 % busy."""
    from trace_builders import launched, step, trace, write as write_trace

    events = [step(n, n * 10_000, 10_000) for n in range(4)]
    events += [event for n in range(20) for event in launched("k", 100_000 + 500 * n - 20, 100_000 + 500 * n, 400, n + 1)]
    path = write_trace(tmp_path / "outside.json", trace(events))
    (rank,) = run_json(capsys, str(path))["ranks"]
    assert rank["idle_share"] == 1.0 and rank["gpu_span"]["compute_share"] > 0.7
    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("none of the 20 kernel, copy and fill events falls within the ProfilerStep spans (all after the last "
            "step)") in out, out


def test_step_numbers_written_twice_apart_in_time_are_said_to_be_left_out(capsys, tmp_path):
    """Two threads' ProfilerStep#1-4: the longest of each number was kept, the other thread's steps (and all
    the kernels in them) dropped without a word."""
    from trace_builders import step, trace, write as write_trace

    events = [step(n, n * 10_000, 10_000) for n in range(1, 5)]
    events += [{**step(n, 50_000 + n * 20_000, 20_000), "tid": 2} for n in range(1, 5)]
    events += [{**step(n, n * 10_000, 10_000, cat="cpu_op")} for n in range(1, 5)]  # Kineto's copy: not apart
    path = write_trace(tmp_path / "two-threads.json", trace(events))
    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 ProfilerStep numbers appear more than once apart in time" in out, out


# -- hostile traces: one line, exit 2 ----------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def gz(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data))
    return path


def test_not_json(capsys, tmp_path):
    refused(capsys, str(write(tmp_path / "t.json", "this is not a trace\n")))


def test_truncated_gzip(capsys, tmp_path):
    whole = gzip.compress(INPUT_HEAVY.read_bytes() and gzip.decompress(INPUT_HEAVY.read_bytes()))
    path = tmp_path / "t.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    refused(capsys, str(path))


def test_gzip_bomb(capsys, tmp_path):
    # 256 MB of spaces inside a valid JSON start: compresses about 1000×, far past any real trace.
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as file:
        file.write(b'{"traceEvents": [')
        chunk = b" " * (1 << 20)
        for _ in range(256):
            file.write(chunk)
        file.write(b"]}")
    line = refused(capsys, str(path))
    assert "bomb" in line or "limit" in line


def test_deep_nesting(capsys, tmp_path):
    depth = 200_000
    refused(capsys, str(write(tmp_path / "deep.json", '{"traceEvents": [' + "[" * depth + "]" * depth + "]}")))


def test_negative_and_overlapping_durations_and_missing_fields_give_a_report_or_one_line(capsys, tmp_path):
    events = [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 10.0, "dur": -5.0, "pid": 0, "tid": 7,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k2", "ts": 12.0, "dur": 30.0, "pid": 0, "tid": 7,
         "args": {"device": 0, "stream": 7, "correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k3", "ts": 20.0, "dur": 30.0, "pid": 0, "tid": 7,
         "args": {"device": 0, "stream": 7, "correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "no time"},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": "soon", "dur": None},
    ]
    path = write(tmp_path / "odd.json", json.dumps({"traceEvents": events}))
    code = main(["trace", str(path), "--json"])
    captured = capsys.readouterr()
    if code == 2:
        assert len(captured.err.strip().splitlines()) == 1
    else:
        assert code == 0
        json.loads(captured.out.strip().splitlines()[-1])
        assert "note:" in captured.err  # what it could not read is named


def test_a_fifo_is_refused_without_waiting_on_it(capsys, tmp_path):
    fifo = make_fifo(tmp_path / "trace.json")
    with fifo_unblocked(fifo):
        refused(capsys, str(fifo))


def test_a_symlink_loop_is_refused(capsys, tmp_path):
    refused(capsys, str(make_symlink_loop(tmp_path / "trace.json")))


def test_a_missing_file_is_refused(capsys, tmp_path):
    refused(capsys, str(tmp_path / "nowhere.json.gz"))


def test_a_folder_of_hidden_traces_says_they_are_left_out(capsys, tmp_path):
    (tmp_path / ".rank-0.json").write_text("{}")
    line = refused(capsys, str(tmp_path))
    assert "holds no readable trace files (*.json, *.json.gz); 1 hidden file (named .…) is left out" in line, line


def test_a_folder_without_traces_and_a_rank_not_there_are_refused(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("no trace here")
    assert "trace files" in refused(capsys, str(tmp_path))
    assert "no rank 5" in refused(capsys, str(INPUT_HEAVY), "--rank", "5")


def test_a_2_gb_file_is_refused_quickly_not_read_whole(capsys, tmp_path):
    # Sparse: 2 GiB on paper, nothing on disk. Its zeros are no JSON a profiler writes.
    path = tmp_path / "huge.json"
    with open(path, "wb") as file:
        file.write(b'{"traceEvents": [')
        file.truncate(2 * 1024**3)
    assert os.path.getsize(path) == 2 * 1024**3
    refused(capsys, str(path))


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_traces_taken_afresh_on_this_machine_fire_the_input_bound_finding_only_where_the_loader_lags(capsys, tmp_path):
    """The fixtures' maker, run again here: a new DataLoader(num_workers=0) trace whose __getitem__ works is
    input-bound and names num_workers; the one whose loader keeps up is not (whatever this machine's speed)."""
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "make_input_bound_traces.py"
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, capture_output=True, timeout=540)
    (heavy,) = run_json(capsys, str(tmp_path / INPUT_HEAVY.name))["ranks"]
    assert [f["kind"] for f in heavy["findings"]] == ["input-bound"]
    assert "num_workers=" in heavy["findings"][0]["change"]
    (light,) = run_json(capsys, str(tmp_path / LOADER_KEEPS_UP.name))["ranks"]
    assert light["dataloader_share"] is not None
    # Taken afresh, the light loop's 4 tiny steps (about 0.5 ms of loading each) can meet a pause of a loaded
    # machine inside one __next__: its share of the steps then read 25 % against the heavy one's 96 % in a CI run
    # (the share of 4 steps is a wall-clock figure). Held instead by the median __next__, which one pause does not
    # move (0.45 ms against 1.3 s, one span 12.7 ms, at load 7 on 2 cores). That the kept-up loader gets no finding
    # is the committed fixtures' test above, on the same maker's output.
    assert median_next_us(tmp_path / LOADER_KEEPS_UP.name) < median_next_us(tmp_path / INPUT_HEAVY.name) / 4


def median_next_us(path: Path) -> float:
    """The median span of the trace's enumerate(DataLoader)#…__next__ (µs), read from the file itself."""
    with gzip.open(path, "rt", encoding="utf-8") as file:
        events = json.load(file)["traceEvents"]
    return statistics.median(event["dur"] for event in events if event.get("ph") == "X"
                             and str(event.get("name", "")).startswith("enumerate(DataLoader)"))


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_TRACES / "a100-training.json.gz").is_file(), reason="no real A100 trace")
def test_the_output_docs_own_script_shows_is_todays(capsys, monkeypatch):
    monkeypatch.chdir(SHARED_TRACES)
    assert main(["trace", "a100-training.json.gz"]) == 0
    out = capsys.readouterr().out.strip()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "own-script.md").read_text(encoding="utf-8")
    assert out in doc


def names_trace(tmp_path, kernel_name: str, device_name: str, file_name: str = "t.json") -> Path:
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
               "args": {"correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": kernel_name, "pid": 0, "tid": 7, "ts": 100, "dur": 500,
               "args": {"device": 0, "stream": 7, "correlation": 1}}]
    path = tmp_path / file_name
    path.write_text(json.dumps({"deviceProperties": [{"id": 0, "name": device_name}], "traceEvents": events}))
    return path


def test_names_from_the_file_cannot_forge_lines_drive_the_terminal_or_fail_the_encoder(tmp_path, capsys):
    path = names_trace(tmp_path, "evil\x1b[2J\x1b]0;title\x07\nfake line: findings: none", "H100\ud800\n\x1b[5m")
    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\nfake line" not in out and "\ud800" not in out
    assert "evil\\x1b[2J\\x1b]0;title\\x07\\nfake line" in out and "H100\\ud800\\n\\x1b[5m" in out
    assert main(["trace", str(tmp_path / "no\nsuch\x1b.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line, the path's newline and escape written out


def test_a_path_of_bytes_that_are_not_utf8_is_read_since_nothing_is_kept(tmp_path, capsys):
    path = names_trace(tmp_path, "k", "A100", file_name="caf\udce9.json")  # b"caf\xe9.json" as Python names it
    assert main(["trace", str(path)]) == 0
    assert "caf\\udce9.json: 1 rank" in capsys.readouterr().out


def test_two_traces_compared_still_name_what_each_could_not_read(tmp_path, capsys):
    good = names_trace(tmp_path, "k", "A100")
    broken = json.loads(good.read_text())
    broken["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "bad", "ts": "200", "dur": 5})
    (tmp_path / "b.json").write_text(json.dumps(broken))
    assert main(["trace", str(good), str(tmp_path / "b.json"), "--json"]) == 0
    assert "rank 0: 1 event with a missing or mistyped name, ts or dur: skipped" in capsys.readouterr().err


def test_ranks_only_one_trace_holds_are_named_as_not_compared(tmp_path, capsys):
    def folder(name, ranks):
        path = tmp_path / name
        path.mkdir()
        for rank in ranks:
            source = names_trace(tmp_path, "k", "A100", file_name=f"{name}-{rank}.json")
            data = json.loads(source.read_text())
            data["distributedInfo"] = {"rank": rank}
            (path / f"rank-{rank}.json").write_text(json.dumps(data))
        return path

    assert main(["trace", str(folder("two", [0, 1])), str(folder("three", [0, 1, 2]))]) == 0
    assert "three: rank 2 not compared (the other trace has no such rank)" in capsys.readouterr().err


def test_a_folders_note_is_said_once_inline_in_text_and_on_stderr_with_json(capsys, tmp_path):
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "rank-0.pt.trace.json.gz").write_bytes(LOADER_KEEPS_UP.read_bytes())
    (folder / "rank-1.json").write_text("")
    note = f"left out: {folder / 'rank-1.json'}: is empty (no JSON in it)"
    assert main(["trace", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert out.count(note) == 1 and note not in err
    assert main(["trace", str(folder), "--json"]) == 0
    out, err = capsys.readouterr()
    *before_json, last = out.splitlines()
    assert note not in "\n".join(before_json) and err.count(note) == 1
    assert json.loads(last)["notes"] == [note]  # and in the object, for a tool that reads stdout alone


def test_a_trace_named_like_a_home_folder_of_no_user_is_read_as_the_file_it_is(capsys, tmp_path, monkeypatch):
    """bash leaves "~nosuchuser.json" as it is where no such user exists: the file of that name was refused with a
    25-line traceback (Path.expanduser's RuntimeError). It is that file; a path under a home of no user and no
    such file is one line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "~nosuchuser.json").write_bytes((H100 / "h100-input-bound.pt.trace.json.gz").read_bytes())
    (rank,) = run_json(capsys, "~nosuchuser.json")["ranks"]
    assert rank["steps"] == 5
    assert refused(capsys, "~nosuchuser/trace.json") == (
        "workbench trace: ~nosuchuser/trace.json is not a valid path (~nosuchuser would be the home folder of a user "
        "'nosuchuser', and this machine has none)")


@pytest.mark.parametrize("events, held", [
    ([{"ph": "B", "name": "w", "pid": 1, "tid": 1, "ts": 1}, {"ph": "E", "name": "w", "pid": 1, "tid": 1, "ts": 5000}],
     '2 events that are begin or end marks ("ph": "B"/"E"; torch.profiler writes spans as "X")'),
    ([{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
      {"ph": "C", "name": "memory", "pid": 1, "ts": 3, "args": {"bytes": 10}}],
     'none is a complete span ("ph": "X") of a host op, a runtime call or a GPU\'s work: metadata, counters, '
     'instants or flow arrows alone'),
    ([{"ph": "X", "cat": "mtia_kernel", "name": "k", "pid": 1, "tid": 1, "ts": 3, "dur": 4}],
     "spans of categories it does not read: mtia_kernel (1)"),
], ids=["begin-end-marks", "metadata-and-counters", "unknown-category"])
def test_a_trace_with_no_span_the_reader_reads_is_one_line_not_a_report_of_nothing(capsys, tmp_path, events, held):
    """Metadata, counters or begin/end marks alone (other tools' format) read as a rank of all n/a figures, "a
    CPU-only trace", "findings: none", exit 0, and the window kept it in the history."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert refused(capsys, str(path)) == (f"workbench trace: {path}: {len(events)} events, and no span this reader "
                                          f"reads ({held})")


def test_a_single_file_is_read_in_the_clis_own_process(capsys, monkeypatch):
    """The window reads a lone file in a process of its own, to keep its GUI thread off the reader's GIL; the CLI
    has no window, and a process would cost it a quarter of a second to start."""
    from workbench.trace_analysis import rank_pool

    def no_process(*args):
        raise AssertionError("the CLI started a reader process for one file")

    monkeypatch.setattr(rank_pool, "_start", no_process)
    (rank,) = run_json(capsys, str(BATCH_32))["ranks"]
    assert rank["steps"] > 0
