"""CUDA graphs (compile=reduce-overhead or max-autotune) never train with gradient accumulation: each replay
writes into the memory of the last, so the next micro-batch overwrites the gradients being accumulated
(pytorch #169545). Validation refuses it with the reason, the findings do not propose it, the tune does not
try it: the three agree (issue 31 item 2)."""

import pytest
from builders import GPU, tiny

from workbench.config import RunConfig
from workbench.engine.findings import find
from workbench.engine.run_facts import RunFacts
from workbench.engine.run_summary import RunSummary
from workbench.experiments.tune import candidates
from workbench.gui.settings_model import fields_named_in, problems

LAUNCH_BOUND = dict(profile_samples=2, kernel_busy_fraction=0.25, idle_waiting_for_data_fraction=0.0,
                    idle_waiting_for_host_fraction=0.62, idle_other_fraction=0.0, kernels_per_step=92.0,
                    median_kernel_seconds=9e-6)


def launch_bound_findings(config: RunConfig):
    summary = RunSummary(status="finished", images_per_sec=10_000.0, data_wait_fraction=0.01,
                         device_span_fraction=0.99, **LAUNCH_BOUND)
    return find(RunFacts(config=config, summary=summary, device_type="cuda", cpu_count=16, bf16_supported=True,
                         cuda_available=True, total_memory_bytes=80 * 2**30))


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_validation_refuses_cuda_graphs_with_accumulation_and_says_why(mode):
    config = RunConfig(compile=mode, accumulation_steps=4)
    (problem,) = [p for p in config.validate(GPU) if "accumulation_steps=4" in p]
    assert problem.startswith(f"compile={mode} with accumulation_steps=4: CUDA graphs replay")
    assert "pytorch #169545" in problem and "use compile=default, or accumulation_steps=1" in problem
    assert problem in problems(config, GPU)  # the form shows the same line and marks both settings
    assert {"compile", "accumulation_steps"} <= fields_named_in(problem, config, GPU)
    # Either alone is fine.
    assert config.replace(accumulation_steps=1).validate(GPU) == []
    assert config.replace(compile="default").validate(GPU) == []


def test_findings_propose_cuda_graphs_only_without_accumulation_and_say_why_not():
    plain = [(f.field, f.value) for f in launch_bound_findings(RunConfig())]
    assert ("compile", "reduce-overhead") in plain
    accumulating = launch_bound_findings(RunConfig(accumulation_steps=4))
    assert ("compile", "reduce-overhead") not in [(f.field, f.value) for f in accumulating]
    assert "CUDA graphs are not proposed: compile=reduce-overhead with accumulation_steps=4" in accumulating[0].text
    for finding in accumulating:  # every remedy a finding proposes is a run that validation accepts
        if finding.field is not None:
            assert RunConfig(accumulation_steps=4).replace(**{finding.field: finding.value}).validate(GPU) == []


def test_the_tune_never_tries_cuda_graphs_with_accumulation():
    start = tiny(device="auto", max_steps=20)
    assert {"compile": "reduce-overhead"} in candidates("compile", start, GPU)
    accumulating = start.replace(accumulation_steps=2)
    assert {"compile": "reduce-overhead"} not in candidates("compile", accumulating, GPU)
    assert {"compile": "default"} in candidates("compile", accumulating, GPU)
    graphs = start.replace(compile="reduce-overhead")
    assert candidates("accumulation_steps", graphs, GPU) == []  # 2 and 4 would be refused; 1 is no change
    for knob in ("compile", "accumulation_steps"):
        for base in (start, accumulating, graphs):
            for change in candidates(knob, base, GPU):
                assert base.replace(**change).validate(GPU) == [], (knob, base, change)
