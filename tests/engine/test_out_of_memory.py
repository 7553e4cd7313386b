"""Out of memory: the failed run's memory is really returned before it is reported, and the next run works."""

import multiprocessing
import weakref

import pytest
import torch
from engine_helpers import run_to_end, tiny_config

from workbench.engine import run
from workbench.engine import train_step as train_step_module
from workbench.engine.events import RunEnded
from workbench.engine.failures import describe_failure, is_out_of_memory


def oom_in_forward(monkeypatch, error_type: type, message: str) -> dict:
    """The model's forward hook allocates real tensors, then raises a new ``error_type(message)`` (as torch
    does: an exception made beforehand would keep its traceback alive); weakrefs watch them and the model."""
    refs: dict = {}
    real_build = train_step_module.build_model

    def build(*args):
        model = real_build(*args)

        def hook(module, inputs, output):
            workspace = torch.ones(4_000_000)  # 16 MB allocated by the step that fails
            refs["workspace"] = weakref.ref(workspace)
            refs["input"] = weakref.ref(inputs[0])
            refs["output"] = weakref.ref(output)
            raise error_type(message)

        model.register_forward_hook(hook)
        refs["model"] = weakref.ref(model)
        return model

    monkeypatch.setattr(train_step_module, "build_model", build)
    return refs


@pytest.mark.parametrize("num_workers", [0, 2])
def test_out_of_memory_frees_the_failed_steps_tensors_and_the_model_before_it_is_reported(monkeypatch, num_workers):
    refs = oom_in_forward(monkeypatch, torch.cuda.OutOfMemoryError, "CUDA out of memory. Tried to allocate 2.00 GiB")
    config = tiny_config(num_workers=num_workers, persistent_workers=True, batch_size=64)
    alive_at_the_end = None
    for event in run(config):
        if isinstance(event, RunEnded):
            ended = event
            alive_at_the_end = [name for name, ref in refs.items() if ref() is not None]
    assert set(refs) == {"workspace", "input", "output", "model"}  # the hook ran: real tensors existed
    assert alive_at_the_end == []  # nothing of the failed run survives its RunEnded
    assert ended.status == "failed" and ended.kind == "out_of_memory"
    assert ended.reason == (
        "CUDA out of memory with small-cnn at batch_size=64, fp32 (Tried to allocate 2.00 GiB): try a smaller "
        "batch with accumulation_steps (batch_size=32 with accumulation_steps=2 keeps the effective batch of 64), "
        "or fp16/bf16"
    )
    assert "OutOfMemoryError" in ended.traceback and "in hook" in ended.traceback
    assert multiprocessing.active_children() == []

    monkeypatch.undo()  # the next, smaller run in the same process works
    assert run_to_end(tiny_config(batch_size=32))[-1].status == "finished"


@pytest.mark.parametrize("message", [
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported",  # the allocator, raw
    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
])
def test_out_of_memory_said_as_a_plain_runtime_error_is_recognised(monkeypatch, message):
    refs = oom_in_forward(monkeypatch, RuntimeError, message)
    events = list(run(tiny_config(precision="fp32")))
    ended = events[-1]
    assert ended.kind == "out_of_memory" and ended.reason.startswith("CUDA out of memory with small-cnn")
    assert all(ref() is None for ref in refs.values())


def test_host_memory_running_out_is_named_as_such():
    error = RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                         "you tried to allocate 68719476736 bytes.")
    failure = describe_failure(error, tiny_config(precision="fp32", batch_size=1))
    assert failure.kind == "out_of_memory"
    assert failure.reason == ("host (CPU) memory ran out with small-cnn at batch_size=1, fp32: try a smaller batch "
                              "with accumulation_steps, or fp16/bf16")


def test_other_runtime_errors_are_not_out_of_memory():
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)"))
    assert describe_failure(RuntimeError("boom"), tiny_config()).kind == "error"


@pytest.mark.gpu
def test_a_real_out_of_memory_returns_the_memory_and_a_small_run_follows(capsys):
    """resnet18 with a batch far beyond an 8 GiB cap: out_of_memory; then a small run fits under the same cap."""
    device = torch.device("cuda", torch.cuda.current_device())
    total = torch.cuda.get_device_properties(device).total_memory
    cap = 8 * 2**30
    torch.cuda.empty_cache()
    before_allocated, before_reserved = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), device)
    try:
        big = tiny_config(device="cuda", model="resnet18", pipeline="gpu-resident", augment="gpu",
                          synthetic_size=8192, batch_size=8192, max_steps=2, log_every=1)
        failed = run_to_end(big)[-1]
        failed_peak = torch.cuda.max_memory_allocated(device)
        after_allocated, after_reserved = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
        small = run_to_end(big.replace(synthetic_size=2048, batch_size=128, max_steps=8, log_every=4))[-1]
        small_peak = small.summary.peak_allocated_bytes
        final_allocated = torch.cuda.memory_allocated(device)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device)
    with capsys.disabled():
        mib = 2**20
        print(f"\n[real OOM, {torch.cuda.get_device_name(device)}, cap {cap / 2**30:.0f} GiB] allocated before "
              f"{before_allocated / mib:.1f} MiB, reserved before {before_reserved / mib:.1f} MiB; failed run's peak "
              f"{failed_peak / mib:.1f} MiB; after it: allocated {after_allocated / mib:.1f} MiB, reserved "
              f"{after_reserved / mib:.1f} MiB; small run: {small.status}, peak {small_peak / mib:.1f} MiB; "
              f"allocated after both {final_allocated / mib:.1f} MiB")
    assert failed.status == "failed" and failed.kind == "out_of_memory", failed.reason
    assert "batch_size=8192, fp32" in failed.reason
    assert after_allocated <= before_allocated  # nothing of the failed run is still allocated
    assert after_reserved <= before_reserved + 32 * 2**20  # and its cache went back to the driver
    assert small.status == "finished", small.reason
    # cuBLAS keeps a per-thread workspace (up to 32 MiB) once the small run's classifier has used it.
    assert final_allocated <= before_allocated + 64 * 2**20
