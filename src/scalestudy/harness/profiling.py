"""The torch.profiler window of a run: a few measured iterations traced into a Chrome trace.

`step()` must be called once at the end of every iteration, warm-up ones included, so that the
profiler's step count is the global step index and `ProfilerStep#N` in the trace is step N.

Every rank traces its own steps and writes its own trace; only rank 0 speaks: Kineto's own lines
(profiler_start, profiler_stop, ...) are silenced on the other ranks, where they would interleave
with rank 0's progress lines (set KINETO_LOG_LEVEL yourself to hear every rank).
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

from scalestudy.spec.run import RunSpec

TRACES_DIR = "traces"
KINETO_LOG_LEVEL_ENV = "KINETO_LOG_LEVEL"  # read by Kineto when the process first profiles
KINETO_SILENT = "6"  # above every Kineto severity (VERBOSE 0 ... USDT 5): nothing is printed


def trace_file(rank: int) -> str:
    """The trace's path relative to the run directory."""
    return f"{TRACES_DIR}/rank-{rank:05d}.json.gz"


def quiet_kineto(rank: int, environ=os.environ) -> None:
    """Leave Kineto's messages to rank 0: the other ranks' would repeat them, interleaved. Must
    run before the process first profiles; a KINETO_LOG_LEVEL already set is kept."""
    if rank != 0:
        environ.setdefault(KINETO_LOG_LEVEL_ENV, KINETO_SILENT)


def _initialise_cupti() -> None:
    """Start and stop an empty CUDA trace once, so that CUPTI's one-off set-up (seconds) falls
    before the run rather than inside the measured window, where it would idle the GPU."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
        torch.cuda.synchronize()


class ProfilerWindow:
    def __init__(self, spec: RunSpec, run_dir: Path, rank: int, device: torch.device):
        self.enabled = spec.profile_iters > 0
        self.run_dir = Path(run_dir)
        self.rank = rank
        self.first_step = spec.warmup_iters + spec.profile_start
        self.last_step = self.first_step + spec.profile_iters - 1
        self.activities = ["cpu"] + (["cuda"] if device.type == "cuda" else [])
        self._steps_done = 0
        self._ready = False
        self._exported = False
        self._prof: profile | None = None
        if not self.enabled:
            return
        quiet_kineto(rank)
        warmup = 1 if self.first_step >= 1 else 0  # one untraced profiler warm-up step when there is room
        kinds = {"cpu": ProfilerActivity.CPU, "cuda": ProfilerActivity.CUDA}
        self._prof = profile(
            activities=[kinds[a] for a in self.activities],
            schedule=schedule(wait=self.first_step - warmup, warmup=warmup, active=spec.profile_iters, repeat=1),
            on_trace_ready=self._on_ready,
            record_shapes=False,
        )

    def _on_ready(self, _prof: profile) -> None:
        # Exporting here would fall inside the measured window; stop() exports after it.
        self._ready = True

    def start(self) -> None:
        """Call before the first (warm-up) iteration."""
        if self._prof is None:
            return
        if "cuda" in self.activities:
            _initialise_cupti()
        self._prof.start()

    def step(self) -> None:
        if self._prof is not None:
            self._prof.step()
        self._steps_done += 1

    def stop(self) -> None:
        """End profiling and write the trace, if every traced step ran. Call it after the
        measured window (the export takes time); a window cut short writes no trace."""
        if self._prof is None:
            return
        prof, self._prof = self._prof, None
        prof.stop()
        if not (self._ready and self._steps_done > self.last_step):
            return
        path = self.run_dir / trace_file(self.rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        stem = f".{path.name[: -len('.json.gz')]}.tmp"
        plain, packed = path.with_name(f"{stem}.json"), path.with_name(f"{stem}.json.gz")
        # torch would gzip a .gz path line by line at level 9 (a third of a CPU-second for a smoke
        # run's trace); exported plain and compressed in large blocks it is ten times cheaper
        prof.export_chrome_trace(str(plain))
        with open(plain, "rb") as fin, gzip.open(packed, "wb", compresslevel=6) as fout:
            shutil.copyfileobj(fin, fout, 1 << 20)
        plain.unlink()
        os.replace(packed, path)
        self._exported = True

    def __enter__(self) -> "ProfilerWindow":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self) -> dict | None:
        """The `profile` record value, once the trace is written; None otherwise."""
        if not self._exported:
            return None
        return {
            "trace_file": trace_file(self.rank),
            "steps": [self.first_step, self.last_step],
            "activities": list(self.activities),
        }
