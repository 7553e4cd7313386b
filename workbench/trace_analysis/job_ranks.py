"""The ranks of a job that a folder of its rank files lacks, by Kineto's distributedInfo (its rank and world_size):
a crashed job leaves a rank's file cut or not written, and the ranks read are then not the job's. No torch, no Qt.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from workbench.trace_analysis.parsed_trace import int_field, process_rank

RANKS_LISTED = 8  # of the ranks a job lacks, in its note


def process_and_world(meta: dict[str, Any]) -> Optional[tuple[int, int]]:
    """(the process's rank, the job's world_size) as the file's distributedInfo names them; None where it does not
    name both, or names a rank outside the world."""
    info = meta.get("distributedInfo")
    rank = process_rank(meta)
    world = int_field(info.get("world_size")) if isinstance(info, dict) else None
    if rank is None or world is None or not 0 <= rank < world:
        return None
    return rank, world


def ranks_not_read_note(jobs: Iterable[Optional[tuple[int, int]]], files_left_out: bool) -> Optional[str]:
    """Where the files read name one job's world_size (each its distributedInfo) and not all its ranks, a note naming
    those without a file read (``files_left_out``: some of the folder's files could not be read, and may be theirs);
    None otherwise (a file that names none, several world sizes: not one job known)."""
    named = list(jobs)
    worlds = {job[1] for job in named if job is not None}
    if not named or None in named or len(worlds) != 1:
        return None
    (world,) = worlds
    present = {job[0] for job in named if job is not None}
    lacking = world - len(present)
    if lacking <= 0:
        return None
    listed: list[int] = []
    number = 0
    while len(listed) < min(lacking, RANKS_LISTED):  # a world of a million ranks is not listed rank by rank
        if number not in present:
            listed.append(number)
        number += 1
    which = ", ".join(map(str, listed)) + (f" and {lacking - len(listed):,} more" if lacking > len(listed) else "")
    why = "not written, or left out above" if files_left_out else "not written, or not in this folder"
    among = f": the slowest rank is named among the {len(present):,} read only" if len(present) > 1 else ""
    return (f"the files' distributedInfo names a job of {world:,} ranks (world_size); rank{'s' if lacking > 1 else ''} "
            f"{which} {'have' if lacking > 1 else 'has'} no file read here ({why}){among}")
