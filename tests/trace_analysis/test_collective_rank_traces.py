"""Real two-rank jobs over gloo on a CPU that spread training without DDP (tests/trace_analysis/data/collectives,
scripts/make_collective_rank_traces.py): FSDP2, and a user's loop calling torch.distributed's collectives itself.
Each folder is read as one job's ranks; the host ops counted as collectives (COLLECTIVE_HOST_OPS) are every
collective the trace holds and nothing else; the rank the others wait for is named in the straggler jobs, by the
collective they waited in (a barrier's wait is a wait, not compute), and none in the balanced ones."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from workbench.cli import main
from workbench.trace_analysis import read_report
from workbench.trace_analysis.communication_wait import COLLECTIVE_HOST_OPS
from workbench.trace_analysis.comparing import straggler

COLLECTIVES = Path(__file__).resolve().parent / "data" / "collectives"
JOBS = ("fsdp-balanced", "fsdp-straggler", "by-hand-balanced", "by-hand-straggler")
# Each rank's collective host ops over its 3 steps, by name: FSDP2 over three Linear units all-gathers each unit's
# parameters before its forward and its backward (6 a step) and reduce-scatters its gradients (3 a step; gloo runs
# a reduce-scatter as gloo:all_reduce); the loop by hand all-reduces its 6 gradients, broadcasts 1 flag and ends
# in 1 barrier a step. c10d:: on the main thread, where the call is made; gloo: on gloo's threads, where it runs.
FSDP_COLLECTIVES = {"c10d::_allgather_base_": 18, "gloo:all_gather": 18, "c10d::_reduce_scatter_base_": 9,
                    "gloo:all_reduce": 9}
BY_HAND_COLLECTIVES = {"c10d::allreduce_": 18, "gloo:all_reduce": 18, "c10d::broadcast_": 3, "gloo:broadcast": 3,
                       "c10d::barrier": 3, "gloo:barrier": 3}
# Any name that speaks of communication, to find a collective the prefixes would miss
COMMUNICATION_WORDS = re.compile(r"gather|scatter|reduce|broadcast|barrier|all_?to_?all|send|recv|nccl|comms", re.I)
# FSDP's own spans that hold a collective's name and are not one: its annotations around the call (with the copies
# in and out, compute) and its copies. gloo's ops within them give the collective's time.
FSDP_OWN = ("FSDP::", "fsdp::")


def events(file: Path) -> list[dict]:
    with gzip.open(file, "rt") as stream:
        return [event for event in json.load(stream)["traceEvents"] if event.get("ph") == "X"]


@pytest.mark.parametrize("job", JOBS)
def test_the_collective_host_ops_are_every_collective_of_the_trace_and_nothing_else(job):
    expected = FSDP_COLLECTIVES if job.startswith("fsdp") else BY_HAND_COLLECTIVES
    files = sorted((COLLECTIVES / job).glob("rank*.pt.trace.json.gz"))
    assert len(files) == 2
    for file in files:
        names = [event["name"] for event in events(file)]
        assert Counter(name for name in names if name.startswith(COLLECTIVE_HOST_OPS)) == expected
        missed = {name for name in names
                  if COMMUNICATION_WORDS.search(name) and not name.startswith(COLLECTIVE_HOST_OPS)}
        assert all(name.startswith(FSDP_OWN) for name in missed), missed
        assert not any("record_param_comms" in name or name.startswith("nccl:") for name in names)  # gloo's, on a CPU


@pytest.mark.parametrize("job", JOBS)
def test_each_jobs_two_ranks_are_read_with_their_collectives_counted_and_no_gpu_figure(job, capsys):
    report = read_report(COLLECTIVES / job)
    assert [rank.rank for rank in report.ranks] == [0, 1] and not report.notes
    collective_counts = FSDP_COLLECTIVES if job.startswith("fsdp") else BY_HAND_COLLECTIVES
    for rank in report.ranks:
        assert rank.rank_named and rank.steps == 3 and rank.cpu_only and rank.communication_share is None
        assert rank.notes == ("a CPU-only trace: it holds no kernel, copy or fill events, so the GPU figures cannot "
                              "be read",)
        # some collective under way in every step, never longer than the step (gloo's threads merged, not summed)
        assert rank.communication_by_step is not None and len(rank.communication_by_step) == 3
        assert all(0 < seconds <= step for seconds, step in zip(rank.communication_by_step, rank.step_seconds))
        listed = {op.name: op.count for op in rank.top_host_ops if op.name.startswith(COLLECTIVE_HOST_OPS)}
        assert listed and all(collective_counts[name] == count for name, count in listed.items())
    assert main(["trace", str(COLLECTIVES / job), "--json"]) == 0
    data = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert [entry["rank"] for entry in data["ranks"]] == [0, 1] and data["slowest"] == straggler(report.ranks)


@pytest.mark.parametrize("job", ["fsdp-balanced", "by-hand-balanced"])
def test_a_balanced_job_names_no_straggler(job):
    assert straggler(read_report(COLLECTIVES / job).ranks).startswith("none stands out:")


@pytest.mark.parametrize("job, collective", [("fsdp-straggler", "gloo:all_gather"),
                                             ("by-hand-straggler", "gloo:barrier")])
def test_the_straggler_is_named_by_the_collective_the_other_rank_waited_in(job, collective):
    """Rank 1 sorts a million floats a step: under FSDP before its backward, so rank 0 waits in the backward's
    all-gather; by hand after its all-reduces, so rank 0 waits in the barrier. The line said every step "ends in
    the same all-reduce", which neither job's steps do, and not where the wait was."""
    report = read_report(COLLECTIVES / job)
    verdict = straggler(report.ranks)
    assert verdict.startswith("rank 1, by the others' wait: every rank's step meets the others' in the same "
                              "collectives") and "in 3 of the 3 steps" in verdict, verdict
    assert "where rank 0 spends " in verdict and f"(the most in {collective}), waiting" in verdict
    assert "all-reduce" not in verdict
    rank0, rank1 = report.ranks
    assert rank0.top_host_ops[0].name == collective
    assert rank1.top_host_ops[0].name == "aten::sort"
    # the wait is the others': rank 0's time in collectives more than half its every step, rank 1's far less
    assert all(waited > 0.5 * step > waiting for waited, waiting, step in
               zip(rank0.communication_by_step or (), rank1.communication_by_step or (), rank0.step_seconds))


def test_a_barrier_is_counted_as_a_wait_for_the_others_not_as_compute():
    """dist.barrier() returns at once on the main thread (c10d::barrier, well under a millisecond) and waits on
    gloo's thread (gloo:barrier): its time is rank 0's communication in each step."""
    rank0 = read_report(COLLECTIVES / "by-hand-straggler").ranks[0]
    ops = {op.name: op for op in rank0.top_host_ops}
    assert ops["gloo:barrier"].count == 3
    assert sum(rank0.communication_by_step or ()) >= ops["gloo:barrier"].seconds
    assert rank0.compute_share is None  # a CPU-only trace: no compute figure for the barrier to swell


def test_top_host_ops_adding_up_past_the_steps_say_one_wait_may_show_twice():
    """FSDP2's straggler job: rank 0's top host ops listed gloo:all_gather (on gloo's thread) and FSDP::all_gather
    (around it on the main thread), one wait twice, adding up past the steps with no word of it."""
    from workbench.trace_analysis.wording import ops_on_threads_at_once_text

    first = read_report(COLLECTIVES / "fsdp-straggler").ranks[0]
    assert sum(op.seconds for op in first.top_host_ops) > first.window_seconds
    text = ops_on_threads_at_once_text(first)
    assert text is not None and text.startswith("the top host ops' self times add up to ")
    assert "ops ran on several threads at once (a self time is one thread's)" in text


def test_one_threads_top_host_ops_never_add_up_past_the_steps_and_say_nothing():
    from workbench.trace_analysis.wording import ops_on_threads_at_once_text

    one_thread = Path(__file__).resolve().parent / "data" / "profiler-options" / "cpu-gzip-handler.pt.trace.json.gz"
    (rank,) = read_report(one_thread).ranks
    assert ops_on_threads_at_once_text(rank) is None
