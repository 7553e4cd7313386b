"""A member's events as its run function gives them (experiments.members.started_on_use, no Qt)."""

from builders import CPU, ended, started, tiny

from workbench.experiments.members import started_on_use


def test_a_run_function_may_return_any_iterator():
    """RunFunction promises an Iterator, not a generator: one without close() is run to its end (it was closed
    with contextlib.closing, which raised AttributeError after its last event)."""
    config = tiny()
    events = [started(config, CPU), ended("finished", 1000.0)]
    assert list(started_on_use(lambda config, stop: iter(events), config, lambda: False)) == events


def test_a_run_left_early_is_closed():
    """A generator's cleanup (its session, its DataLoader workers) runs when the consumer leaves mid-run."""
    closed = []

    def run(config, stop):
        try:
            yield started(config, CPU)
            yield ended("finished", 1000.0)
        finally:
            closed.append(config)

    config = tiny()
    events = started_on_use(run, config, lambda: False)
    assert next(events).config == config
    events.close()
    assert closed == [config]
