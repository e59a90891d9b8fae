"""GPU board power while communication kernels wait and copy, the performance model's communication
phase (spec/instruments.py CommPowerSpec; made data/comm-power as benchmarks/comm_power.py before it
became this command; power-duty measures compute, copies and idle, not this).

What an NCCL collective between nodes looks like to one GPU: k thread blocks (one a channel;
NCCL_NTHREADS threads each) poll flags in device memory while the NIC moves data, and every so often
reduce or copy a chunk (read the received chunk and the local one, write the sum) at the network's
rate; the other SMs idle unless computation overlaps. Phases, phase_s seconds each, gap_s apart, one
kernel launch a phase (CUDA C through cupy.RawKernel, timed on the device's global timer):
  idle              nothing launched (the board at rest between phases is sampled too)
  poll_k            k blocks of `threads` threads polling a flag in device memory, k in blocks
  trickle_k_r       the same k blocks reducing fp32 chunks (dst += src over the ring) at r GB/s of
                    network bytes (4 bytes an element; 12 bytes of HBM traffic each), r in
                    rates_gb_per_s, polling between chunks
  matmul            bf16 products back to back (torch), the reference the model's compute phase comes from
Each phase records the NVML energy counter's difference (mean board power); the board is sampled
every sample_s (power, SM clock, temperature). Each trickle phase records how many chunk periods its
blocks completed (chunks_min, chunks_max) and the network rate that corresponds to
(achieved_network_gb_per_s, from the slowest block): below the asked rate, the k blocks could not
keep up and reduced back to back instead of trickling.

What it cannot capture: NIC and NVSwitch power (not board power); the NIC's own DMA writes into GPU
memory (a real receive's HBM writes that no SM performs); NCCL's exact loop (LL/LL128 protocol
flags, its register use).
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from scalestudy.harness.faults import InvalidConfig
from scalestudy.harness.instruments.common import Board, Sampler, gpu_board, log_phase, run_instrument
from scalestudy.measure.rawlog import RankLog
from scalestudy.spec.instruments import CommPowerSpec

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

// ring must be a multiple of chunk (checked by the spec): a chunk never wraps, so no modulo per element
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
BYTES_NOTE = "network bytes 4 an element; HBM traffic 12 an element (read both, write the sum)"


class CommKernels(Protocol):
    def poll(self, blocks: int, ns: int) -> None: ...
    def trickle(self, blocks: int, period_ns: int, ns: int) -> None: ...
    def reset_chunks(self) -> None: ...
    def chunks_done(self, blocks: int) -> list[int]: ...
    def matmuls(self, seconds: float) -> None: ...
    def sync(self) -> None: ...


def require_cupy() -> Any:
    """cupy, which compiles the kernels; InvalidConfig (one sentence) where it is not installed."""
    try:
        return importlib.import_module("cupy")
    except ImportError as e:
        raise InvalidConfig(
            f"comm-power compiles its CUDA kernels with cupy, which does not import here ({e}); "
            "install the cupy wheel of this CUDA (e.g. pip install cupy-cuda12x)"
        ) from None


class CupyCommKernels:
    """The polling and reducing kernels (cupy) and the reference products (torch) on one GPU."""

    def __init__(self, spec: CommPowerSpec, cp: Any, device: torch.device):
        self.cp, self.spec = cp, spec
        cp.random.seed(spec.seed)
        module = cp.RawModule(code=KERNELS, options=("-std=c++14",))
        self._poll, self._trickle = module.get_function("poll"), module.get_function("trickle")
        self.flag = cp.zeros(1, dtype=cp.int32)
        self.done = cp.zeros(max(spec.blocks), dtype=cp.uint64)
        self.src = cp.random.random(spec.ring_bytes // 4, dtype=cp.float32)
        self.dst = cp.zeros(spec.ring_bytes // 4, dtype=cp.float32)
        n = spec.matmul_n
        self.a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        self.b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        self.c = torch.empty_like(self.a)

    def poll(self, blocks: int, ns: int) -> None:
        self._poll((blocks,), (self.spec.threads,), (self.flag, self.cp.uint64(ns)))

    def trickle(self, blocks: int, period_ns: int, ns: int) -> None:
        cp, s = self.cp, self.spec
        self._trickle(
            (blocks,),
            (s.threads,),
            (
                self.src,
                self.dst,
                cp.int64(s.ring_bytes // 4),
                cp.int64(s.chunk_bytes // 4),
                cp.uint64(period_ns),
                cp.uint64(ns),
                self.flag,
                self.done,
            ),
        )

    def reset_chunks(self) -> None:
        self.done.fill(0)

    def chunks_done(self, blocks: int) -> list[int]:
        return [int(x) for x in self.done[:blocks].get()]

    def matmuls(self, seconds: float) -> None:
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            for _ in range(self.spec.matmul_group):
                torch.mm(self.a, self.b, out=self.c)
            torch.cuda.synchronize()

    def sync(self) -> None:
        self.cp.cuda.Device().synchronize()
        torch.cuda.synchronize()


def method(spec: CommPowerSpec, cupy_version: str | None) -> dict:
    return {
        "cupy": cupy_version,
        "threads_per_block": spec.threads,
        "phase_s": spec.phase_s,
        "gap_s": spec.gap_s,
        "ring_bytes": spec.ring_bytes,
        "chunk_network_bytes": spec.chunk_bytes,
        "bytes_note": BYTES_NOTE,
        "sample_s": spec.sample_s,
        "matmul": f"bf16 {spec.matmul_n}x{spec.matmul_n}x{spec.matmul_n} torch.mm",
        "energy": "NVML total-energy counter at each phase's start and end",
    }


def comm_phases(
    spec: CommPowerSpec,
    kernels: CommKernels,
    board: Board,
    log: RankLog,
    *,
    quiet: bool = False,
    fire: Callable[[int], None] = lambda i: None,
) -> None:
    """Every phase of `spec` on `kernels`, its `phase` record and the board's samples into `log`."""
    sampler = Sampler(board, spec.sample_s)
    sampler.start()
    ns = int(spec.phase_s * 1e9)
    count = 0

    def phase(name: str, body: Callable[[], None], after: Callable[[], dict] | None = None, **meta) -> None:
        nonlocal count
        fire(count)
        count += 1
        time.sleep(spec.gap_s)
        sampler.phase = name
        kernels.sync()
        e0, t0 = board.energy_mj(), time.time()
        body()
        kernels.sync()
        e1, t1 = board.energy_mj(), time.time()
        rec = {
            "phase": name,
            "t0": t0,
            "t1": t1,
            "wall_s": t1 - t0,
            "energy_j": (e1 - e0) / 1000.0,
            "mean_power_w": (e1 - e0) / 1000.0 / (t1 - t0),
            **meta,
        }
        if after is not None:
            rec.update(after())
        sampler.phase = "between"
        log_phase(log, rec, sampler, quiet=quiet, digits=3)

    def counted(blocks: int) -> Callable[[], dict]:
        def done() -> dict:
            n = kernels.chunks_done(blocks)
            return {
                "chunks_min": min(n),
                "chunks_max": max(n),
                "achieved_network_gb_per_s": min(n) * spec.chunk_bytes / spec.phase_s / 1e9,
            }

        return done

    try:
        phase("warmup_matmul", lambda: kernels.matmuls(spec.phase_s))
        phase("idle", lambda: time.sleep(spec.phase_s))
        for k in spec.blocks:
            phase(f"poll_{k}", functools.partial(kernels.poll, k, ns), blocks=k)
        for k in spec.blocks:
            for rate in spec.rates_gb_per_s:
                period_ns = spec.period_ns(rate)
                kernels.reset_chunks()
                phase(
                    f"trickle_{k}_{rate:g}",
                    functools.partial(kernels.trickle, k, period_ns, ns),
                    after=counted(k),
                    blocks=k,
                    network_gb_per_s=rate,
                    period_ns=period_ns,
                )
        phase("matmul", lambda: kernels.matmuls(spec.phase_s))
        phase("idle_end", lambda: time.sleep(spec.phase_s))
    finally:
        for s in sampler.stop():
            log.log("sample", s)


def run_comm_power(spec: CommPowerSpec, run_dir: Path, *, quiet: bool = False) -> str:
    """Measure the communication phases of `spec` on this host's GPU and write the run's raw log; returns
    its status. Refused with one sentence (InvalidConfig) where there is no CUDA device, NVML does not
    answer or cupy does not import."""
    board = gpu_board(spec.KIND)
    cp = require_cupy()

    def measure(run, board: Board) -> None:
        comm_phases(
            spec, CupyCommKernels(spec, cp, run.device), board, run.log, quiet=quiet, fire=run.injector.maybe_fire
        )

    return run_instrument(spec, run_dir, method(spec, cp.__version__), measure, board=board, quiet=quiet)
