"""A background call that ends after the application let its QObject go says nothing, and raises nothing."""

from __future__ import annotations

import pytest
import shiboken6

from workbench.gui.background import BackgroundCall


@pytest.mark.parametrize("function", [lambda: "models", lambda: 1 / 0])
def test_a_call_whose_object_is_gone_ends_quietly(qapp, function):
    call = BackgroundCall(function)
    shiboken6.delete(call)  # as the application's end takes it while torchvision's import still runs
    call._call()  # before: RuntimeError "Signal source has been deleted", printed from the pool's thread
    assert not call.running
