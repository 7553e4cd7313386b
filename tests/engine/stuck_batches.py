"""Imported by a CLI under test, and preloaded into its forkserver: a worker's first item never comes (a dataset
stuck on a dead network share), so the run's worker start-up never ends. Never imported by a test process:
it patches the dataset for every run in the process that imports it."""

import sys
import time

from cli_processes import STUCK_LINE

from workbench.engine import data

STUCK_S = 3600.0


def _stuck_load(self, index):
    print(STUCK_LINE, file=sys.stderr, flush=True)
    time.sleep(STUCK_S)


data.UInt8ImageDataset.__getitem__ = _stuck_load
data.FORKSERVER_PRELOAD.append(__name__)  # the workers fork from the server: patched there too
