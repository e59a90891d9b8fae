"""The measurements a training run makes around its steps, in one place: board power and energy
over the measured steps (NVML; none where the spec says `power_sampling: false`), the profiler
window, each step's record and progress line, the metrics sink, and after the measured window the
GPU busy time and the trace's record."""

from __future__ import annotations

import resource
from collections.abc import Callable

import torch

from scalestudy.harness import device_busy
from scalestudy.harness.power import PowerMonitor
from scalestudy.harness.profiling import ProfilerWindow
from scalestudy.harness.progress import Progress, default_every
from scalestudy.spec.run import POWER_SAMPLING_OFF


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def memory_now(device: torch.device) -> dict:
    if device.type == "cuda":
        stats = torch.cuda.memory_stats(device)
        return {
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
            "alloc_retries": stats.get("num_alloc_retries", 0),
            "kind": "cuda_caching_allocator",
        }
    return {"peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "kind": "cpu_peak_rss"}


class MeasurementHooks:
    """Made before the model (the idle power is read on an idle GPU); `open` once the model's
    FLOPs and the device peak are known; then `step` for every step, `finish` after the last,
    `abort` on a failure and `close` always."""

    def __init__(self, spec, run_dir, rank: int, device: torch.device, log, *, power_period_s: float):
        self.spec, self.rank, self.device, self.log = spec, rank, device, log
        power = spec.power_sampling  # the run specification's, the one source of truth (its run id says it)
        self.monitor = PowerMonitor(device.index if device.type == "cuda" and power else None, period_s=power_period_s)
        if not power:
            self.monitor.reason = POWER_SAMPLING_OFF
        elif device.type == "cuda":
            self.monitor.idle_power(1.0)
        self.profiler = ProfilerWindow(spec, run_dir, rank, device)
        self.progress: Progress | None = None
        self.measured_times: list[float] = []

    def open(
        self,
        world: int,
        every: int | None,
        flops_per_token: float,
        peak_flops_per_s: float | None,
        sink,
        rank_share: str | None,
    ) -> None:
        total = self.spec.warmup_iters + self.spec.measured_iters
        self.progress = Progress(
            total,
            self.spec.tokens_per_step,
            world,
            default_every(total) if every is None else every,
            flops_per_token,
            peak_flops_per_s,
            sink=sink,
            rank_share=rank_share,
        )
        self.profiler.start()

    def before(self, step: int) -> None:
        if step == self.spec.warmup_iters:  # the measured window (and its energy) starts here
            sync(self.device)
            self.monitor.start()

    def step(self, step: int, dt: float, loss: float) -> dict:
        """Record one step (on every rank) and print its progress line (rank 0); its memory."""
        phase = "warmup" if step < self.spec.warmup_iters else "measured"
        memory = memory_now(self.device)
        self.log.log(
            "iteration",
            {
                "step": step,
                "phase": phase,
                "step_time_s": dt,
                "tokens": self.spec.tokens_per_step,
                "loss": loss,
                "memory": memory,
            },
        )
        if phase == "measured":
            self.measured_times.append(dt)
        if (
            self.rank == 0
            and self.progress is not None
            and (line := self.progress.update(step, phase, dt, loss, memory))
        ):
            print(line, flush=True)
        self.profiler.step()
        return memory

    def finish(self, more_steps: Callable[[int], object]) -> None:
        """After the last step: the energy and power samples of the measured window, then (more
        steps, traced) the GPU busy time, then the profiler's record."""
        sync(self.device)
        self.log.log("energy", self.monitor.stop())
        for sample in self.monitor.samples():
            self.log.log("power_sample", sample)
        if device_busy.applies(self.spec, self.device) is None:
            self.log.log(
                "device_busy",
                device_busy.measure(
                    more_steps, lambda: sync(self.device), device_busy.steps_to_trace(self.measured_times)
                ),
            )
        self.profiler.stop()
        if (rec := self.profiler.record()) is not None:
            self.log.log("profile", rec)

    def abort(self) -> None:
        self.profiler.stop()
        self.monitor.stop()

    def close(self) -> None:
        if self.progress is not None and self.progress.sink is not None:
            self.progress.sink.close()
