from workbench.engine.events import RunSummary
from workbench.engine.verdict import bottleneck_verdict


def test_input_bound_comes_first():
    verdict = bottleneck_verdict(0.4, 0.5, "cuda")
    assert verdict.startswith("Input-bound: training waited for the next batch 40% of the time")


def test_host_bound_gpu_when_data_is_ready_but_the_gpu_idles():
    assert bottleneck_verdict(0.02, 0.45, "cuda").startswith("Host-bound: data was ready, yet the steps spanned only 45% of the time on the GPU")


def test_compute_bound():
    assert bottleneck_verdict(0.01, 0.98, "cuda").startswith("Compute-bound: the steps spanned 98% of the time on the GPU")
    assert "A CUDA GPU" in bottleneck_verdict(0.01, 0.5, "cpu")  # a CPU has no launch gap to speak of


def test_no_verdict_without_measurements():
    assert bottleneck_verdict(None, 0.5, "cuda") is None
    assert RunSummary(status="failed").verdict is None
    assert RunSummary(status="finished", data_wait_fraction=0.3, device_span_fraction=0.7, device="cuda").verdict
