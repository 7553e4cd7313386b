"""`workbench runs` and `workbench export` (issue: run history). Placeholder until the history lands."""

from __future__ import annotations


def register(subparsers) -> None:
    pass
