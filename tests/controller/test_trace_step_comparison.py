"""Trace records side by side in the Runs tab: their step times compared by the one A/B statistic. No Qt."""

from __future__ import annotations

import pytest
from builders import record_complete_run

from workbench.config import RunConfig
from workbench.controller.speed_comparison import speed_lines
from workbench.history.store import HistoryStore
from workbench.history.trace_records import TraceRecord


def trace(sha: str, steps: list[float], rank: int = 0, compute_share: float = 0.5, device: str = "A100"
          ) -> TraceRecord:
    ordered = sorted(steps)
    figures = {"rank": rank, "device": device, "steps": len(steps), "step_seconds": steps,
               "step_seconds_median": ordered[len(ordered) // 2] if steps else None,
               "step_seconds_low": ordered[0] if steps else None, "step_seconds_high": ordered[-1] if steps else None,
               "compute_share": compute_share}
    return TraceRecord(path=f"/t/{sha}.json", size_bytes=1, sha256=sha * 32, ranks=(figures,))


@pytest.fixture
def store(tmp_path):
    with HistoryStore.open(tmp_path / "home") as opened:
        yield opened


def records(store, *traces):
    return store.get_runs([store.add_trace(item)[0] for item in traces])


def test_one_trace_says_its_step_time_and_no_images_per_sec(store):
    (line,) = speed_lines(records(store, trace("a", [0.20, 0.21, 0.22])))
    assert line == "Step time of #1, rank 0: 210.0 ms median (200.0 ms–220.0 ms), 3 steps"


def test_shorter_steps_beyond_their_spread_are_a_gain(store):
    # the same GPU compute per step in half the time (the idle went): shorter steps doing the same work
    before, after = records(store, trace("a", [0.200, 0.201, 0.202, 0.203, 0.204, 0.205], compute_share=0.45),
                            trace("b", [0.100, 0.101, 0.102, 0.103, 0.104, 0.105], compute_share=0.9))
    (line,) = speed_lines([before, after])
    assert line.startswith("#2 against #1, rank 0: 203.0 ms median (200.0 ms–205.0 ms)")
    assert line.endswith("shorter steps in these two traces: a gain")  # 0.51×: far past runs' 8–15 %
    assert "the median step is 0.51× as long" in line


def test_a_difference_within_the_steps_spread_is_not_a_gain(store):
    before, after = records(store, trace("a", [0.10, 0.30, 0.20, 0.25, 0.15]), trace("b", [0.12, 0.28, 0.19, 0.24, 0.16]))
    (line,) = speed_lines([before, after])
    assert line.endswith("within the steps' own spread: not a gain")


def test_too_few_steps_or_none_give_no_verdict(store):
    two, two_more, none, five = records(store, trace("a", [0.2, 0.21]), trace("b", [0.1, 0.11]), trace("c", []),
                                        trace("d", [0.10, 0.101, 0.099, 0.1, 0.102]))
    assert "no verdict: fewer than 3 steps in a trace give no interval (2+2 steps)" in speed_lines([two, two_more])[0]
    # 5+2 steps: the statistic alone has an interval there (and none for 3+2); the rule is 3 steps a trace
    assert "no verdict: fewer than 3 steps in a trace give no interval (2+5 steps)" in speed_lines([two, five])[0]
    assert speed_lines([two, none])[0].endswith("no verdict: a trace without steps has no step time to compare")


def test_runs_and_traces_selected_together_each_say_their_own(store):
    run = store.get_run(record_complete_run(store, RunConfig(device="cpu")))
    (traced,) = records(store, trace("a", [0.2, 0.2, 0.2]))
    lines = speed_lines([run, traced])
    assert lines[0].startswith(f"Img/s of #{run.id}")  # the run alone, not set against a trace
    assert lines[1].startswith(f"Step time of #{traced.id}")


def test_a_step_as_long_with_four_times_the_compute_points_at_the_batch_size(store):
    """The same step time, four times the GPU's compute per step: a larger batch, probably; step time alone does
    not say whether that gained, and the line says how to find out."""
    steps = [0.100, 0.101, 0.102, 0.103, 0.104]
    before, after = records(store, trace("a", steps, compute_share=0.2), trace("b", steps, compute_share=0.8))
    (line,) = speed_lines([before, after])
    assert "not a gain" in line and "compute per step is 4.0× what it was" in line
    # the window has no batch size to give a trace: the line names the command that takes them
    assert line.endswith("compare samples per second at the command line: workbench trace --batch-size BEFORE AFTER "
                         "with the two trace files")
    same_work = records(store, trace("c", steps), trace("d", steps))
    assert "--batch-size" not in speed_lines(same_work)[0]


def test_compute_per_step_moved_on_two_gpus_says_the_device_moves_it_beside_the_batch_hint(store):
    steps = [0.100, 0.101, 0.102, 0.103, 0.104]
    before, after = records(store, trace("a", steps, compute_share=0.2),
                            trace("b", steps, compute_share=0.8, device="Tesla V100"))
    (line,) = speed_lines([before, after])
    assert ("compute per step is 4.0× what it was: the two traces ran on different devices, and a kernel's time "
            "moves with its device as much as with its batch; if the batch size changed") in line


def test_a_rank_numbered_by_its_files_place_is_paired_with_a_caveat(store):
    """A folder's two files that name no rank (numbered 0 and 1 by their place) against a job's ranks 0 and 1: the
    step line said "rank 1" as if they were the same rank. One process each, or a record kept before it was known
    (no rank_named), is compared without it."""
    steps = [0.100, 0.101, 0.102, 0.103, 0.104]

    def two_ranks(sha, named):
        ranks = tuple(dict(trace(sha, steps, rank=number).ranks[0], rank_named=named) for number in (0, 1))
        return TraceRecord(path=f"/t/{sha}", size_bytes=1, sha256=sha * 32, ranks=ranks, files=("a.json", "b.json"))

    unranked, ranked = records(store, two_ranks("a", False), two_ranks("b", True))
    lines = speed_lines([unranked, ranked])
    assert lines[1].startswith("#2 against #1, rank 1: ") and lines[1].endswith(
        "; the #1 file names no rank (no distributedInfo, no rank-N in the name): it is numbered 1 by its place among "
        "its folder's files, so it is paired with the #2 trace's rank 1 by that number alone, not known to be the "
        "same rank")
    older = TraceRecord(path="/t/c", size_bytes=1, sha256="c" * 32, ranks=tuple(
        {key: value for key, value in rank.items() if key != "rank_named"} for rank in two_ranks("c", True).ranks))
    assert not any("names no rank" in line for line in speed_lines(records(store, older, two_ranks("d", True))))
    cycles = [TraceRecord(path=f"/t/{sha}", size_bytes=1, sha256=sha * 32,  # one process's two cycles each
                          ranks=(dict(trace(sha, steps).ranks[0], rank_named=False),) * 2) for sha in ("e", "f")]
    lines = speed_lines(records(store, *cycles))
    assert len(lines) == 2 and not any("names no rank" in line for line in lines)


def test_a_lone_file_naming_no_rank_is_paired_with_a_folders_rank_0_with_a_caveat(store):
    """One script's file that names no rank (taken as rank 0) beside a job's ranks 0 and 1: the step line set it
    beside rank 0 with no word that it is so by number alone. One such file each is compared without it."""
    steps = [0.100, 0.101, 0.102, 0.103, 0.104]
    lone, other_lone = (TraceRecord(path=f"/t/{sha}.json", size_bytes=1, sha256=sha * 32,
                                    ranks=(dict(trace(sha, steps).ranks[0], rank_named=False),)) for sha in ("a", "b"))
    job = TraceRecord(path="/t/job", size_bytes=1, sha256="c" * 32, files=("rank-0.json", "rank-1.json"),
                      ranks=tuple(trace("c", steps, rank=number).ranks[0] for number in (0, 1)))
    lines = speed_lines(records(store, lone, job))
    assert lines[0].startswith("#2 against #1, rank 0: ") and lines[0].endswith(
        "; the #1 file names no rank (no distributedInfo, no rank-N in the name): it is numbered 0 as the only file "
        "read, so it is paired with the #2 trace's rank 0 by that number alone, not known to be the same rank")
    assert not any("names no rank" in line for line in speed_lines(records(store, lone, other_lone)))


def test_two_single_rank_traces_are_compared_whatever_their_rank_numbers(store):
    steps = [0.100, 0.101, 0.102, 0.103, 0.104]
    before, after = records(store, trace("a", steps, rank=1), trace("b", [s / 2 for s in steps], rank=0))
    (line,) = speed_lines([before, after])
    # each record's number, in the line's order (it named #2's rank 0 alone, as if both were rank 0)
    assert line.startswith("#2 against #1, rank 0 against rank 1: ") and "a gain" in line


def test_traces_from_gpus_of_two_kinds_say_the_change_is_the_gpus_too(store):
    steps = [0.200, 0.201, 0.202, 0.203, 0.204, 0.205]
    a100, v100, index_only = records(store, trace("a", steps), trace("b", [2 * t for t in steps], device="Tesla V100"),
                                     trace("c", steps, device="cuda:1"))
    (line,) = speed_lines([a100, v100])
    assert line.endswith("the two traces ran on different GPUs (A100, then Tesla V100): what changed is the GPU's as "
                         "much as the script's")
    (line,) = speed_lines([a100, index_only])  # an index says nothing of the GPU's kind
    assert "different GPUs" not in line


def test_traces_taken_with_other_profiler_options_say_the_change_is_the_profilers_too(store):
    steps = [0.200, 0.201, 0.202, 0.203, 0.204, 0.205]

    def taken_with(sha, options, times):
        kept = trace(sha, times)
        figures = dict(kept.ranks[0]) if options is None else dict(kept.ranks[0], profiler_options=options)
        return TraceRecord(path=kept.path, size_bytes=1, sha256=kept.sha256, ranks=(figures,))

    plain, costly, same, unknown = records(store, taken_with("a", [], steps),
                                           taken_with("b", ["with_stack", "record_shapes"], [2 * t for t in steps]),
                                           taken_with("c", [], steps), taken_with("d", None, steps))
    (line,) = speed_lines([plain, costly])
    assert line.endswith("the two traces were taken with different profiler options (before: none; after: "
                         "with_stack=True, record_shapes=True): they lengthen the host's time, so what changed is the "
                         "profiler's as much as the script's")
    (line,) = speed_lines([plain, same])
    assert "profiler options" not in line
    (line,) = speed_lines([unknown, costly])  # a record kept before its options were: not known to differ
    assert "profiler options" not in line


def test_a_ranks_cycles_in_two_folders_compare_cycle_with_cycle(store):
    """A folder of one process's cycles holds rank 0 twice (or three times): the n-th with the other's n-th, not
    each with the other folder's last (cycle 1 held against cycle 2 read "3.00× as long")."""
    def cycles(sha, *steps):
        figures = [trace(sha, list(times)).ranks[0] for times in steps]
        return TraceRecord(path=f"/t/{sha}", size_bytes=1, sha256=sha * 32, ranks=tuple(figures))

    fast, slow, other = [0.100, 0.101, 0.102], [0.300, 0.301, 0.302], [0.2, 0.2, 0.2]
    before, after = records(store, cycles("a", fast, slow), cycles("b", fast, slow, other))
    first, second, third = speed_lines([before, after])
    assert "within the steps' own spread: not a gain" in first and "within the steps' own spread" in second
    assert third == "#2 against #1, rank 0: not compared (#1 has rank 0 in fewer files)"


def test_a_trace_without_gpu_work_against_a_gpus_says_the_steps_ran_on_other_devices(store):
    """A CPU-only trace (device unknown) against an A100's: "shorter steps: a gain" with no word that one of them
    ran no GPU work, where two GPUs of two kinds are said."""
    gpu = trace("a", [0.216, 0.210, 0.216, 0.215, 0.217], device="NVIDIA A100-SXM4-80GB")
    cpu = trace("b", [0.060, 0.059, 0.061, 0.060, 0.062], device="unknown", compute_share=None)
    cpu = TraceRecord(path=cpu.path, size_bytes=1, sha256=cpu.sha256, ranks=(dict(cpu.ranks[0], cpu_only=True),))
    (line,) = speed_lines(records(store, gpu, cpu))
    assert ("the after trace holds no GPU work read (a CPU-only run, or its GPU's events left out or unreadable), "
            "the before trace ran on NVIDIA A100-SXM4-80GB: the steps may have run on different devices") in line
