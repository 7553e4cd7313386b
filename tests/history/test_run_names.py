"""Run names say what distinguishes a run: its data and what changed against the run before. No Qt."""

from __future__ import annotations

from builders import record_complete_run, started

from workbench.config import RunConfig
from workbench.engine.events import RunEnded
from workbench.engine.run_summary import RunSummary
from workbench.history.naming import run_name
from workbench.history.store import HistoryStore


def test_a_first_run_is_named_by_its_data_and_main_settings():
    assert run_name(RunConfig()) == "synthetic: small-cnn, batch 128, fp32"
    npz = RunConfig(dataset="npz", data_path="/data/cifar10-subset.npz", model="resnet18")
    assert run_name(npz) == "cifar10-subset: resnet18, batch 128, fp32"


def test_a_rerun_is_named_by_what_changed():
    base = RunConfig()
    assert run_name(base.replace(num_workers=0, epochs=6), base) == "synthetic: num_workers=0, epochs=6"
    assert run_name(base.replace(pin_memory=False, lr=0.1), base) == "synthetic: pin_memory=off, lr=0.1"
    assert run_name(base, base) == "synthetic: same settings"
    many = base.replace(num_workers=0, model="resnet18", lr=0.1, epochs=3, seed=4)
    assert run_name(many, base) == "synthetic: num_workers=0, model=resnet18, lr=0.1 (+2 more)"


def test_a_change_of_data_is_said_once_at_the_front():
    base = RunConfig()
    npz = base.replace(dataset="npz", data_path="/d/mine.npz")
    assert run_name(npz, base) == "mine: small-cnn, batch 128, fp32"
    assert run_name(npz.replace(batch_size=64), base) == "mine: batch_size=64"


def test_the_store_names_each_run_against_the_one_before_and_the_number_is_said_once(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        first = record_complete_run(store, RunConfig(device="cpu"))
        second = record_complete_run(store, RunConfig(device="cpu", num_workers=0))
        named = record_complete_run(store, RunConfig(device="cpu"), name="my baseline")
        records = {record.id: record for record in store.list_runs()}
    assert records[first].name == "synthetic: small-cnn, batch 128, fp32"
    assert records[second].name == "synthetic: num_workers=0"
    assert records[second].label == f"#{second} synthetic: num_workers=0"
    assert records[named].name == "my baseline"
    assert all(record.label.count("#") == 1 for record in records.values())


def test_the_recorder_knows_the_name_the_store_gave_so_the_window_shows_the_same(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        store.start_run(RunConfig(device="cpu"))
        recorder = store.start_run(RunConfig(device="cpu", num_workers=0))
        named = store.start_run(RunConfig(device="cpu"), name="my baseline")
        assert recorder.label == store.get_run(recorder.run_id).label == f"#{recorder.run_id} synthetic: num_workers=0"
        assert named.label == f"#{named.run_id} my baseline"


def test_two_runs_never_share_a_name(tmp_path):
    """Issue 22: a GUI run and a sweep member were both "cifar10-subset: num_workers=0"."""
    base = RunConfig(device="cpu")
    with HistoryStore.open(tmp_path) as store:
        store.start_run(base, source="gui")
        lone = store.start_run(base.replace(num_workers=0), source="gui")
        sweep = store.create_sequence("sweep", "sweep num_workers")
        member = store.start_run(base.replace(num_workers=0, max_steps=60), name="synthetic: num_workers=0",
                                 sequence_id=sweep)
        again = store.create_sequence("sweep", "sweep num_workers")
        second = store.start_run(base.replace(num_workers=0, max_steps=60), name="synthetic: num_workers=0",
                                 sequence_id=again)
        first_named = store.start_run(base, name="baseline")
        second_named = store.start_run(base, name="baseline")
        names = [record.name for record in store.list_runs()]
    assert lone.name == "synthetic: num_workers=0"
    assert member.name == "synthetic: num_workers=0 (sweep num_workers)"  # the sweep's name tells it apart
    assert second.name == "synthetic: num_workers=0 (max_steps=60)"  # the same sweep name: what differs
    assert (first_named.name, second_named.name) == ("baseline", "baseline (repeat 2)")  # nothing differs
    assert len(set(names)) == len(names)


def test_a_folder_run_is_named_by_the_folders_name_and_a_model_by_its_kwargs():
    folder = RunConfig(dataset="folder", data_path="/home/me/pets/", model="mymodels:tiny_net",
                       model_kwargs='{"width": 4}')
    assert run_name(folder) == 'pets: mymodels:tiny_net {"width":4}, batch 128, fp32'
    assert run_name(folder.replace(model="resnet50", model_kwargs="")) == "pets: resnet50, batch 128, fp32"
    assert run_name(folder.replace(batch_size=64), folder) == "pets: batch_size=64"


def test_failed_tries_neither_take_a_name_nor_are_the_run_before(tmp_path):
    """Issue 30 §8: after five failed tries of one folder the run that worked was "pets: same settings (repeat 6)"."""
    base = RunConfig(device="cpu", num_workers=2)
    with HistoryStore.open(tmp_path) as store:
        record_complete_run(store, base.replace(num_workers=0))
        for _ in range(3):  # each met a damaged image mid-run: kept as failed, with its steps
            failed = store.start_run(base, source="cli")
            failed.record(started(base))
            failed.record(RunEnded(status="failed", summary=RunSummary(status="failed", reason="a bad image"),
                                   reason="a bad image", kind="data"))
        worked = store.start_run(base, source="gui")
        assert worked.name == "synthetic: num_workers=2"  # against the last run that ran, and a name of its own


def test_epochs_are_not_named_as_a_change_of_a_run_that_max_steps_sets():
    base = RunConfig(device="cpu", max_steps=50)
    assert run_name(base.replace(epochs=5), base) == "synthetic: same settings"
    assert run_name(base.replace(epochs=5, max_steps=None), base) == "synthetic: epochs=5, max_steps=none"
