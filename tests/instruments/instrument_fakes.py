"""Stand-ins for the instruments' GPU side: NVML answering for a board that draws a constant power,
and kernels that take the time a GPU's would without a GPU; a raw log written from them as the
harness writes one."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import torch

from scalestudy.harness import provenance
from scalestudy.harness.instruments.common import write_run_json
from scalestudy.measure import rawlog


class FakeNVML:
    """pynvml's functions the instruments call, for a board at `watts` whose energy counter runs with the clock."""

    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_FI_DEV_POWER_INSTANT = 186

    class NVMLError(Exception):
        pass

    def __init__(self, watts: float = 300.0, fail_init: bool = False):
        self.watts, self.fail_init, self.t0 = watts, fail_init, time.time()

    def nvmlInit(self):
        if self.fail_init:
            raise self.NVMLError("Driver Not Loaded")

    def nvmlDeviceGetHandleByIndex(self, index):
        return ("board", index)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        raise self.NVMLError("Not Found")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return int((time.time() - self.t0) * self.watts * 1000)

    def nvmlDeviceGetPowerUsage(self, handle):
        return int(self.watts * 1000)

    def nvmlDeviceGetClockInfo(self, handle, which):
        return 1980

    def nvmlDeviceGetTemperature(self, handle, which):
        return 41

    def nvmlDeviceGetFieldValues(self, handle, ids):
        return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(uiVal=int(self.watts * 1000)))]

    def nvmlSystemGetDriverVersion(self):
        return "580.0"

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return 700_000


class DutyStub:
    def mm(self, k):
        pass

    def cp(self, k=1):
        pass

    def cp_beside(self):
        pass

    def sync(self):
        pass


class CommStub:
    """Each launch takes its phase on the host clock; every block completes one chunk a period."""

    def __init__(self):
        self.done = []

    def poll(self, blocks, ns):
        time.sleep(ns / 1e9)

    def trickle(self, blocks, period_ns, ns):
        time.sleep(ns / 1e9)
        self.done = [ns // period_ns] * blocks

    def reset_chunks(self):
        self.done = []

    def chunks_done(self, blocks):
        return self.done[:blocks]

    def matmuls(self, seconds):
        time.sleep(seconds)

    def sync(self):
        pass


class BurstStub:
    """Every product takes `product_s` of GPU time."""

    def __init__(self, product_s: float):
        self.product_s = product_s

    def products_s(self, calls):
        time.sleep(calls * self.product_s)
        return calls * self.product_s

    def sync(self):
        pass


def record_run(run_dir: Path, spec, measurement: dict, body) -> Path:
    """A finished, sealed run of `spec` whose records `body(log)` writes, as run_instrument finishes one."""
    run_dir.mkdir(parents=True)
    log = rawlog.RankLog(run_dir, 0, spec.run_id)
    write_run_json(run_dir, spec, measurement, [provenance.local_facts(torch.device("cpu"))])
    body(log)
    log.write_status("ok")
    rawlog.try_finalize(run_dir, 1)
    rawlog.compress_run(run_dir)
    return run_dir
