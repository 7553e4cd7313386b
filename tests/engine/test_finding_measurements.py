"""Findings that read what their remedies measured here: the measurement shows in the text, measured gains rank
first and measured losses last (a measured loss is never the first thing to try)."""

from workbench.config import RunConfig
from workbench.engine.finding_measurements import with_measured_changes
from workbench.engine.findings import find
from workbench.engine.run_facts import RunFacts
from workbench.engine.run_summary import Finding, MeasuredChange, RunSummary

LAUNCH_BOUND = RunFacts(
    config=RunConfig(batch_size=128, pipeline="gpu-resident", augment="gpu"),
    summary=RunSummary(status="finished", images_per_sec=27_000.0, data_wait_fraction=0.0, profile_samples=2,
                       kernel_busy_fraction=0.3, idle_waiting_for_data_fraction=0.0,
                       idle_waiting_for_host_fraction=0.6, idle_other_fraction=0.1, kernels_per_step=90.0),
    device_type="cuda", cuda_available=True, bf16_supported=True, cpu_count=16,
)
GAIN = MeasuredChange(speedup=1.31, low=1.25, high=1.37, verdict="faster", baseline_trials=3, changed_trials=3)
LOSS = MeasuredChange(speedup=0.86, low=0.80, high=0.90, verdict="slower", baseline_trials=3, changed_trials=3)
NOISE = MeasuredChange(speedup=1.01, low=0.95, high=1.07, verdict="within_noise", baseline_trials=3, changed_trials=3)


def measured(**by_field):
    """A lookup: {field: (value, measurement)}."""
    return lambda field, value: by_field[field][1] if field in by_field and by_field[field][0] == value else None


def remedies(findings):
    return [(finding.field, finding.value) for finding in findings]


def test_unmeasured_findings_are_unchanged():
    found = find(LAUNCH_BOUND)
    assert len(found) > 2
    assert with_measured_changes(found, lambda field, value: None) == found


def test_a_measured_loss_is_never_first_and_says_so():
    found = find(LAUNCH_BOUND)
    first = found[0]
    ranked = with_measured_changes(found, measured(**{first.field: (first.value, LOSS)}))
    assert ranked[0] != first and ranked[-1].field == first.field and ranked[-1].measured == LOSS
    assert ranked[-1].text.endswith("; measured 0.86×: slower here, not recommended (0.80–0.90, 3+3 trials).")
    assert ranked[-1].text.startswith(first.text.rstrip("."))
    assert all(finding.measured is None for finding in ranked[:-1])


def test_a_measured_gain_comes_first_and_shows_its_interval():
    found = find(LAUNCH_BOUND)
    last = found[-1]
    ranked = with_measured_changes(found, measured(**{last.field: (last.value, GAIN)}))
    assert ranked[0].field == last.field and ranked[0].measured == GAIN
    assert ranked[0].text.endswith("; measured 1.31×: faster (1.25–1.37, 3+3 trials).")
    assert remedies(ranked[1:]) == remedies(found[:-1])  # the others keep the rules' order


def test_within_the_noise_keeps_its_place_and_a_value_measured_is_not_another_value():
    found = find(LAUNCH_BOUND)
    second = found[1]
    ranked = with_measured_changes(found, measured(**{second.field: (second.value, NOISE)}))
    assert remedies(ranked) == remedies(found) and "within the noise (0.95–1.07" in ranked[1].text
    other_value = measured(**{found[0].field: ("something else", LOSS)})
    assert with_measured_changes(found, other_value) == found


def test_problems_rank_by_what_their_remedies_measured():
    def problem(name, *fields):
        head = f"{name}: it costs."
        return [Finding(kind=name, headline=head, text=f"{head} Try {field}=true.", figure=0.5, figure_name="x",
                        field=field, value=True) for field in fields]

    findings = problem("input-bound", "a", "b") + problem("launch-bound", "c") + [
        Finding(kind="memory-headroom", headline="room", text="room", figure=1.0, figure_name="y")]
    # Every remedy of the costliest problem measured slower: that problem goes last, the next one leads.
    ranked = with_measured_changes(findings, measured(a=(True, LOSS), b=(True, LOSS)))
    assert [f.kind for f in ranked] == ["launch-bound", "memory-headroom", "input-bound", "input-bound"]
    # A measured gain in a later problem brings it first; gains rank by their speedup.
    bigger = MeasuredChange(speedup=1.6, low=1.5, high=1.7, verdict="faster", baseline_trials=3, changed_trials=3)
    ranked = with_measured_changes(findings, measured(b=(True, GAIN), c=(True, bigger)))
    assert [f.field for f in ranked] == ["c", "b", "a", None]


def test_a_measurement_round_trips_with_its_finding():
    finding = with_measured_changes(find(LAUNCH_BOUND), lambda field, value: GAIN)[0]
    assert Finding.from_dict(finding.to_dict()) == finding
    assert finding.to_dict()["measured"] == {"speedup": 1.31, "low": 1.25, "high": 1.37, "verdict": "faster",
                                             "baseline_trials": 3, "changed_trials": 3}
    stored_before = {key: value for key, value in finding.to_dict().items() if key != "measured"}
    assert Finding.from_dict(stored_before).measured is None  # findings stored before measurements
    assert Finding.from_dict({**stored_before, "measured": {"speedup": "?"}}).measured is None


def test_a_measurement_reads_as_the_comparison_says_it():
    from workbench.experiments.ab import compare_rates
    from workbench.experiments.verify import measured_change_of

    for changed in ([1310, 1300, 1320], [860, 850, 870], [1000, 1012, 995], [1300, 1310]):
        comparison = compare_rates([1000, 1010, 990], changed)
        assert measured_change_of(comparison).describe() == comparison.describe()
    assert measured_change_of(compare_rates([1000.0], [])) is None
