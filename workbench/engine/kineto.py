"""Kineto's profiler events → timeline activities (no torch: the records are plain dicts).

``record(event)`` reads one ``torch.profiler`` Kineto event (``prof.profiler.kineto_results.events()``)
into the dict form the test fixtures hold: name, device_type ("DeviceType.CPU" / "DeviceType.CUDA"),
start_ns, end_ns, device_index, device_resource_id (the CUDA stream, or the host thread),
correlation_id. ``activities(records, device_index)`` classifies them:

- device side, by name, as CUPTI names them: "Memcpy HtoD (Pinned -> Device)" is a copy, "Memset (Device)" a
  fill (ROCm's blit kernels too: "__amd_rocclr_copyBuffer…", "__amd_rocclr_fill…"), an NCCL / RCCL kernel
  ("ncclDevKernel_…", "ncclKernel_…") communication, anything else a kernel, except the GPU-row copies of host
  annotations;
- host side: "cuda…"/"cu…" calls (and ROCm's "hip…") are the runtime/driver API (their correlation id is the one
  CUPTI gives the device work they launched), "ProfilerStep#N" a training step,
  "workbench.data_wait" the loop's wait for the next batch, the rest host ops. The profiler's
  own bookkeeping ("Activity Buffer Request", on no thread) is left out.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from workbench.engine.timeline import (
    COMMUNICATION, CPU_OP, DATA_WAIT, KERNEL, MEMCPY, MEMSET, RUNTIME, STEP, Activity,
)

DATA_WAIT_ANNOTATION = "workbench.data_wait"
STEP_PREFIX = "ProfilerStep#"
# Collective kernels, as NCCL and RCCL name them (HTA's rule, hta/common/types.py, with RCCL's and HCCL's names).
COMMUNICATION_PREFIXES = ("nccl", "rccl", "hccl")
COMMUNICATION_MARKS = ("ncclKernel", "ncclDevKernel")
# ROCm's runtime copies and fills memory with blit kernels of its own (CLR's __amd_rocclr_copyBuffer…,
# __amd_rocclr_fillBufferAligned…), written as kernels: they are copies and fills, not compute. (HTA counts them as
# compute; its replay in trace_analysis.hta_rules does too.)
ROCM_COPY_KERNELS, ROCM_FILL_KERNELS = "__amd_rocclr_copy", "__amd_rocclr_fill"
# Where a copy or fill moves its bytes, by its name: CUPTI names a copy's direction and, to the GPU, its source
# ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pinned -> Device)"; ROCm's "Memcpy HtoD (Host -> Device)" does
# not say); other copies (DtoD, PtoP) and fills stay on the GPUs; ROCm's blit copies may go either way.
TO_GPU_MARK, TO_HOST_MARK, PAGEABLE_MARK, PINNED_MARK = "HtoD", "DtoH", "Pageable", "Pinned"
TO_GPU_PAGEABLE, TO_GPU_PINNED, TO_GPU = ("to the GPU from pageable memory", "to the GPU from pinned memory",
                                          "to the GPU")
TO_GPU_KINDS = (TO_GPU_PAGEABLE, TO_GPU_PINNED, TO_GPU)
TO_HOST, ON_GPU, EITHER_WAY = "to the host", "on the GPU", "either way (ROCm's copy kernels)"
# Host records that are the profiler's own work, not the program's.
PROFILER_RECORDS = frozenset({"Activity Buffer Request"})
# Runtime and driver calls that take memory from the driver or give it back (CUDA's, its driver's, ROCm's; the
# expandable segments' cuMem* calls among them): the caching allocator's misses, cuDNN's workspaces.
ALLOCATOR_CALLS = ("cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaHostRegister", "cudaHostUnregister",
                   "cuMemAlloc", "cuMemFree", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease",
                   "cuMemAddressReserve", "cuMemAddressFree", "cuMemHostAlloc",
                   "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree", "hipExtMallocWithFlags")
# Host ops that torch.compile's code runs under (Dynamo's region, AOTAutograd's forward and backward): they wrap
# the ops a script wrote (an .item() after a graph break runs inside the frame's region).
COMPILED_CODE_OPS = ("Torch-Compiled Region", "CompiledFunction")
_FIELDS = ("name", "device_type", "start_ns", "end_ns", "device_index", "device_resource_id", "correlation_id")


def record(event: Any) -> dict[str, Any]:
    """One torch Kineto event as a plain dict (the fields ``activities`` reads)."""
    return {name: _plain(getattr(event, name)()) for name in _FIELDS}


def _plain(value: Any) -> Any:
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


def activities(records: Iterable[Mapping[str, Any]], device_index: Optional[int] = None) -> list[Activity]:
    """Timeline activities from Kineto records; device work of other GPUs than ``device_index`` is dropped."""
    records = list(records)
    # Kineto mirrors each host annotation onto the GPU row it launched work on ("gpu_user_annotation":
    # same name, same correlation id as the host record). It is a label over kernels, not device work.
    host_labels = {(r["name"], r.get("correlation_id")) for r in records if not _is_device(r.get("device_type"))}
    result: list[Activity] = []
    for r in records:
        name = str(r["name"])
        start, end = int(r["start_ns"]), int(r["end_ns"])
        stream = int(r.get("device_resource_id") or 0)
        correlation = int(r.get("correlation_id") or 0)
        if _is_device(r.get("device_type")):
            if (name, r.get("correlation_id")) in host_labels:
                continue
            if device_index is not None and int(r.get("device_index", device_index)) != device_index:
                continue
            kind = device_kind(name)
        else:
            if name in PROFILER_RECORDS:
                continue
            kind = host_kind(name)
        result.append(Activity(start, end, kind, stream, name, correlation))
    return result


def _is_device(device_type: Any) -> bool:
    return str(device_type).rsplit(".", 1)[-1].upper() == "CUDA"


def device_kind(name: str) -> str:
    """A device record's kind by its name: copy, fill, communication (NCCL / RCCL) or compute kernel."""
    if name.startswith(("Memcpy", "hipMemcpy", ROCM_COPY_KERNELS)):
        return MEMCPY
    if name.startswith(("Memset", "hipMemset", ROCM_FILL_KERNELS)):
        return MEMSET
    if name.startswith(COMMUNICATION_PREFIXES) or any(mark in name for mark in COMMUNICATION_MARKS):
        return COMMUNICATION
    return KERNEL


def copy_direction(name: str) -> str:
    """Where a copy or fill (a MEMCPY or MEMSET record) moves its bytes: one of TO_GPU_KINDS (by its source where the
    name says it), TO_HOST, ON_GPU or EITHER_WAY."""
    if name.startswith(ROCM_COPY_KERNELS):
        return EITHER_WAY
    if TO_GPU_MARK in name:
        return TO_GPU_PAGEABLE if PAGEABLE_MARK in name else TO_GPU_PINNED if PINNED_MARK in name else TO_GPU
    return TO_HOST if TO_HOST_MARK in name else ON_GPU


def host_kind(name: str) -> str:
    if name == DATA_WAIT_ANNOTATION:
        return DATA_WAIT
    if name.startswith(STEP_PREFIX):
        return STEP
    if name.startswith(("cuda", "hip")) or (name.startswith("cu") and name[2:3].isupper()):
        return RUNTIME
    return CPU_OP
