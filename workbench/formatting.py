"""Human-readable figures shared by the CLI, the GUI and messages."""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

# C0 and C1 control characters, DEL, and lone surrogates (a file name's bytes that are not UTF-8).
_NOT_PRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """The text with every control character and lone surrogate written as its escape (\\n, \\x1b, \\udce9): what
    a file holds (a kernel's name, a path) cannot break a line, drive the terminal or fail the encoder."""
    return _NOT_PRINTABLE.sub(lambda match: ascii(match.group())[1:-1], text)


def format_bytes(value: Optional[float]) -> str:
    if value is None:
        return "n/a"
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{int(value)} B"


def format_duration(seconds: Optional[float]) -> str:
    if seconds is None or seconds != seconds or seconds < 0:
        return "--:--"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


# A run faster than its compute ceiling: the ceiling was measured slower than the model trains now (another
# load on the machine, or an unsettled probe), so the share is no figure to believe.
CEILING_STALE = "ceiling stale — measure again"


def format_short_seconds(seconds: Optional[float]) -> str:
    """A span of a step or a kernel as people read it: 1.25 s, 251 ms, 12.3 ms, 840 µs; "" when unknown."""
    if seconds is None or seconds != seconds:
        return ""
    # The unit is chosen by the value as shown (3 significant digits): 0.0009999 s is "1 ms", not "1e+03 µs".
    shown = abs(float(f"{seconds:.3g}"))
    for scale, unit in ((1.0, "s"), (1e-3, "ms")):
        if shown >= scale:
            value = seconds / scale
            return f"{value:.3g} {unit}" if shown / scale < 1000 else f"{value:,.0f} {unit}"
    return f"{seconds / 1e-6:.3g} µs"


def format_step_seconds(seconds: Optional[float]) -> str:
    """A step's time to 0.1 ms (850 µs, 102.9 ms, 1.25 s): steps are compared by their spread, which three
    significant digits round away (102.8–103.2 ms read "103 ms–103 ms"); "n/a" when unknown."""
    if seconds is None or seconds != seconds:
        return "n/a"
    if round(abs(seconds) * 1e6) < 1000:  # by the value as shown: 999.7 µs is "1.0 ms", not "1,000 µs"
        return f"{seconds * 1e6:,.0f} µs"
    if round(abs(seconds) * 1e3, 1) < 1000:
        return f"{seconds * 1e3:,.1f} ms"
    return f"{seconds:,.2f} s"


def efficiency_text(efficiency: Optional[float], of: str = "of the ceiling") -> str:
    """"41% of the ceiling" for a pipeline efficiency; above 100 %, CEILING_STALE; "" when unknown."""
    if efficiency is None or efficiency != efficiency:
        return ""
    if efficiency > 1.0:
        return CEILING_STALE
    return f"{efficiency:.0%} {of}"


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]], right_aligned: set[int]) -> str:
    """Plain-text columns two spaces apart; the columns in ``right_aligned`` (numbers) flush right."""
    widths = [max(len(row[column]) for row in (header, *rows)) for column in range(len(header))]
    lines = []
    for row in (header, *rows):
        cells = [
            text.rjust(width) if column in right_aligned else text.ljust(width)
            for column, (text, width) in enumerate(zip(row, widths))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_setting(value: Any) -> str:
    """A setting's value as run names, sweeps and flags write it: "none", "on"/"off", 0.05, bf16."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def window_rate_text(rate: Optional[float], span: str, unit: str = "img/s") -> str:
    """A log window's or an epoch's images/sec, "1,234 img/s"; where the ``span`` read none (its clock did not
    advance: engine.events.per_clock_second), "img/s n/a (the window lasted 0 s on the clock)", never "0 img/s"."""
    if rate is None:
        return f"{unit} n/a (the {span} lasted 0 s on the clock)"
    return f"{rate:,.0f} {unit}"


def window_share_text(share: Optional[float]) -> str:
    """A log window's or an epoch's share of time, "12%"; "n/a" where it read none, never "0%": its clock did not
    advance (engine.events.per_clock_second), which its img/s beside it says (window_rate_text)."""
    return "n/a" if share is None else f"{share:.0%}"


def speedup_text(speedup: Optional[float], low: Optional[float], high: Optional[float]) -> str:
    """"1.31× (1.25–1.37)": a ratio of medians and its interval; "1.31× (no interval)"; "" when unmeasured."""
    if speedup is None:
        return ""
    if low is None or high is None:
        return f"{speedup:.2f}× (no interval)"
    return f"{speedup:.2f}× ({low:.2f}–{high:.2f})"


def rate_interval_text(low: Optional[float], high: Optional[float], coverage: Optional[float] = None) -> str:
    """"1,200–1,260" images/sec, "1,200–1,260 (75 %)" when the coverage is not the usual 90 %; "" without one."""
    if low is None or high is None:
        return ""
    text = f"{low:,.0f}–{high:,.0f}"
    if coverage is not None and abs(coverage - 0.90) > 0.005:
        text += f" ({coverage * 100:.3g} %)"
    return text
