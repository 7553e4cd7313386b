"""Suite-wide settings: Qt headless, each test in its own workbench home, GPU tests skip without CUDA."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Two pytest workers share two cores (-n 2): torch's intra-op threads, one per core in each process and in every
# process a test starts, oversubscribed them, and OpenMP's threads spin while they wait. One each (set before any
# torch import; the processes inherit it): the fast tier's CPU fell from 471 to 367 s and its wall time from 4:49
# to 3:45 on the 2-core AMD EPYC VM. No test measures parallel speed; the benchmarks run outside pytest.
os.environ.setdefault("OMP_NUM_THREADS", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SUBSET_NPZ = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cifar10-subset.npz"


@pytest.fixture(autouse=True)
def isolated_workbench_home(tmp_path_factory, monkeypatch):
    """Never read or write the user's real history or datasets folder."""
    home = tmp_path_factory.mktemp("workbench-home")
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def quiet_load_average(monkeypatch):
    """The machine's real load is no part of a test's result: verify's busy-machine note reads a quiet one here
    (tests of the note give it the load they mean)."""
    monkeypatch.setattr("workbench.experiments.verify.load_average", lambda: (0.0, 2))


@pytest.fixture
def subset_npz() -> Path:
    """The real CIFAR-10 slice beside the project; tests that need it skip where it is absent."""
    path = Path(os.environ.get("WORKBENCH_SUBSET_NPZ", SUBSET_NPZ))
    if not path.is_file():
        pytest.skip(f"real CIFAR-10 subset not found at {path}")
    return path


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """mymodels.py in the working directory, as a user's own project would have it (tests/own_images.py)."""
    import sys

    from own_images import write_user_models

    write_user_models(tmp_path)
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("mymodels", None)
