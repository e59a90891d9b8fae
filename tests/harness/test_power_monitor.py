"""PowerMonitor against a fake pynvml (a synthetic power trace with a consistent energy counter),
and against the real NVML of a machine without a GPU."""

import math
import sys
import time
import types

import pytest

from scalestudy.harness import power
from scalestudy.measure import energy


def power_at(t: float) -> float:
    """Synthetic board power (W) at monotonic time t."""
    return 250.0 + 100.0 * math.sin(2 * math.pi * t / 3.0)


def energy_mj_at(t: float) -> int:
    """The exact integral of power_at from 0 to t, in mJ, as NVML's counter reports it."""
    joules = 250.0 * t - 100.0 * 3.0 / (2 * math.pi) * (math.cos(2 * math.pi * t / 3.0) - 1.0)
    return int(1_000_000_000 + joules * 1000)


class FakeNVMLError(Exception):
    pass


def fake_pynvml(
    *,
    energy_supported: bool = True,
    uuids: tuple[str, ...] = ("GPU-aaaa", "GPU-bbbb", "GPU-cccc"),
    fail_init: bool = False,
) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.calls = {"init": 0, "shutdown": 0}

    def init():
        if fail_init:
            raise FakeNVMLError("Driver Not Loaded")
        m.calls["init"] += 1

    def by_uuid(u):
        if u not in uuids:
            raise FakeNVMLError("Not Found")
        return ("handle", uuids.index(u))

    def by_index(i):
        if not 0 <= i < len(uuids):
            raise FakeNVMLError("Invalid Argument")
        return ("handle", i)

    def total_energy(h):
        if not energy_supported:
            raise FakeNVMLError("Not Supported")
        return energy_mj_at(time.monotonic())

    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.__setitem__("shutdown", m.calls["shutdown"] + 1)
    m.nvmlDeviceGetHandleByUUID = by_uuid
    m.nvmlDeviceGetHandleByIndex = by_index
    m.nvmlDeviceGetIndex = lambda h: h[1]
    m.nvmlDeviceGetPowerUsage = lambda h: int(power_at(time.monotonic()) * 1000)
    m.nvmlDeviceGetTotalEnergyConsumption = total_energy
    return m


@pytest.fixture
def no_torch_uuid(monkeypatch):
    monkeypatch.setattr(power, "torch_device_uuid", lambda i: None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_counter_and_sampled_energy_agree(monkeypatch, no_torch_uuid):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    mon = power.PowerMonitor(1, period_s=0.02)
    assert mon.available and mon.reason is None and mon.gpu_index == 1
    idle = mon.idle_power(duration_s=0.1)
    assert 150.0 <= idle <= 350.0
    mon.start()
    time.sleep(0.6)
    rec = mon.stop()
    assert rec["available"] is True
    assert rec["method"] == energy.METHOD_COUNTER
    assert rec["gpu_index"] == 1
    assert rec["window_s"] == pytest.approx(0.6, abs=0.2)
    assert rec["energy_j"] == pytest.approx(rec["sampled_energy_j"], rel=0.05)
    assert rec["mean_power_w"] == pytest.approx(rec["energy_j"] / rec["window_s"])
    assert rec["idle_power_w"] == idle
    assert rec["sample_period_s"] == 0.02
    assert rec["scope"] == energy.SCOPE
    assert rec["reason"] is None
    samples = mon.samples()
    assert rec["n_samples"] == len(samples) >= 10
    assert all(s["gpu_index"] == 1 for s in samples)
    ts = [s["t_s"] for s in samples]
    assert ts == sorted(ts) and 0.0 <= ts[0] < 0.05 and ts[-1] >= rec["window_s"] - 0.01
    assert all(150.0 <= s["power_w"] <= 350.0 for s in samples)
    assert fake.calls == {"init": 1, "shutdown": 1}


def test_without_energy_counter_power_is_still_sampled(monkeypatch, no_torch_uuid):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(energy_supported=False))
    mon = power.PowerMonitor(0, period_s=0.02)
    assert mon.available and not mon.counter_supported
    assert "energy counter not supported" in mon.reason
    mon.start()
    time.sleep(0.2)
    rec = mon.stop()
    assert rec["available"] is True and rec["energy_j"] is None
    assert rec["method"] == energy.METHOD_SAMPLED
    assert rec["sampled_energy_j"] > 0
    assert rec["mean_power_w"] == pytest.approx(rec["sampled_energy_j"] / rec["window_s"])
    assert rec["idle_power_w"] is None  # idle_power() was not called
    assert "energy counter not supported" in rec["reason"]


def test_uuid_maps_the_torch_device_to_its_nvml_device(monkeypatch):
    fake = fake_pynvml()
    monkeypatch.setattr(power, "torch_device_uuid", lambda i: {0: "GPU-cccc"}.get(i))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # contradicts the UUID: the UUID wins
    assert power.nvml_handle(fake, 0) == (("handle", 2), "uuid")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    mon = power.PowerMonitor(0)
    assert mon.gpu_index == 2 and mon.mapping == "uuid"
    mon.close()


def test_cuda_visible_devices_mapping_without_uuid(monkeypatch, no_torch_uuid):
    fake = fake_pynvml()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert power.nvml_handle(fake, 0) == (("handle", 2), "cuda_visible_devices")
    assert power.nvml_handle(fake, 1) == (("handle", 0), "cuda_visible_devices")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")
    assert power.nvml_handle(fake, 0) == (("handle", 1), "cuda_visible_devices")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert power.nvml_handle(fake, 1) == (("handle", 1), "index")


def test_torch_uuid_gets_the_nvml_prefix(monkeypatch):
    import torch

    class Props:
        uuid = "58b0d2a6-0e3d-4c2f-9a7b-0123456789ab"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    assert power.torch_device_uuid(0) == "GPU-58b0d2a6-0e3d-4c2f-9a7b-0123456789ab"


def assert_unavailable(mon: power.PowerMonitor) -> None:
    assert mon.available is False
    assert mon.reason
    assert mon.idle_power(0.05) is None
    mon.start()
    rec = mon.stop()
    assert rec["available"] is False and rec["reason"] == mon.reason
    for k in energy.NUMERIC_FIELDS:
        assert rec[k] is None
    assert mon.samples() == []


def test_no_nvml_on_this_machine(no_torch_uuid):
    pytest.importorskip("pynvml")
    mon = power.PowerMonitor(0)
    if mon.available:
        mon.close()
        pytest.skip("this machine has a working NVML")
    assert_unavailable(mon)


def test_cpu_device(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    mon = power.PowerMonitor(None)
    assert "CPU" in mon.reason
    assert_unavailable(mon)


def test_pynvml_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    mon = power.PowerMonitor(0)
    assert "pynvml" in mon.reason
    assert_unavailable(mon)


def test_nvml_init_error_text_is_kept(monkeypatch, no_torch_uuid):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fail_init=True))
    mon = power.PowerMonitor(0)
    assert "Driver Not Loaded" in mon.reason
    assert_unavailable(mon)


def test_stop_without_start(monkeypatch, no_torch_uuid):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    rec = power.PowerMonitor(0).stop()
    assert rec["available"] is False and "never began" in rec["reason"]
    assert fake.calls["shutdown"] == 1


def test_unknown_device(monkeypatch, no_torch_uuid):
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    mon = power.PowerMonitor(7)
    assert "device 7" in mon.reason
    assert fake.calls["shutdown"] == 1
    assert_unavailable(mon)
