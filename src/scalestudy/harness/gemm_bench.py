"""The matrix-product benchmark (spec/gemm.py): each product of each layout, timed on one GPU.

bf16: torch.mm of random normal bf16 operands. fp8: torch._scaled_mm of e4m3 operands with one
scale a tensor (the per-tensor scaling of Transformer Engine's delayed and current recipes), bf16
output, the second operand column-major as cuBLASLt's FP8 kernels want it. Each product:
warmup_iters calls, then iters calls back to back between two CUDA events (MAMF's method); the
rate is 2 m n k / mean time. NVML's board power and SM clock are read after each product's timed
calls where NVML answers. Before the first product the GPU settles at its power limit (spec
settle_s of back-to-back products). One `gemm` record a product; run.json names the device, driver
and power limit.
"""

from __future__ import annotations

import time
from pathlib import Path

import pynvml as nvml
import torch

from scalestudy.harness import provenance
from scalestudy.harness.run_start import begin_run
from scalestudy.measure import rawlog
from scalestudy.spec.gemm import Gemm, GemmSpec

FP8 = torch.float8_e4m3fn
TIMER = "CUDA events around iters back-to-back calls (host perf_counter on CPU); rate 2 m n k / mean time"


def _operands(g: Gemm, dtype: str, device: torch.device):
    a = torch.randn(g.m, g.k, device=device, dtype=torch.bfloat16)
    b = torch.randn(g.n, g.k, device=device, dtype=torch.bfloat16)
    if dtype == "bf16":
        bt = b.t()
        return lambda: torch.mm(a, bt)
    scale = torch.ones((), device=device, dtype=torch.float32)
    a8, b8 = a.to(FP8), b.to(FP8).t()  # b8: k x n, column-major
    return lambda: torch._scaled_mm(a8, b8, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)


def time_gemm(g: Gemm, dtype: str, device: torch.device, warmup: int, iters: int) -> float:
    """Mean seconds of one call."""
    call = _operands(g, dtype, device)
    for _ in range(warmup):
        call()
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - t0) / iters


def settle(device: torch.device, seconds: float) -> dict:
    """Back-to-back n-cubed bf16 products for `seconds` (a cold GPU runs its first products at full
    clock, above what its power limit holds; n 8192 on a GPU): what was run."""
    if seconds <= 0:
        return {"seconds": 0.0, "products": 0}
    n = 8192 if device.type == "cuda" else 256
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            torch.mm(a, a)
        calls += 10
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return {"seconds": seconds, "products": calls, "shape": f"{n}^3 bf16"}


def _nvml(device: torch.device):
    if device.type != "cuda":
        return None
    try:
        nvml.nvmlInit()
        return nvml, nvml.nvmlDeviceGetHandleByIndex(device.index or 0)
    except Exception:  # noqa: BLE001 - no NVML: the records say so by leaving power and clock out
        return None


def run_gemm(spec: GemmSpec, run_dir: Path, *, quiet: bool = False) -> str:
    """Time every product of `spec` and write the run's raw log; returns its status."""
    run = begin_run(spec, run_dir)
    nv = _nvml(run.device)
    machine = {}
    if nv:
        nvml, h = nv
        machine = {
            "driver": nvml.nvmlSystemGetDriverVersion(),
            "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000,
        }
    rawlog.atomic_write_json(
        run.run_dir / rawlog.RUN_FILE,
        {
            "schema": rawlog.SCHEMA,
            "kind": "gemm",
            "run_id": spec.run_id,
            "config_id": spec.config_id,
            **rawlog.identity_from_env(),
            "overrides": rawlog.overrides_from_env(),
            "spec": spec.to_dict(),
            "measurement": {
                "timer": TIMER,
                "warmup_iters": spec.warmup_iters,
                "iters": spec.iters,
                "operands": "random normal; fp8: e4m3 with one scale a tensor, bf16 output",
                **machine,
            },
            "provenance": provenance.collect(run.facts),
            "start_time_unix": round(time.time(), 3),
        },
    )
    try:
        run.log.log("settle", settle(run.device, spec.settle_s))
        gemms = spec.gemms()
        for i, (layout, dtype, g) in enumerate(gemms):
            run.injector.maybe_fire(i)
            s = time_gemm(g, dtype, run.device, spec.warmup_iters, spec.iters)
            rec = {"layout": layout, "dtype": dtype, **g.as_dict(), "time_s": s, "tflops": g.flops / s / 1e12}
            if nv:
                nvml, h = nv
                rec.update(
                    power_w=nvml.nvmlDeviceGetPowerUsage(h) / 1000,
                    sm_clock_mhz=nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM),
                )
            run.log.log("gemm", rec, index=i)
            if not quiet:
                print(
                    f"[{i + 1}/{len(gemms)}] {layout} {dtype} {g.projection} {g.pass_} {g.m}x{g.n}x{g.k}: "
                    f"{rec['tflops']:.1f} TFLOP/s",
                    flush=True,
                )
    except BaseException as e:  # noqa: BLE001 - every failure is recorded, then classified or re-raised
        return run.fail(e, quiet=quiet)
    status = run.finish()
    rawlog.compress_run(run.run_dir)  # as committed: gzipped, status.json's checksums of the content
    return status
