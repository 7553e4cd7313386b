"""Events a trace file holds twice (two copies of one event list joined by a tool, a merge run twice): found after
the read, on the lists file_ranks has already sorted by start, and each counted once.

Two activities equal in every field read (kind, name, thread or GPU stream, start, end, correlation id) are two
copies of one event only where they carry a correlation id: a runtime call, a kernel, copy or fill (CUPTI numbers
each launch apart). Host ops carry none, and a real trace holds equal ones that are two events (two zero-length
``aten::to`` on one thread at one µs, differing only in their External id, which the reader does not read). So a side
is proven copied by its id-bearing events (the GPU's by its kernels, copies and fills; the host's by its runtime
calls), or, where it holds none (a CPU-only trace's host), by equal neighbours among a quarter of its activities or
more; only then are all of that side's activities counted once.

The proof is sought only between neighbours in the sorted lists: a C-level pass (``map(operator.eq, …)``) costs
about 1 % of a read, where hashing every activity into a set cost 5 %. A copy falls beside its twin unless another
activity of the same list starts at the same moment; in a copied file most do, and then every list of that side is
made free of copies exactly (``dict.fromkeys``, which keeps the order).
"""

from __future__ import annotations

import operator
from itertools import compress, islice
from typing import Iterable

from workbench.engine.timeline import Activity

# Equal neighbours among this share of a side's activities or more: a list written twice (each activity's copy is
# beside it: half of them), where a real trace holds a few equal host ops (7 of a100-training's 59,469).
COPIED_SHARE = 0.25
COPIES = ("events identical to an earlier one (the same name, thread or GPU stream, start, end and correlation id: "
          "the file holds them twice, as a tool that joins two copies of an event list writes it)")


def copied(sorted_lists: Iterable[list[Activity]], *, ids_held: bool) -> bool:
    """Whether the lists (each sorted by start) hold copies: an activity that carries a correlation id (on the host
    only runtime calls do) equal to the one before it; or, where ``ids_held`` is false (the side holds no activity
    with an id: a CPU-only trace's host), equal neighbours among COPIED_SHARE of the activities or more."""
    twins = activities_in_all = 0
    for activities in sorted_lists:
        activities_in_all += len(activities)
        for twin in compress(activities, map(operator.eq, activities, islice(activities, 1, None))):
            if twin.correlation:
                return True
            twins += 1
    return not ids_held and twins > 0 and twins >= COPIED_SHARE * activities_in_all


def once_each(activities: list[Activity]) -> list[Activity]:
    """The list without the activities equal to an earlier one, in its order."""
    return list(dict.fromkeys(activities))
