"""Measured changes in the history: kept with their device and baseline, found again for a run on the same device
whose speed settings are equal (its length, seed, lr and profiling aside), the newest measurement of each change."""

from workbench.config import RunConfig
from workbench.engine.run_summary import MeasuredChange
from workbench.history.measured_changes import MeasuredChangeRecord, lookup
from workbench.history.store import HistoryStore

BASE = RunConfig(model="small-cnn", batch_size=128, precision="fp32", pipeline="gpu-resident", augment="gpu",
                 epochs=2, seed=0, lr=0.05)
H100 = ("cuda", "NVIDIA H100 80GB HBM3")


def change(field="compile", value="default", speedup=0.85, verdict="slower", baseline=BASE, device=H100,
           sequence_id=None, **more):
    return MeasuredChangeRecord(sequence_id=sequence_id, device_type=device[0], device_name=device[1], baseline=baseline,
                          field=field, value=value, speedup=speedup, speedup_low=speedup - 0.03,
                          speedup_high=speedup + 0.03, verdict=verdict, baseline_run_ids=(1, 3, 5),
                          changed_run_ids=(2, 4, 6), **more)


def test_a_measured_change_speaks_for_runs_with_the_same_speed_settings_on_the_same_device(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        store.add_measured_change(change())
        same_speed = BASE.replace(epochs=30, max_steps=500, seed=7, lr=0.4, log_every=50, profile=True)
        (found,) = store.measured_changes(same_speed, *H100)
        assert (found.field, found.value, found.baseline, found.verdict) == ("compile", "default", BASE, "slower")
        assert found.measured_change == MeasuredChange(speedup=0.85, low=0.82, high=0.88, verdict="slower",
                                                baseline_trials=3, changed_trials=3)
        assert found.created_at is not None and found.id is not None
        # Anything that changes a step's work is another baseline; another GPU is another device.
        assert store.measured_changes(BASE.replace(batch_size=256), *H100) == []
        assert store.measured_changes(BASE.replace(weight_decay=0.0), *H100) == []
        assert store.measured_changes(BASE, "cuda", "NVIDIA A100-SXM4-80GB") == []
        assert store.measured_changes(BASE, "cpu", H100[1]) == []


def test_the_newest_measurement_of_a_change_is_the_one_read_and_values_match_by_type(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        store.add_measured_change(change(speedup=0.85, verdict="slower", created_at=100.0))
        store.add_measured_change(change(speedup=1.02, verdict="within_noise", created_at=200.0))
        store.add_measured_change(change(field="batch_size", value=1, speedup=0.5))
        store.add_measured_change(change(field="channels_last", value=True, speedup=1.2, verdict="faster"))
        read = lookup(store.measured_changes(BASE, *H100))
    assert read("compile", "default").verdict == "within_noise"
    assert read("compile", "reduce-overhead") is None
    assert read("channels_last", True).speedup == 1.2
    assert read("channels_last", 1) is None and read("batch_size", True) is None  # JSON true is not 1


def test_a_deleted_sequence_leaves_its_measurements(tmp_path):
    with HistoryStore.open(tmp_path) as store:
        sequence = store.create_sequence("verify", "verify #1: compile=default", {})
        store.add_measured_change(change(sequence_id=sequence))
        store._conn.execute("DELETE FROM sequences WHERE id = ?", (sequence,))
        (found,) = store.measured_changes(BASE, *H100)
    assert found.sequence_id is None
