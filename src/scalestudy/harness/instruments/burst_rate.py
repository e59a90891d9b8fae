"""How fast matrix products run in short bursts, against back to back: the speed side of the power
limiter (spec/instruments.py BurstRateSpec; made data/burst-rate as benchmarks/burst_rate.py before it
became this command).

perfmodel/power.py fits the board limiter as holding an average: products in bursts shorter than
its window run at full clock and draw more than the cap. This measures whether they also run
faster: bf16 products in bursts of about bursts_ms milliseconds, each followed by an idle gap of
gap_ms (an exposed collective's wait), and back to back; phase_s seconds a phase, rest_s of rest
before each. Each burst is timed on the GPU (CUDA events around its launches); a `phase` record
holds its products, their GPU time, the rate (TFLOP/s) and the NVML energy counter's mean power,
and `sample` records the SM clock and board power every sample_s. GPU board power only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import torch

from scalestudy.harness.instruments.common import Board, Sampler, gpu_board, log_phase, run_instrument
from scalestudy.harness.instruments.matmul_sweep import products_s
from scalestudy.measure.rawlog import RankLog
from scalestudy.spec.instruments import BurstRateSpec


class BurstKernels(Protocol):
    def products_s(self, calls: int) -> float: ...
    def sync(self) -> None: ...


class TorchBurstKernels:
    """Square bf16 products on one GPU, timed by CUDA events."""

    def __init__(self, spec: BurstRateSpec, device: torch.device):
        n = spec.matmul_n
        self.a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        self.c = torch.empty(n, n, device=device, dtype=torch.bfloat16)

    def products_s(self, calls: int) -> float:
        return products_s(self.a, self.b, self.c, calls)

    def sync(self) -> None:
        torch.cuda.synchronize()


def method(spec: BurstRateSpec) -> dict:
    n = spec.matmul_n
    return {
        "matmul": f"bf16 {n}x{n}x{n} torch.mm, random data",
        "gap_ms": spec.gap_ms,
        "phase_s": spec.phase_s,
        "rest_s": spec.rest_s,
        "sample_s": spec.sample_s,
        "timer": "CUDA events around each burst's launches",
        "energy": "NVML total-energy counter at each phase's start and end",
    }


def burst_phases(
    spec: BurstRateSpec,
    kernels: BurstKernels,
    board: Board,
    log: RankLog,
    *,
    quiet: bool = False,
    fire: Callable[[int], None] = lambda i: None,
) -> None:
    """The back-to-back phases and one phase a burst length, each `phase` record and the board's
    samples into `log`."""
    flops = 2.0 * spec.matmul_n**3
    sampler = Sampler(board, spec.sample_s)
    sampler.start()
    count = 0

    def phase(name: str, burst_ms: float | None, one_s: float) -> None:
        nonlocal count
        fire(count)
        count += 1
        sampler.phase = "rest"
        time.sleep(spec.rest_s)
        kernels.sync()
        sampler.phase = name
        k = None if burst_ms is None else max(1, round(burst_ms / 1000.0 / one_s))
        e_start, t0 = board.energy_mj(), time.perf_counter()
        n, gpu_s, bursts = 0, 0.0, 0
        while time.perf_counter() - t0 < spec.phase_s:
            step = spec.back_to_back_group if k is None else k
            gpu_s += kernels.products_s(step)
            n += step
            bursts += 1
            if k is not None:
                time.sleep(spec.gap_ms / 1000.0)
        wall = time.perf_counter() - t0
        energy = (board.energy_mj() - e_start) / 1000.0
        rec = {
            "phase": name,
            "burst_products": k,
            "burst_ms_target": burst_ms,
            "bursts": bursts,
            "products": n,
            "gpu_s": gpu_s,
            "wall_s": wall,
            "burst_ms_measured": 1000.0 * gpu_s / bursts if k is not None else None,
            "compute_share": gpu_s / wall,
            "tflops": n * flops / gpu_s / 1e12,
            "mean_power_w": energy / wall,
            "energy_j": energy,
        }
        log_phase(log, rec, sampler, quiet=quiet)

    try:
        kernels.products_s(spec.warmup_products)  # kernels chosen, clocks settled at the limit
        one_s = kernels.products_s(spec.reference_products) / spec.reference_products
        phase("back_to_back", None, one_s)
        for ms in spec.bursts_ms:
            phase(f"burst_{ms}ms", ms, one_s)
        phase("back_to_back_end", None, one_s)
        sampler.phase = "end"
    finally:
        for s in sampler.stop():
            log.log("sample", s)


def run_burst_rate(spec: BurstRateSpec, run_dir: Path, *, quiet: bool = False) -> str:
    """Measure the bursts of `spec` on this host's GPU and write the run's raw log; returns its status.
    Refused with one sentence (InvalidConfig) where there is no CUDA device or NVML does not answer."""
    board = gpu_board(spec.KIND)

    def measure(run, board: Board) -> None:
        burst_phases(
            spec, TorchBurstKernels(spec, run.device), board, run.log, quiet=quiet, fire=run.injector.maybe_fire
        )

    return run_instrument(spec, run_dir, method(spec), measure, board=board, quiet=quiet)
