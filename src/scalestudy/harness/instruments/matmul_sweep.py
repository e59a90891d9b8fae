"""The best achievable bf16 matrix-product rate of one GPU, MAMF-style: a sweep of shapes, not one
(spec/instruments.py MatmulSweepSpec; made data/h200-matmul and data/h100-matmul as
benchmarks/matmul_sweep.py before it became this command).

Each shape, C = A @ B of M x K by K x N in bf16 on random normal data: warmup_iters calls, then
iters calls back to back timed with CUDA events (MAMF v2's method, fewer iterations; the host clock
on CPU); the rate is 2 M N K / mean time. NVML board power and SM clock are read after each shape's
timed calls where NVML answers. One `gemm` record a shape (m, n, k, mean_s, tflops, where it comes
from, index), then one `best` record: the best rate over all shapes is the GPU's achievable rate
(gpus.yaml `matmul_achievable_tflops`, with this raw log as `matmul_achievable_data`).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from scalestudy.harness.instruments.common import Board, run_instrument
from scalestudy.harness.run_start import RunContext
from scalestudy.spec.instruments import MatmulSweepSpec

TIMER = "CUDA events around iters back-to-back torch.mm (host perf_counter on CPU)"


def products_s(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, calls: int) -> float:
    """Seconds of `calls` products c = a @ b back to back: CUDA events around them on a GPU."""
    if a.device.type != "cuda":
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.mm(a, b, out=c)
        return time.perf_counter() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        torch.mm(a, b, out=c)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def time_shape(m: int, n: int, k: int, device: torch.device, warmup: int, iters: int) -> float:
    """Mean seconds of one product of the shape."""
    a = torch.randn(m, k, dtype=torch.bfloat16, device=device)
    b = torch.randn(k, n, dtype=torch.bfloat16, device=device)
    c = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    for _ in range(warmup):
        torch.mm(a, b, out=c)
    return products_s(a, b, c, iters) / iters


def sweep(spec: MatmulSweepSpec, run: RunContext, board: Board | None, *, quiet: bool = False) -> None:
    shapes = spec.shapes()
    best, t0 = 0.0, time.monotonic()
    for i, (where, m, n, k) in enumerate(shapes):
        run.injector.maybe_fire(i)
        s = time_shape(m, n, k, run.device, spec.warmup_iters, spec.iters)
        tflops = 2 * m * n * k / s / 1e12
        best = max(best, tflops)
        rec = {"m": m, "n": n, "k": k, "mean_s": s, "tflops": round(tflops, 2), **where}
        if board:
            rec.update(power_w=board.power_w(), sm_clock_mhz=board.sm_clock_mhz())
        run.log.log("gemm", rec, index=i)
        if not quiet and i % 50 == 0:
            print(
                f"[{i}/{len(shapes)}] {where} {m}x{n}x{k}: {tflops:.1f} TFLOP/s (best {best:.1f}), "
                f"{time.monotonic() - t0:.0f} s",
                flush=True,
            )
    run.log.log("best", {"tflops": round(best, 2), "shapes": len(shapes), "elapsed_s": round(time.monotonic() - t0, 1)})
    if not quiet:
        print(f"best {best:.1f} TFLOP/s over {len(shapes)} shapes", flush=True)


def run_matmul_sweep(spec: MatmulSweepSpec, run_dir: Path, *, quiet: bool = False) -> str:
    """Time every shape of `spec` and write the run's raw log; returns its status."""
    method = {
        "dtype": "bfloat16",
        "warmup": spec.warmup_iters,
        "iters": spec.iters,
        "timer": TIMER,
        "rate": "2 M N K / mean time",
        "operands": "random normal",
    }
    return run_instrument(spec, run_dir, method, lambda run, board: sweep(spec, run, board, quiet=quiet), quiet=quiet)
