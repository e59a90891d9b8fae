"""How fast matrix products run in short bursts, against back to back (the speed side of the power limiter).

    python3 benchmarks/burst_rate.py OUT.jsonl      # one NVIDIA GPU; torch, nvidia-ml-py; gzip OUT before committing

perfmodel/power.py fits the board limiter as holding an average: products in bursts shorter than
its window (133 ms on the lent H200) run at full clock and draw more than the cap. Only their
power is carried; whether they also run faster was never measured. This measures it: bf16
8192^3 products in bursts of about BURSTS_MS milliseconds, each followed by an idle gap of GAP_MS
(an exposed collective's wait), and back to back; PHASE_S seconds a phase. Each burst is timed on
the GPU (CUDA events around its launches); a phase records its products, their GPU time, the rate
(TFLOP/s), the NVML energy counter's mean power and, through power_duty.Sampler, the SM clock and
board power every 100 ms. GPU board power only.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pynvml as nvml
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matmul_sweep import products_s  # noqa: E402
from power_duty import SAMPLE_S, Sampler  # noqa: E402

N = 8192
BURSTS_MS = (5, 10, 25, 50, 100, 250, 1000)
GAP_MS = 10.0
PHASE_S = 4.0
REST_S = 2.0


def main(path: str) -> int:
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    a = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(N, N, device="cuda", dtype=torch.bfloat16)
    flops = 2.0 * N ** 3
    samples: list[dict] = []
    records = [{"kind": "header", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                "driver": nvml.nvmlSystemGetDriverVersion(),
                "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
                "matmul": f"bf16 {N}x{N}x{N} torch.mm, random data", "gap_ms": GAP_MS, "phase_s": PHASE_S,
                "sample_s": SAMPLE_S}]
    sampler = Sampler(h, samples)
    sampler.start()

    def products(k: int) -> float:
        return products_s(a, b, c, k)

    products(200)  # warm-up: kernels chosen, clocks settled at the limit
    one_s = products(50) / 50  # a product back to back, at the limit

    def phase(name: str, burst_ms: float | None) -> None:
        sampler.phase = "rest"
        time.sleep(REST_S)
        torch.cuda.synchronize()
        sampler.phase = name
        k = None if burst_ms is None else max(1, round(burst_ms / 1000.0 / one_s))
        e_start, t0 = nvml.nvmlDeviceGetTotalEnergyConsumption(h), time.perf_counter()
        n, gpu_s, bursts = 0, 0.0, 0
        while time.perf_counter() - t0 < PHASE_S:
            step = 20 if k is None else k
            gpu_s += products(step)
            n += step
            bursts += 1
            if k is not None:
                time.sleep(GAP_MS / 1000.0)
        wall = time.perf_counter() - t0
        energy = (nvml.nvmlDeviceGetTotalEnergyConsumption(h) - e_start) / 1000.0
        rec = {"kind": "phase", "phase": name, "burst_products": k, "burst_ms_target": burst_ms,
               "bursts": bursts, "products": n, "gpu_s": gpu_s, "wall_s": wall,
               "burst_ms_measured": 1000.0 * gpu_s / bursts if k is not None else None,
               "compute_share": gpu_s / wall, "tflops": n * flops / gpu_s / 1e12,
               "mean_power_w": energy / wall, "energy_j": energy}
        records.append(rec)
        print(json.dumps({key: (round(v, 4) if isinstance(v, float) else v) for key, v in rec.items()}), flush=True)

    phase("back_to_back", None)
    for ms in BURSTS_MS:
        phase(f"burst_{ms}ms", ms)
    phase("back_to_back_end", None)
    sampler.phase = "end"
    sampler.stop_flag.set()
    sampler.join()
    with open(path, "w") as f:
        for rec in records + samples:
            f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "burst_rate.jsonl"))
