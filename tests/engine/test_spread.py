"""A run's images/sec interval, from the spread of its steady windows."""

import random


from workbench.engine.spread import median_of_known, rate_interval


def test_steady_windows_give_a_narrow_interval_around_the_rate():
    samples, seconds = [1280] * 20, [1.0 + 0.01 * (i % 3) for i in range(20)]
    low, high = rate_interval(samples, seconds)
    rate = sum(samples) / sum(seconds)
    assert low <= rate <= high and (high - low) / rate < 0.02


def test_noisy_windows_give_a_wider_interval_that_still_holds_the_rate():
    generator = random.Random(0)
    seconds = [1.0 * (1 + generator.uniform(-0.15, 0.15)) for _ in range(30)]
    low, high = rate_interval([1000] * 30, seconds)
    rate = 30_000 / sum(seconds)
    assert low < rate < high and (high - low) / rate > 0.03


def test_a_slow_patch_of_consecutive_windows_widens_the_interval_more_than_scattered_ones():
    slow_patch = [1.0] * 40 + [1.5] * 8 + [1.0] * 40
    scattered = [1.5 if i % 11 == 0 else 1.0 for i in range(88)]
    patch_low, patch_high = rate_interval([100] * 88, slow_patch)
    scattered_low, scattered_high = rate_interval([100] * 88, scattered)
    assert patch_high - patch_low > scattered_high - scattered_low


def test_fewer_than_three_windows_give_no_interval():
    assert rate_interval([100, 100], [1.0, 1.0]) is None


def test_the_same_windows_give_the_same_interval():
    samples, seconds = [100] * 10, [1.0 + i / 50 for i in range(10)]
    assert rate_interval(samples, seconds) == rate_interval(samples, seconds)


def test_the_median_of_known_figures_leaves_the_unread_out():
    assert median_of_known([None, 1.0, 3.0, None]) == 2.0
    assert median_of_known([None, None]) is None and median_of_known([]) is None
