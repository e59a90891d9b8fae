"""GPU board power and energy over the measured window, from NVML.

One monitor per rank, single use: `idle_power()` before the run, `start()` when the measured
window begins, `stop()` when it ends (returns the `energy` record value), then `samples()` for
the `power_sample` records. A monitor that cannot measure says why and never raises.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

import torch

from scalestudy.measure import energy

_NOT_CUDA = "device is CPU: NVML measures NVIDIA GPUs only"


def torch_device_uuid(device_index: int) -> str | None:
    """NVML-style UUID ('GPU-...') of the torch CUDA device, or None if torch cannot tell."""
    try:
        if not torch.cuda.is_available():
            return None
        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
    except Exception:  # noqa: BLE001 - any failure just means: map by index instead
        return None
    if not uuid:
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid


def nvml_handle(nvml: Any, device_index: int) -> tuple[Any, str]:
    """The NVML handle of torch's CUDA device `device_index`, and how it was found.

    torch numbers the devices that CUDA_VISIBLE_DEVICES leaves visible; NVML numbers all of them.
    The device UUID matches the two; failing that, the CUDA_VISIBLE_DEVICES entry; failing that,
    the index itself (right when every GPU is visible and CUDA orders them as NVML does)."""
    uuid = torch_device_uuid(device_index)
    if uuid:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(uuid), "uuid"
        except nvml.NVMLError:
            pass
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if device_index < len(visible):
        entry = visible[device_index]
        if entry.isdigit():
            return nvml.nvmlDeviceGetHandleByIndex(int(entry)), "cuda_visible_devices"
        if entry.startswith(("GPU-", "MIG-")):
            return nvml.nvmlDeviceGetHandleByUUID(entry), "cuda_visible_devices"
    return nvml.nvmlDeviceGetHandleByIndex(device_index), "index"


class PowerMonitor:
    def __init__(self, device_index: int | None, period_s: float = 0.1):
        if period_s <= 0:
            raise ValueError(f"sampling period must be positive, got {period_s}")
        self.device_index = device_index
        self.period_s = period_s
        self.available = False
        self.reason: str | None = None
        self.gpu_index: int | None = None
        self.mapping: str | None = None  # how the NVML device was matched to the torch device
        self.counter_supported = False
        self._nvml: Any = None
        self._handle: Any = None
        self._idle_power_w: float | None = None
        self._samples: list[tuple[float, float]] = []
        self._sample_errors: list[str] = []
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._t0 = 0.0
        self._e0: int | None = None
        self._open()

    def _open(self) -> None:
        if self.device_index is None:
            self.reason = _NOT_CUDA
            return
        try:
            import pynvml  # local: a monitor without NVML says why instead of failing (tests swap in a fake)
        except ImportError as e:
            self.reason = f"pynvml is not importable: {e}"
            return
        try:
            pynvml.nvmlInit()
        except Exception as e:  # noqa: BLE001 - NVMLError or a broken library: no measurement either way
            self.reason = f"NVML initialisation failed: {type(e).__name__}: {e}"
            return
        self._nvml = pynvml
        try:
            self._handle, self.mapping = nvml_handle(pynvml, self.device_index)
            self.gpu_index = int(pynvml.nvmlDeviceGetIndex(self._handle))
            pynvml.nvmlDeviceGetPowerUsage(self._handle)
        except Exception as e:  # noqa: BLE001
            self.reason = f"NVML cannot read the power of CUDA device {self.device_index}: {type(e).__name__}: {e}"
            self.close()
            return
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
            self.counter_supported = True
        except Exception as e:  # noqa: BLE001
            self.reason = (
                f"energy counter not supported on this GPU ({type(e).__name__}: {e}); energy from sampled power only"
            )
        self.available = True

    def close(self) -> None:
        """Release NVML (idempotent). `stop()` calls it."""
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - nothing left to measure anyway
                pass
            self._nvml = None

    def _power_w(self) -> float:
        return self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0

    def _sample(self) -> None:
        a = time.monotonic()
        try:
            p = self._power_w()
        except Exception as e:  # noqa: BLE001 - a missed sample is recorded, not fatal
            if len(self._sample_errors) < 10:
                self._sample_errors.append(f"{type(e).__name__}: {e}")
            return
        b = time.monotonic()
        self._samples.append(((a + b) / 2 - self._t0, p))

    def _read_counter(self) -> int | None:
        if not self.counter_supported:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception as e:  # noqa: BLE001
            self.reason = f"energy counter read failed: {type(e).__name__}: {e}"
            return None

    def idle_power(self, duration_s: float = 1.0) -> float | None:
        """Mean board power (W) sampled for `duration_s` now, before the run; kept for the record."""
        if not self.available or self._nvml is None:
            return None
        readings: list[float] = []
        end = time.monotonic() + duration_s
        while True:
            try:
                readings.append(self._power_w())
            except Exception:  # noqa: BLE001
                pass
            if time.monotonic() + self.period_s > end:
                break
            time.sleep(self.period_s)
        self._idle_power_w = sum(readings) / len(readings) if readings else None
        return self._idle_power_w

    def start(self) -> None:
        """Begin the measured window: read the energy counter, start sampling in a daemon thread."""
        if not self.available or self._nvml is None:
            return
        if self._thread is not None:
            raise RuntimeError("PowerMonitor is single use: start() was already called")
        self._e0 = self._read_counter()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="scalestudy-power", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        k = 0
        while True:
            self._sample()
            now = time.monotonic() - self._t0
            k = max(k + 1, math.floor(now / self.period_s) + 1)  # after a stall, skip the missed ticks
            if self._halt.wait(max(0.0, k * self.period_s - now)):
                return

    def stop(self) -> dict:
        """End the measured window; returns the `energy` record value and releases NVML."""
        if not self.available:
            return energy.unavailable_record(self.reason or "unavailable")
        if self._thread is None:
            self.close()
            return energy.unavailable_record("stop() before start(): the measured window never began")
        self._halt.set()
        self._thread.join()
        window_s = time.monotonic() - self._t0
        e1 = self._read_counter()
        self._sample()  # the power at the end of the window
        self.close()
        energy_j: float | None = None
        if self._e0 is not None and e1 is not None:
            try:
                energy_j = energy.counter_delta_j(self._e0, e1)
            except energy.EnergyCounterError as e:
                self.reason = str(e)
        ts = [t for t, _ in self._samples]
        ps = [p for _, p in self._samples]
        sampled_j = energy.sampled_energy_j(ts, ps, 0.0, window_s)
        if energy_j is None and sampled_j is None:
            errors = "; ".join(self._sample_errors)
            return energy.unavailable_record(
                f"no energy reading and no power sample: {self.reason or ''} {errors}".strip()
            )
        reason = self.reason
        if self._sample_errors:
            reason = "; ".join(filter(None, [reason, "power samples missed: " + self._sample_errors[0]]))
        return {
            "available": True,
            "gpu_index": self.gpu_index,
            "energy_j": energy_j,
            "window_s": window_s,
            "sampled_energy_j": sampled_j,
            "mean_power_w": energy.mean_power_w(energy_j if energy_j is not None else sampled_j, window_s),
            "idle_power_w": self._idle_power_w,
            "sample_period_s": self.period_s,
            "n_samples": len(self._samples),
            "method": energy.METHOD_COUNTER if energy_j is not None else energy.METHOD_SAMPLED,
            "scope": energy.SCOPE,
            "reason": reason,
        }

    def samples(self) -> list[dict]:
        """The `power_sample` record values of the window (empty without NVML)."""
        return [{"gpu_index": self.gpu_index, "t_s": round(t, 6), "power_w": p} for t, p in self._samples]
