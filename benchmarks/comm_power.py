"""GPU board power while communication kernels wait and copy (the measurement issue 23 asks for
the performance model's communication phase; benchmarks/power_duty.py measured compute, copies and
idle, not this).

    python3 benchmarks/comm_power.py OUT.jsonl      # one NVIDIA GPU; cupy, nvidia-ml-py (and torch for
                                                    # power_duty's sampler); gzip OUT before committing

What an NCCL collective between nodes looks like to one GPU: k thread blocks (one a channel;
NCCL_NTHREADS threads each) poll flags in device memory while the NIC moves data, and every so
often reduce or copy a chunk (read the received chunk and the local one, write the sum) at the
network's rate; the other SMs idle unless computation overlaps. Phases, PHASE_S seconds each, one
kernel launch a phase (CUDA C through cupy.RawKernel, timed on the device's global timer):
  idle              nothing launched (the board at rest between phases is sampled too)
  poll_k            k blocks of THREADS threads polling a flag in device memory, k in BLOCKS
  trickle_k_r       the same k blocks reducing fp32 chunks (dst += src over a 1 GiB ring) at r GB/s
                    of network bytes (4 bytes an element; 12 bytes of HBM traffic each), r in RATES
                    (a 200, 400 and 800 Gb/s NIC), polling between chunks
  matmul            bf16 8192^3 products back to back (torch), the reference the model's compute
                    phase comes from
Each phase records the NVML energy counter's difference (mean board power), and a sampler thread
records board power, SM clock and temperature every 100 ms (power_duty.Sampler).

What it cannot capture: NIC and NVSwitch power (not board power); the NIC's own DMA writes into
GPU memory (a real receive's HBM writes that no SM performs); NCCL's exact loop (LL/LL128 protocol
flags, its register use). Run on 2026-12-04 on the lent H200: data/comm-power (README.md there).

COMM_POWER_PHASE_S=1 python3 benchmarks/comm_power.py OUT.jsonl is a quick check (1 s phases, 0.5 s
gaps, about half a minute); the header records phase_s and gap_s.
Each trickle phase records how many chunk periods its blocks completed (chunks_min, chunks_max) and
the network rate that corresponds to (achieved_network_gb_per_s, from the slowest block): below the
asked rate, the k blocks could not keep up and reduced back to back instead of trickling.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

PHASE_S = float(os.environ.get("COMM_POWER_PHASE_S", "8.0"))  # quick check: COMM_POWER_PHASE_S=1
GAP_S = 0.5 if "COMM_POWER_PHASE_S" in os.environ else 3.0
THREADS = 512  # NCCL_NTHREADS' default
BLOCKS = (8, 16, 32)  # NCCL channel counts
RATES_GBPS = (25.0, 50.0, 100.0)  # network bytes a second: 200, 400 and 800 Gb/s NICs
RING_ELEMENTS = 1 << 28  # 1 GiB of fp32, beyond L2: every reduce reaches HBM
CHUNK_ELEMENTS = 1 << 18  # 1 MiB of network bytes a period

KERNELS = r"""
__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void poll(const volatile int* flag, unsigned long long ns) {
    const unsigned long long end = now_ns() + ns;
    while (now_ns() < end) {
        if (flag[0]) return;
    }
}

// ring must be a multiple of chunk (checked on the host): a chunk never wraps, so no modulo per element
extern "C" __global__ void trickle(const float* src, float* dst, long long ring, long long chunk,
                                   unsigned long long period_ns, unsigned long long ns, const volatile int* flag,
                                   unsigned long long* chunks_done) {
    const unsigned long long start = now_ns();
    const unsigned long long end = start + ns;
    unsigned long long next = start;
    unsigned long long count = 0;
    long long offset = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    while (now_ns() < end) {
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < chunk; i += stride) {
            const long long j = offset + i;
            dst[j] += src[j];
        }
        offset += chunk;
        if (offset >= ring) offset = 0;
        ++count;
        next += period_ns;
        while (now_ns() < next) {
            if (flag[0]) break;
        }
        if (flag[0]) break;
    }
    if (threadIdx.x == 0) chunks_done[blockIdx.x] = count;
}
"""


def main(out_path: str) -> int:
    import cupy as cp
    import pynvml as nvml
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from power_duty import Sampler

    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    module = cp.RawModule(code=KERNELS, options=("-std=c++14",))
    poll, trickle = module.get_function("poll"), module.get_function("trickle")
    flag = cp.zeros(1, dtype=cp.int32)
    assert RING_ELEMENTS % CHUNK_ELEMENTS == 0
    chunks_done = cp.zeros(max(BLOCKS), dtype=cp.uint64)
    src = cp.random.random(RING_ELEMENTS, dtype=cp.float32)
    dst = cp.zeros(RING_ELEMENTS, dtype=cp.float32)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    c = torch.empty_like(a)
    samples: list[dict] = []
    records: list[dict] = [{
        "kind": "header", "device": torch.cuda.get_device_name(0), "driver": nvml.nvmlSystemGetDriverVersion(),
        "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0, "torch": torch.__version__,
        "cupy": cp.__version__, "threads_per_block": THREADS, "phase_s": PHASE_S, "gap_s": GAP_S,
        "ring_bytes": 4 * RING_ELEMENTS, "chunk_network_bytes": 4 * CHUNK_ELEMENTS,
        "bytes_note": "network bytes 4 an element; HBM traffic 12 an element (read both, write the sum)"}]
    sampler = Sampler(h, samples)
    sampler.start()

    def phase(name: str, run, after=None, **meta) -> None:
        time.sleep(GAP_S)
        sampler.phase = name
        cp.cuda.Device().synchronize()
        torch.cuda.synchronize()
        e0, t0 = nvml.nvmlDeviceGetTotalEnergyConsumption(h), time.time()
        run()
        cp.cuda.Device().synchronize()
        torch.cuda.synchronize()
        e1, t1 = nvml.nvmlDeviceGetTotalEnergyConsumption(h), time.time()
        rec = {"kind": "phase", "phase": name, "t0": t0, "t1": t1, "wall_s": t1 - t0,
               "energy_j": (e1 - e0) / 1000.0, "mean_power_w": (e1 - e0) / 1000.0 / (t1 - t0), **meta}
        if after is not None:
            rec.update(after())
        records.append(rec)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in rec.items()
                          if k not in ("t0", "t1")}), flush=True)
        sampler.phase = "between"

    ns = int(PHASE_S * 1e9)

    def matmuls() -> None:
        t_end = time.perf_counter() + PHASE_S
        while time.perf_counter() < t_end:
            for _ in range(4):
                torch.mm(a, b, out=c)
            torch.cuda.synchronize()

    phase("warmup_matmul", matmuls)
    phase("idle", lambda: time.sleep(PHASE_S))
    for k in BLOCKS:
        phase(f"poll_{k}", lambda k=k: poll((k,), (THREADS,), (flag, cp.uint64(ns))), blocks=k)
    for k in BLOCKS:
        for rate in RATES_GBPS:
            period_ns = int(4 * CHUNK_ELEMENTS / (rate * 1e9) * 1e9)

            def counted(k=k) -> dict:
                done = [int(x) for x in chunks_done[:k].get()]
                return {"chunks_min": min(done), "chunks_max": max(done),
                        "achieved_network_gb_per_s": min(done) * 4 * CHUNK_ELEMENTS / PHASE_S / 1e9}

            chunks_done.fill(0)
            phase(f"trickle_{k}_{rate:g}", lambda k=k, p=period_ns: trickle(
                (k,), (THREADS,), (src, dst, cp.int64(RING_ELEMENTS), cp.int64(CHUNK_ELEMENTS), cp.uint64(p),
                                   cp.uint64(ns), flag, chunks_done)),
                after=counted, blocks=k, network_gb_per_s=rate, period_ns=period_ns)
    phase("matmul", matmuls)
    phase("idle_end", lambda: time.sleep(PHASE_S))
    sampler.stop_flag.set()
    sampler.join()
    with open(out_path, "w") as f:
        for rec in records + samples:  # samples: power_duty.Sampler's records, kind "sample"
            f.write(json.dumps(rec) + "\n")
    print(f"wrote {len(records)} phases and {len(samples)} samples to {out_path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
