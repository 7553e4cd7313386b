"""Cyclic garbage (Qt objects among it) is collected on the GUI thread only while a window lives: the
engine's own collections on the training thread are asked of the GUI thread (a QObject destroyed on the
training thread once deadlocked the suite against the GIL)."""

import gc
import threading

from builders import TINY_RUN, FakeRun

from workbench.engine import garbage as engine_garbage
from workbench.gui import garbage as gui_garbage


def test_the_engines_collection_during_a_run_happens_on_the_gui_thread(qtbot, make_window):
    full_collections = []

    def note(phase, info):
        if phase == "start" and info["generation"] == 2:
            full_collections.append(threading.current_thread() is threading.main_thread())

    fake = FakeRun(steps=4)

    def run(config, stop):
        for event in fake(config, stop):
            if type(event).__name__ == "StepStats" and event.step == 2:
                engine_garbage.collect_garbage()  # as memory.free_device_memory() does after a failed run
            yield event

    window = make_window(run_function=run)
    assert not gc.isenabled()  # automatic collection would run on whichever thread allocates
    gc.callbacks.append(note)
    try:
        window.form.set_config(TINY_RUN)
        with qtbot.waitSignal(window.training_thread.finished, timeout=20_000):
            window.start_button.click()
    finally:
        gc.callbacks.remove(note)
    assert full_collections and all(full_collections)  # never on the training thread
    window.close()
    assert gc.isenabled() and engine_garbage._collector is gc.collect  # back to Python's own, window gone


def test_the_gui_thread_collects_on_its_timer(qtbot, make_window):
    window = make_window()
    collector = gui_garbage._collector
    garbage = []
    for _ in range(5000):
        cycle = []
        cycle.append(cycle)
        garbage.append(cycle)
    del garbage, cycle
    qtbot.waitUntil(lambda: gc.get_count()[0] < collector.thresholds[0], timeout=30_000)
    window.close()


def test_what_lives_once_the_engine_is_loaded_is_frozen_while_the_window_lives(qtbot, make_window):
    """A full collection would walk torch's and the window's ~380k objects (175 ms on the GUI thread of a
    2-core VM): once the device probe has loaded the engine they are frozen; closing the window undoes it."""
    window = make_window()
    window.show()
    qtbot.waitUntil(lambda: gc.get_freeze_count() > 0, timeout=10_000)
    window.close()
    assert gc.get_freeze_count() == 0
