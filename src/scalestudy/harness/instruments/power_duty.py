"""GPU board power under controlled duty cycles, the measurement behind perfmodel/power.py
(spec/instruments.py PowerDutySpec; made data/power-duty as benchmarks/power_duty.py before it
became this command).

Phases of a few seconds each: idle; bf16 matrix products back to back; large device-to-device
copies (memory-bound, like NCCL's copy kernels); each of them switched on and off with idle gaps of
several periods and on-fractions; alternations of products and copies; both at once on two
streams. NVML board power is sampled every sample_s (the averaged reading and, where the driver has
it, the instantaneous one) and the total-energy counter is read at each phase's start and end.
Every phase records the seconds its kernels ran (timed with a synchronize after each launch group),
so the fit sees the compute share, copy share and idle share it caused. One `phase` record a phase,
`sample` records as they were taken. GPU board power only: CPU, host memory and network are not
included.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import torch

from scalestudy.harness.instruments.common import Board, Sampler, gpu_board, log_phase, run_instrument
from scalestudy.measure.rawlog import RankLog
from scalestudy.spec.instruments import PowerDutySpec


class DutyKernels(Protocol):
    def mm(self, k: int) -> None: ...
    def cp(self, k: int = 1) -> None: ...
    def cp_beside(self) -> None: ...
    def sync(self) -> None: ...


class TorchDutyKernels:
    """The products and copies of the duty cycles on one GPU."""

    def __init__(self, spec: PowerDutySpec, device: torch.device):
        n = spec.matmul_n
        self.a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        self.c = torch.empty(n, n, device=device, dtype=torch.bfloat16)
        self.src = torch.empty(spec.copy_elements, device=device, dtype=torch.float32)
        self.src.uniform_()
        self.dst = torch.empty_like(self.src)
        self.side = torch.cuda.Stream(device)

    def mm(self, k: int) -> None:
        for _ in range(k):
            torch.mm(self.a, self.b, out=self.c)

    def cp(self, k: int = 1) -> None:
        for _ in range(k):
            self.dst.copy_(self.src)

    def cp_beside(self) -> None:
        with torch.cuda.stream(self.side):
            self.cp()

    def sync(self) -> None:
        torch.cuda.synchronize()


def method(spec: PowerDutySpec) -> dict:
    n = spec.matmul_n
    return {
        "matmul": f"bf16 {n}x{n}x{n} torch.mm, random data",
        "copy": f"{spec.copy_mib / 1024:g} GiB fp32 device-to-device copy_",
        "sample_s": spec.sample_s,
        "energy": "NVML total-energy counter at each phase's start and end",
        "kernel_time": "wall time of launch groups, each followed by a synchronize",
    }


def duty_cycles(
    spec: PowerDutySpec,
    kernels: DutyKernels,
    board: Board,
    log: RankLog,
    *,
    quiet: bool = False,
    fire: Callable[[int], None] = lambda i: None,
) -> None:
    """Every phase of `spec` on `kernels`, its `phase` record and the board's samples into `log`."""

    def mm() -> None:
        kernels.mm(spec.matmul_group)

    cp = kernels.cp
    sampler = Sampler(board, spec.sample_s)
    sampler.start()

    def busy(fn: Callable[[], None], seconds: float) -> float:
        """Run fn in launch groups until `seconds` of wall time have passed; the time it ran."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn()
            kernels.sync()
        return time.perf_counter() - t0

    def phase(name: str, body: Callable[[], tuple[float, float]], **meta) -> None:
        sampler.phase = name
        kernels.sync()
        e0, t0 = board.energy_mj(), time.time()
        compute_s, copy_s = body()
        kernels.sync()
        e1, t1 = board.energy_mj(), time.time()
        wall = t1 - t0
        rec = {
            "phase": name,
            "t0": t0,
            "t1": t1,
            "wall_s": wall,
            "energy_j": (e1 - e0) / 1000.0,
            "mean_power_w": (e1 - e0) / 1000.0 / wall,
            "compute_s": compute_s,
            "copy_s": copy_s,
            "compute_share": min(compute_s / wall, 1.0),
            "copy_share": min(copy_s / wall, 1.0),
            **meta,
        }
        sampler.phase = "between"
        log_phase(log, rec, sampler, quiet=quiet)

    def idle(seconds: float) -> tuple[float, float]:
        time.sleep(seconds)
        return 0.0, 0.0

    def duty(fn: Callable[[], None], kind: str, period: float, on_frac: float, seconds: float) -> tuple[float, float]:
        on = 0.0
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            on += busy(fn, on_frac * period)
            time.sleep(max(0.0, (1 - on_frac) * period))
        return (on, 0.0) if kind == "compute" else (0.0, on)

    def alternate(c_frac: float, m_frac: float, period: float, seconds: float) -> tuple[float, float]:
        on_c = on_m = 0.0
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            on_c += busy(mm, c_frac * period)
            on_m += busy(cp, m_frac * period)
            time.sleep(max(0.0, (1 - c_frac - m_frac) * period))
        return on_c, on_m

    def together(seconds: float) -> tuple[float, float]:
        kernels.sync()
        t = time.perf_counter()
        kernels.cp(10)
        kernels.sync()
        one_copy = (time.perf_counter() - t) / 10
        iters = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            kernels.cp_beside()
            kernels.mm(spec.together_products)
            kernels.sync()
            iters += 1
        return time.perf_counter() - t0, iters * one_copy  # the copies' time as if alone; products throughout

    bodies: dict[str, Callable[..., tuple[float, float]]] = {
        "idle": idle,
        "compute": lambda s: (busy(mm, s), 0.0),
        "copy": lambda s: (0.0, busy(cp, s)),
        "compute_duty": lambda period, frac, s: duty(mm, "compute", period, frac, s),
        "copy_duty": lambda period, frac, s: duty(cp, "copy", period, frac, s),
        "alternate": alternate,
        "together": together,
    }
    try:
        busy(mm, spec.warmup_compute_s)  # clocks up, kernels chosen
        busy(cp, spec.warmup_copy_s)
        for i, (name, what, args, meta) in enumerate(spec.phases()):
            fire(i)
            phase(name, functools.partial(bodies[what], *args), **meta)
    finally:
        for s in sampler.stop():
            log.log("sample", s)


def run_power_duty(spec: PowerDutySpec, run_dir: Path, *, quiet: bool = False) -> str:
    """Measure the duty cycles of `spec` on this host's GPU and write the run's raw log; returns its status.
    Refused with one sentence (InvalidConfig) where there is no CUDA device or NVML does not answer."""
    board = gpu_board(spec.KIND)

    def measure(run, board: Board) -> None:
        duty_cycles(spec, TorchDutyKernels(spec, run.device), board, run.log, quiet=quiet, fire=run.injector.maybe_fire)

    return run_instrument(spec, run_dir, method(spec), measure, board=board, quiet=quiet)
