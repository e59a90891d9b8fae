"""GPU board power under controlled duty cycles (the measurement behind perfmodel/power.py).

Runs on one NVIDIA GPU with torch and nvidia-ml-py:  python benchmarks/power_duty.py OUT.jsonl
Phases of a few seconds each: idle; bf16 matrix products back to back; large device-to-device
copies (memory-bound, like NCCL's copy kernels); each of them switched on and off with idle gaps of
several periods and on-fractions; alternations of products and copies; both at once on two
streams. NVML board power is sampled every 100 ms (the averaged reading and, where the driver has
it, the instantaneous one) and the total-energy counter is read at each phase's start and end.
Every phase records the seconds its kernels ran (timed with a synchronize after each launch
group), so the fit sees the compute share, copy share and idle share it caused.
GPU board power only: CPU, host memory and network are not included.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import pynvml as nvml
import torch

SAMPLE_S = 0.1


class Sampler(threading.Thread):
    def __init__(self, handle, out):
        super().__init__(daemon=True)
        self.handle, self.out, self.phase = handle, out, "start"
        self.stop_flag = threading.Event()
        self.instant = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)

    def run(self):
        while not self.stop_flag.is_set():
            t = time.time()
            rec = {"kind": "sample", "phase": self.phase, "t": t}
            try:
                rec["power_w"] = nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0
                rec["sm_mhz"] = nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM)
                rec["temp_c"] = nvml.nvmlDeviceGetTemperature(self.handle, nvml.NVML_TEMPERATURE_GPU)
                if self.instant is not None:
                    v = nvml.nvmlDeviceGetFieldValues(self.handle, [self.instant])[0]
                    if v.nvmlReturn == 0:
                        rec["instant_w"] = v.value.uiVal / 1000.0
            except nvml.NVMLError as e:
                rec["error"] = str(e)
            self.out.append(rec)
            time.sleep(max(0.0, SAMPLE_S - (time.time() - t)))


def main(path: str) -> int:
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    dev = torch.device("cuda")
    n = 8192
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    src = torch.empty(1 << 30, device=dev, dtype=torch.float32)  # 4 GiB
    src.uniform_()
    dst = torch.empty_like(src)
    s_copy = torch.cuda.Stream()
    records: list[dict] = []
    samples: list[dict] = []
    header = {"kind": "header", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "driver": nvml.nvmlSystemGetDriverVersion(),
              "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
              "matmul": f"bf16 {n}x{n}x{n} torch.mm, random data", "copy": "4 GiB fp32 device-to-device copy_",
              "sample_s": SAMPLE_S}
    sampler = Sampler(h, samples)
    sampler.start()

    def mm(k=4):
        for _ in range(k):
            torch.mm(a, b, out=c)

    def cp(k=1):
        for _ in range(k):
            dst.copy_(src)

    def busy(fn, seconds):
        """Run fn in launch groups until `seconds` of wall time have passed; return the time it ran."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn()
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    # warm-up: clocks up, kernels chosen
    busy(mm, 2.0)
    busy(cp, 0.5)

    def phase(name, body, **meta):
        sampler.phase = name
        torch.cuda.synchronize()
        e0, t0 = nvml.nvmlDeviceGetTotalEnergyConsumption(h), time.time()
        compute_s, copy_s = body()
        torch.cuda.synchronize()
        e1, t1 = nvml.nvmlDeviceGetTotalEnergyConsumption(h), time.time()
        wall = t1 - t0
        rec = {"kind": "phase", "phase": name, "t0": t0, "t1": t1, "wall_s": wall, "energy_j": (e1 - e0) / 1000.0,
               "mean_power_w": (e1 - e0) / 1000.0 / wall, "compute_s": compute_s, "copy_s": copy_s,
               "compute_share": min(compute_s / wall, 1.0), "copy_share": min(copy_s / wall, 1.0), **meta}
        records.append(rec)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in rec.items()
                          if k not in ("t0", "t1")}), flush=True)
        sampler.phase = "between"

    def idle(seconds):
        time.sleep(seconds)
        return 0.0, 0.0

    def duty(fn, kind, period, on_frac, seconds):
        on = off = 0.0
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            on += busy(fn, on_frac * period)
            t = time.perf_counter()
            time.sleep(max(0.0, (1 - on_frac) * period))
            off += time.perf_counter() - t
        return (on, 0.0) if kind == "compute" else (0.0, on)

    def alternate(c_frac, m_frac, period, seconds):
        on_c = on_m = 0.0
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            on_c += busy(mm, c_frac * period)
            on_m += busy(cp, m_frac * period)
            time.sleep(max(0.0, (1 - c_frac - m_frac) * period))
        return on_c, on_m

    def together(seconds):
        torch.cuda.synchronize()
        t = time.perf_counter()
        cp(10)
        torch.cuda.synchronize()
        one_copy = (time.perf_counter() - t) / 10
        iters = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            with torch.cuda.stream(s_copy):
                cp()
            mm(8)
            torch.cuda.synchronize()
            iters += 1
        w = time.perf_counter() - t0
        return w, iters * one_copy  # the copies' time as if alone; the products run throughout

    phase("idle_a", lambda: idle(6.0), pattern="idle", gap_s=6.0)
    phase("compute", lambda: (busy(mm, 6.0), 0.0), pattern="continuous")
    phase("copy", lambda: (0.0, busy(cp, 6.0)), pattern="continuous")
    for period in (0.02, 0.2, 1.0):
        for frac in (0.25, 0.5, 0.75):
            phase(f"compute_duty_p{period}_f{frac}", lambda: duty(mm, "compute", period, frac, 4.0),
                  pattern="duty", period_s=period, on_fraction=frac, gap_s=(1 - frac) * period)
    for period in (0.02, 0.2, 1.0):
        for frac in (0.25, 0.5, 0.75):
            phase(f"copy_duty_p{period}_f{frac}", lambda: duty(cp, "copy", period, frac, 4.0),
                  pattern="duty", period_s=period, on_fraction=frac, gap_s=(1 - frac) * period)
    for cf, mf in ((0.5, 0.5), (0.25, 0.5), (0.6, 0.2), (0.2, 0.2), (0.75, 0.25)):
        phase(f"alternate_c{cf}_m{mf}", lambda: alternate(cf, mf, 0.2, 4.0), pattern="alternate", period_s=0.2,
              gap_s=(1 - cf - mf) * 0.2)
    phase("together", lambda: together(5.0), pattern="overlapped")
    phase("idle_b", lambda: idle(6.0), pattern="idle", gap_s=6.0)
    sampler.stop_flag.set()
    sampler.join()
    with open(path, "w") as f:
        for rec in [header] + records + samples:
            f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("OUT", "."), "power_duty.jsonl")))
