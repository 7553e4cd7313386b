"""Any PyTorch program's profiler trace, read and analysed without torch or Qt (issue 27).

``read_report(path)`` → ``TraceReport`` (model.py). reading.py reads files and folders of ranks; ranks.py
computes each rank's figures; the findings, report formats and comparison build on those.
"""

from workbench.trace_analysis.model import (
    Finding, NamedSeconds, RankReport, TraceCancelled, TraceError, TraceReport,
)
from workbench.trace_analysis.reading import read_report

__all__ = ["Finding", "NamedSeconds", "RankReport", "TraceCancelled", "TraceError", "TraceReport", "read_report"]
