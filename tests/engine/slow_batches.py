"""Imported by a CLI under test, and preloaded into its forkserver: each batch takes its worker 0.5 s, so the run
spends its time waiting for its workers (a signal that killed them would fail the run there)."""

import time

from workbench.engine import data

BATCH_SECONDS = 0.5
_load = data.UInt8ImageDataset.__getitem__


def _slow_load(self, index):
    time.sleep(BATCH_SECONDS)
    return _load(self, index)


data.UInt8ImageDataset.__getitem__ = _slow_load
data.FORKSERVER_PRELOAD.append(__name__)  # the workers fork from the server: patched there too
