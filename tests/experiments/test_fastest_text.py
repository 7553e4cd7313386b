"""The sweep's closing line names a value "Fastest" only where its interval against the runner-up says so."""

from __future__ import annotations

from workbench.experiments.rate_over_runs import RateOverRuns, ValueResult, fastest_text


def value(name: str, *rates: float) -> ValueResult:
    ordered = sorted(rates)
    return ValueResult((("num_workers", name),), (), RateOverRuns(rates=tuple(rates),
                                                                  images_per_sec=ordered[len(ordered) // 2]))


def label(result: ValueResult) -> str:
    return f"num_workers={result.values[0][1]}"


def test_a_highest_median_within_the_noise_is_not_called_fastest():
    # medians 796 and 573: 1.39×, but the runs overlap (the interval of the ratio holds 1)
    text = fastest_text([value("0", 573.0, 900.0, 400.0), value("1", 796.0, 460.0, 1000.0)], label)
    assert text.startswith("Highest median: num_workers=1 at 796 img/s, median of 3; against num_workers=0: ")
    assert "within the noise" in text and "Fastest" not in text and "the slowest" not in text


def test_a_gain_beyond_the_noise_is_fastest():
    text = fastest_text([value("0", 400.0, 410.0, 405.0), value("1", 800.0, 810.0, 805.0)], label)
    assert text.startswith("Fastest: num_workers=1 at 805 img/s, median of 3; against num_workers=0: measured ")
    assert "faster" in text


def test_single_runs_are_no_verdict():
    text = fastest_text([value("0", 400.0), value("1", 800.0)], label)
    assert text == ("Highest: num_workers=1 at 800 img/s; no verdict against num_workers=0: one run each (repeats "
                    "measure the noise)")
