"""Figures as people read them (workbench/formatting.py)."""

from __future__ import annotations

import pytest

from workbench.formatting import format_short_seconds, format_step_seconds


@pytest.mark.parametrize(("seconds", "text"), [
    (1.25, "1.25 s"), (0.251, "251 ms"), (0.0123, "12.3 ms"), (0.00084, "840 µs"), (1234.5, "1,234 s"),
    # a value that rounds up to the next unit is shown in it, never as "1e+03 µs"
    (0.000999999, "1 ms"), (0.9996, "1 s"), (999.9996, "1,000 s"), (0.0009994, "999 µs"), (None, ""),
])
def test_short_seconds_pick_the_unit_of_the_value_shown(seconds, text):
    assert format_short_seconds(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (0.1028, "102.8 ms"), (0.1032, "103.2 ms"), (0.00085, "850 µs"), (1.25, "1.25 s"), (None, "n/a"),
    (0.0009997, "1.0 ms"), (0.99996, "1.00 s"),
])
def test_step_times_keep_the_tenth_of_a_millisecond_a_spread_needs(seconds, text):
    assert format_step_seconds(seconds) == text
