"""What rank 0 prints while a run trains: a progress line every N steps (step / total, loss,
tokens/s global and per device, MFU, memory, time left), as torchtitan's and Megatron's loggers do,
and the run's one summary line (`summary_line`), which the harness and `scalestudy launch` both
write from the numbers the raw log records, by the tables' rule. Pure Python."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

GIB = 1024**3


def default_every(total_steps: int) -> int:
    """About ten progress lines a run, at least one a step."""
    return max(1, total_steps // 10)


def format_duration(seconds: float) -> str:
    s = int(round(max(0.0, seconds)))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def speed_text(tokens_per_s: float, world_size: int) -> str:
    """Tokens per second, said global and per device: `5,748 tok/s global | 2,874 tok/s per device`."""
    return f"{tokens_per_s:,.0f} tok/s global | {tokens_per_s / world_size:,.0f} tok/s per device"


def summary_line(
    run_id: str,
    status: str,
    run_dir,
    *,
    throughput: dict | None = None,
    mfu: float | None = None,
    no_mfu: str | None = None,
    peak_memory_bytes: int | None = None,
    rank_share: str | None = None,
    elapsed_s: float | None = None,
    detail: str | None = None,
) -> str:
    """The one line a run ends with. `throughput` is scalestudy.measure.metrics.throughput of the
    run's measured iteration records (every rank's: each step timed on its slowest rank), the
    numbers the tables show; `mfu` from it (or `no_mfu`, why there is none); `detail` replaces
    the numbers (a failure's message, a benchmark's count)."""
    parts = [f"[summary] run {run_id}: {status}"]
    if detail is not None:
        parts.append(detail)
    elif throughput is None:
        parts.append("no measured steps")
    elif rank_share:  # a fake-communication run: its step time, never a throughput of the configuration
        parts.append(
            f"{throughput['n_steps']} measured steps | {throughput['step_time_mean_s']:.4f} s/step ({rank_share})"
        )
    else:
        parts += [
            f"{throughput['n_steps']} measured steps, each timed on its slowest rank",
            speed_text(throughput["tokens_per_s"], throughput["world_size"]),
            f"MFU {100 * mfu:.1f}%" if mfu is not None else f"no MFU ({no_mfu or 'no peak'})",
        ]
    if peak_memory_bytes is not None:
        parts.append(f"peak mem {peak_memory_bytes / GIB:.2f} GiB")
    if elapsed_s is not None:
        parts.append(format_duration(elapsed_s))
    parts.append(f"raw log {run_dir}")
    return " | ".join(parts)


def memory_bytes(memory: dict) -> int | None:
    """The peak memory of a `memory` value (hooks.memory_now): allocated on a GPU, RSS on CPU."""
    return memory.get("peak_allocated_bytes", memory.get("peak_rss_bytes"))


@dataclass
class Progress:
    """Progress of one run as rank 0 sees it. `update` takes each step and returns the line to
    print every `every` steps (and at the last step); None otherwise, and always when every is 0."""

    total_steps: int
    tokens_per_step: int
    world_size: int
    every: int
    flops_per_token: float | None = None
    peak_flops_per_s: float | None = None  # per device; None: no MFU
    sink: object | None = None  # a metrics_sink.MetricsSink (or anything with log(step, metrics)): every step
    rank_share: str | None = None  # a fake-communication run's label: step time instead of tokens/s and MFU
    started: float = field(default_factory=time.monotonic)
    _window: list[float] = field(default_factory=list)
    _memory: int | None = None

    def update(self, step: int, phase: str, step_time_s: float, loss: float, memory: dict) -> str | None:
        self._window.append(step_time_s)
        self._memory = memory_bytes(memory)
        if self.sink is not None:
            self.sink.log(step, self._metrics(step_time_s, loss))
        done = step + 1
        if self.every <= 0 or (done % self.every and done != self.total_steps):
            return None
        mean = sum(self._window) / len(self._window)
        self._window.clear()
        tokens_per_s = self.tokens_per_step / mean if mean > 0 else float("nan")
        speed = (
            [f"{mean:.4f} s/step ({self.rank_share})"]
            if self.rank_share
            else [speed_text(tokens_per_s, self.world_size), f"MFU {self.mfu(tokens_per_s)}"]
        )
        parts = [f"step {done:>{len(str(self.total_steps))}}/{self.total_steps} {phase:<8}", f"loss {loss:.4f}", *speed]
        parts.append(self._mem())
        elapsed = time.monotonic() - self.started
        parts.append(f"elapsed {format_duration(elapsed)}, left ~{format_duration(mean * (self.total_steps - done))}")
        return "[progress] " + " | ".join(parts)

    def _metrics(self, step_time_s: float, loss: float) -> dict[str, float]:
        tokens_per_s = self.tokens_per_step / step_time_s if step_time_s > 0 else 0.0
        out = {"loss": loss, "step_time_s": step_time_s}
        if not self.rank_share:  # a rank share has no throughput of its configuration
            out["tokens_per_s"] = tokens_per_s
            out["tokens_per_s_per_device"] = tokens_per_s / self.world_size
        if self.flops_per_token and self.peak_flops_per_s and not self.rank_share:
            out["mfu"] = tokens_per_s / self.world_size * self.flops_per_token / self.peak_flops_per_s
        if self._memory is not None:
            out["memory_gib"] = self._memory / GIB
        return out

    def mfu(self, tokens_per_s: float) -> str:
        if not self.flops_per_token or not self.peak_flops_per_s:
            return "n/a (no peak)"
        return f"{100 * tokens_per_s / self.world_size * self.flops_per_token / self.peak_flops_per_s:.1f}%"

    def _mem(self) -> str:
        return f"mem {self._memory / GIB:.2f} GiB" if self._memory is not None else "mem ?"
