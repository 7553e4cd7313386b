"""pynvml as the driver answers, for tests on a machine without a GPU (engine/nvml.py is its one user).

Device memory, utilisation, compute processes, power (mW), the SM clock, clock-event bits, PCIe
throughput (KB/s) and GPM: samples that know when they were taken, and metrics computed only from a
start sample taken before the end sample. ``unsupported`` names the calls that raise NVML's
"Not Supported"; ``gpm=False`` is a GPU before Hopper; ``gpm=None`` an nvidia-ml-py without GPM.
"""

from __future__ import annotations

import itertools
import types

GPM_VALUES = {2: 41.0, 3: 22.0, 5: 9.0, 10: 30.0}  # SM_UTIL, SM_OCCUPANCY, ANY_TENSOR_UTIL, DRAM_BW_UTIL (percent)


class NotSupported(Exception):
    """pynvml.NVMLError_NotSupported prints as NVML's error string."""

    def __str__(self) -> str:
        return "Not Supported"


def fake_pynvml(processes=(), list_error=None, used=6 * 2**30, total=80 * 2**30, unsupported=(), gpm=True,
                power_mw=312_500, clock_mhz=1980, clock_events=0x4, pcie_kb=(1000, 250), clock=None, mig=None):
    """``clock`` (seconds), where given, times the GPM samples: metrics over samples 100 ms apart or closer read 0,
    as NVML's documentation of nvmlGpmSampleGet warns.

    ``mig``: None, a GPU without MIG; "instance", a card split into MIG instances whose one instance ("MIG-1234",
    ``used``/``total`` of its own) NVML finds by UUID; "unlisted", the same card where NVML finds no such UUID.
    Every read of the whole card ("card") says 80 GiB with 70 used."""
    fake = types.ModuleType("pynvml")
    fake.calls = []  # init / shutdown, in order
    fake.gpm_samples_alive = set()
    fake.nvmlInit = lambda: fake.calls.append("init")
    fake.nvmlShutdown = lambda: fake.calls.append("shutdown")
    fake.nvmlSystemGetDriverVersion = lambda: b"580.65.06"
    fake.nvmlDeviceGetHandleByUUID = lambda uuid: "handle"
    fake.nvmlDeviceGetHandleByIndex = lambda index: "handle"
    if mig is not None:
        def by_uuid(uuid):
            if mig == "instance" and uuid == "MIG-1234":
                return "instance"
            raise RuntimeError("Not Found")
        fake.nvmlDeviceGetHandleByUUID = by_uuid
        fake.nvmlDeviceGetHandleByIndex = lambda index: "card"
        fake.nvmlDeviceIsMigDeviceHandle = lambda handle: int(handle == "instance")
        fake.nvmlDeviceGetMigMode = lambda handle: [1, 1]
    fake.NVML_SUCCESS, fake.NVML_CLOCK_SM = 0, 1
    fake.NVML_PCIE_UTIL_TX_BYTES, fake.NVML_PCIE_UTIL_RX_BYTES = 0, 1

    def answer(name, value):
        def call(*args):
            if name in unsupported:
                raise NotSupported()
            return value(*args)
        setattr(fake, name, call)

    def memory_info(handle):
        if handle == "card":
            return types.SimpleNamespace(used=70 * 2**30, total=80 * 2**30, free=10 * 2**30)
        return types.SimpleNamespace(used=used, total=total, free=total - used)

    answer("nvmlDeviceGetMemoryInfo", memory_info)
    answer("nvmlDeviceGetUtilizationRates", lambda handle: types.SimpleNamespace(gpu=87, memory=40))
    answer("nvmlDeviceGetPowerUsage", lambda handle: power_mw)
    answer("nvmlDeviceGetClockInfo", lambda handle, clock: clock_mhz if clock == fake.NVML_CLOCK_SM else 0)
    answer("nvmlDeviceGetCurrentClocksEventReasons", lambda handle: clock_events)
    answer("nvmlDeviceGetPcieThroughput", lambda handle, counter: pcie_kb[0] if counter == 1 else pcie_kb[1])

    def compute_processes(handle):
        if list_error is not None:
            raise list_error
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=memory) for pid, memory in processes]

    fake.nvmlDeviceGetComputeRunningProcesses = compute_processes
    if gpm is None:
        return fake
    ticks = itertools.count(1)
    fake.NVML_GPM_METRICS_GET_VERSION = 1
    fake.NVML_GPM_METRIC_SM_UTIL, fake.NVML_GPM_METRIC_SM_OCCUPANCY = 2, 3
    fake.NVML_GPM_METRIC_ANY_TENSOR_UTIL, fake.NVML_GPM_METRIC_DRAM_BW_UTIL = 5, 10
    fake.nvmlGpmQueryDeviceSupport = lambda handle: types.SimpleNamespace(version=1, isSupportedDevice=int(gpm))

    def alloc():
        sample = types.SimpleNamespace(taken=None)
        fake.gpm_samples_alive.add(id(sample))
        return sample

    def get(handle, sample):
        sample.taken = next(ticks)
        sample.at = clock() if clock is not None else None
        return sample

    def free(sample):
        fake.gpm_samples_alive.discard(id(sample))

    class MetricsGet:  # c_nvmlGpmMetricsGet_t
        def __init__(self):
            self.version = self.numMetrics = 0
            self.sample1 = self.sample2 = None
            self.metrics = [types.SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(98)]

    def metrics_get(request):
        assert request.version == 1
        assert request.sample1.taken < request.sample2.taken, "GPM's first sample must come before its second"
        too_close = clock is not None and request.sample2.at - request.sample1.at <= 0.1
        for metric in request.metrics[:request.numMetrics]:
            metric.value = 0.0 if too_close else GPM_VALUES[metric.metricId]
        return request

    fake.nvmlGpmSampleAlloc, fake.nvmlGpmSampleGet, fake.nvmlGpmSampleFree = alloc, get, free
    fake.c_nvmlGpmMetricsGet_t, fake.nvmlGpmMetricsGet = MetricsGet, metrics_get
    return fake
