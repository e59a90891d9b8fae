"""The best achievable bf16 matrix-product rate of one GPU, MAMF-style: a sweep of shapes, not one.

    python3 benchmarks/matmul_sweep.py OUT.jsonl      # on the GPU; gzip it before committing

Two sets of shapes, each a C = A @ B of M x K by K x N in bf16 on random normal data:
- `grid`: M, N, K each over GRID (the regular sweep of stas00/ml-engineering's MAMF finder,
  coarser);
- `llama`: the products a rank of the paper's configurations runs (models of the catalog at
  the paper's micro batch x sequence, tensor-parallel degree 1 to 16): forward, input gradient
  and weight gradient of every projection (wq, wk+wv, wo, w1, w3, w2, output).
Each shape: WARMUP calls, then ITERS calls back to back timed with CUDA events (MAMF v2's
method, fewer iterations); the rate is 2 M N K / mean time. One JSON line a shape, MLPerf-style
(key, value, metadata); the first line is the machine. The best rate over all shapes is the
GPU's achievable rate (gpus.yaml `matmul_achievable_tflops`, with this file as its source).
NVML board power and SM clock are read after each shape's timed calls.
"""

from __future__ import annotations

import json
import platform
import sys
import time

import torch

GRID = (1024, 2048, 4096, 6144, 8192, 12288, 16384)
WARMUP, ITERS = 20, 50
# model, micro batch x sequence of the paper's layouts (paper-rank.yaml)
LLAMA = (("llama-1b", 2 * 4096), ("llama2-7b", 2 * 4096), ("llama2-13b", 1 * 4096), ("llama2-70b", 1 * 4096))
TP = (1, 2, 4, 8, 16)


def llama_shapes():
    from scalestudy.spec.catalog import model

    shapes = []
    for name, tokens in LLAMA:
        cfg = model(name)
        d, kv = cfg.dim, cfg.n_kv_heads * cfg.head_dim
        for tp in TP:
            if cfg.n_heads % tp:
                continue
            kv_rank = max(kv // tp, cfg.head_dim)  # fewer KV heads than ranks: each rank holds one
            proj = {"wq": (d, d // tp), "wkv": (d, 2 * kv_rank), "wo": (d // tp, d),
                    "w1": (d, cfg.ffn_dim // tp), "w3": (d, cfg.ffn_dim // tp), "w2": (cfg.ffn_dim // tp, d),
                    "output": (d, cfg.vocab_size // tp)}
            for p, (k_in, n_out) in proj.items():
                where = {"model": name, "tp": tp, "projection": p}
                shapes.append(({**where, "pass": "forward"}, tokens, n_out, k_in))
                shapes.append(({**where, "pass": "input_grad"}, tokens, k_in, n_out))
                shapes.append(({**where, "pass": "weight_grad"}, n_out, k_in, tokens))
    return shapes


def products_s(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, calls: int) -> float:
    """Seconds of GPU time of `calls` products c = a @ b back to back (CUDA events around them)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        torch.mm(a, b, out=c)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def time_shape(m: int, n: int, k: int) -> float:
    a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(k, n, dtype=torch.bfloat16, device="cuda")
    c = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    for _ in range(WARMUP):
        torch.mm(a, b, out=c)
    return products_s(a, b, c, ITERS) / ITERS


def main(out_path: str) -> None:
    import pynvml as nvml

    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    shapes = [({"set": "grid"}, m, n, k) for m in GRID for n in GRID for k in GRID]
    shapes += [({"set": "llama", **w}, m, n, k) for w, m, n, k in llama_shapes()]
    best = 0.0
    with open(out_path, "w") as out:
        out.write(json.dumps({"key": "machine", "value": {
            "device_name": torch.cuda.get_device_name(), "driver": nvml.nvmlSystemGetDriverVersion(),
            "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000,
            "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version()},
            "metadata": {"benchmark": "benchmarks/matmul_sweep.py", "warmup": WARMUP, "iters": ITERS,
                         "dtype": "bfloat16", "timer": "CUDA events around ITERS back-to-back torch.mm",
                         "start_time_unix": round(time.time(), 3)}}) + "\n")
        t0 = time.monotonic()
        for i, (where, m, n, k) in enumerate(shapes):
            s = time_shape(m, n, k)
            tflops = 2 * m * n * k / s / 1e12
            best = max(best, tflops)
            out.write(json.dumps({"key": "gemm", "value": {"m": m, "n": n, "k": k, "mean_s": s,
                                                            "tflops": round(tflops, 2)},
                                  "metadata": {**where, "index": i,
                                               "power_w": nvml.nvmlDeviceGetPowerUsage(h) / 1000,
                                               "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)}})
                      + "\n")
            if i % 50 == 0:
                out.flush()
                print(f"[{i}/{len(shapes)}] {where} {m}x{n}x{k}: {tflops:.1f} TFLOP/s (best {best:.1f}), "
                      f"{time.monotonic() - t0:.0f} s", flush=True)
        out.write(json.dumps({"key": "best", "value": {"tflops": round(best, 2), "shapes": len(shapes)},
                              "metadata": {"elapsed_s": round(time.monotonic() - t0, 1)}}) + "\n")
    print(f"best {best:.1f} TFLOP/s over {len(shapes)} shapes", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
