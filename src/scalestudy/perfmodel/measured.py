"""What the model reads from measured raw logs: one `MeasuredRun` per complete training run, and
for a traced run the time of its GPU kernels per step by category. Pure Python (no torch).

Kernel categories (by kernel name, and by the profiler annotation the CPU launched it under):
  gemm        matrix products (nvjet, cutlass, cublas, *gemm*, xmma)
  attention   fused attention (sdpa, flash, fmha, cudnn)
  optimizer   any kernel launched inside `Optimizer.step`
  fsdp_copy   any other kernel launched inside an `FSDP::` annotation (all-gather copy-in/out,
              reduce-scatter copy-in and casts)
  comm        NCCL kernels
  elementwise every other kernel (norms, activations, residual adds, casts, loss)
A kernel belongs to the profiler step in which the CPU launched it (as in scalestudy.measure.exposed_comm).
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from scalestudy.measure import metrics
from scalestudy.measure.exposed_comm import load_trace
from scalestudy.measure.intervals import union
from scalestudy.measure.rawlog import find_runs, read_run
from scalestudy.spec.run import RunSpec

CATEGORIES = ("gemm", "attention", "optimizer", "fsdp_copy", "comm", "elementwise")
_GEMM = re.compile(r"nvjet|cutlass|cublas|gemm|xmma|s16816|s1688", re.I)
_ATTN = re.compile(r"sdpa|flash|fmha|cudnn|attention", re.I)
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True)
class KernelBreakdown:
    """Kernel seconds per traced step, by category; `busy_s`: the union of non-NCCL kernels per
    step; `wall_s`: the step annotations' mean length."""

    per_step_s: dict
    busy_s: float
    wall_s: float
    n_steps: int
    trace: str


@dataclass(frozen=True)
class MeasuredRun:
    run_id: str
    raw_dir: str  # as given (relative to the project root where possible)
    spec: RunSpec
    status: str
    device_name: str | None
    peak_flops: float | None
    step_time_s: float | None  # mean measured step, slowest rank
    tokens_per_step: int
    mean_power_w: float | None  # per GPU, GPU board only
    idle_power_w: float | None
    kernels: KernelBreakdown | None
    files_sha256: dict = field(default_factory=dict)
    alloc_retries: int = 0  # the caching allocator's retries during the measured steps
    step_cv: float | None = None  # standard deviation / mean of the measured step times (rank 0's records)
    n_steps: int = 0  # measured steps behind step_cv

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.step_time_s is not None

    @property
    def modelled(self) -> bool:
        """A run the compute model describes: complete, eager (compiled blocks fuse what it counts
        as separate passes), and with no allocator retry in its measured steps (a retry frees the
        allocator's cache and allocates again: a stall near the memory limit it does not model)."""
        return self.ok and not self.spec.compile and not self.alloc_retries

    def provenance(self) -> dict:
        return {
            "run_id": self.run_id,
            "raw_dir": self.raw_dir,
            "status": self.status,
            "device_name": self.device_name,
            "files_sha256": dict(self.files_sha256),
            "traced": self.kernels is not None,
        }


def _category(name: str, in_optimizer: bool, in_fsdp: bool) -> str:
    if "nccl" in name.lower():
        return "comm"
    if _ATTN.search(name):
        return "attention"
    if _GEMM.search(name):
        return "gemm"
    if in_optimizer:
        return "optimizer"
    if in_fsdp:
        return "fsdp_copy"
    return "elementwise"


class _Spans:
    """Merged spans per thread, for 'was this launch inside an annotation of this kind'."""

    def __init__(self, events, pred):
        by: dict = {}
        for e in events:
            if e.get("cat") == "user_annotation" and pred(e.get("name", "")):
                by.setdefault(e.get("tid"), []).append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
        self.by = {t: union(v) for t, v in by.items()}
        self.starts = {t: [s for s, _ in v] for t, v in self.by.items()}

    def contains(self, tid, ts: float) -> bool:
        spans = self.by.get(tid)
        if not spans:
            return False
        i = bisect.bisect_right(self.starts[tid], ts) - 1
        return i >= 0 and spans[i][0] <= ts <= spans[i][1]


@lru_cache(maxsize=16)
def kernel_breakdown(trace_path: str) -> KernelBreakdown:
    events = load_trace(trace_path)["traceEvents"]
    steps = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in events
        if e.get("cat") == "user_annotation" and _STEP.match(e.get("name", ""))
    )
    if not steps:
        raise ValueError(f"{trace_path}: no ProfilerStep annotations")
    step_starts = [s for s, _ in steps]
    launch = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch[e["args"]["correlation"]] = (float(e["ts"]), e.get("tid"))
    opt = _Spans(events, lambda n: n.startswith("Optimizer.step"))
    fsdp = _Spans(events, lambda n: n.startswith("FSDP::"))
    totals = {c: 0.0 for c in CATEGORIES}
    busy = []
    for e in events:
        if e.get("cat") != "kernel":
            continue
        ts, tid = launch.get(e.get("args", {}).get("correlation"), (float(e["ts"]), None))
        i = bisect.bisect_right(step_starts, ts) - 1
        if i < 0 or ts > steps[i][1]:
            continue
        cat = _category(e.get("name", ""), opt.contains(tid, ts), fsdp.contains(tid, ts))
        dur = float(e.get("dur", 0)) * 1e-6
        totals[cat] += dur
        if cat != "comm":
            busy.append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    n = len(steps)
    busy_s = sum(b - a for a, b in union(busy)) * 1e-6 / n
    wall = sum(b - a for a, b in steps) * 1e-6 / n
    return KernelBreakdown({c: v / n for c, v in totals.items()}, busy_s, wall, n, trace_path)


def _rel(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path.as_posix()


def read_measured(run_dir: Path | str, root: Path | str | None = None) -> MeasuredRun | None:
    """One training run's MeasuredRun (None for a collectives benchmark)."""
    run_dir = Path(run_dir)
    log = read_run(run_dir)
    if log.run.get("kind", "train") != "train":
        return None
    spec = RunSpec.from_dict(log.spec)
    recs = log.records
    peaks = [r["value"] for r in recs if r["key"] == "device_peak"]
    step_time = step_cv = None
    retries = n_steps = 0
    if log.status["status"] == "ok":
        steps = list(log.iterations())
        measured = [r for r in steps if r["value"]["phase"] == "measured"]
        if measured:
            step_time = metrics.throughput(measured, spec.world_size)["step_time_mean_s"]
            own = [r["value"]["step_time_s"] for r in measured if r.get("metadata", {}).get("rank", 0) == 0]
            n_steps = len(own)
            if n_steps >= 2:
                step_cv = statistics.stdev(own) / statistics.fmean(own)
            before = steps[steps.index(measured[0]) - 1] if steps.index(measured[0]) else None
            retries = _alloc_retries(measured[-1]) - (_alloc_retries(before) if before else 0)
    energy = [r["value"] for r in recs if r["key"] == "energy" and r["value"].get("available")]
    power = [e["mean_power_w"] for e in energy if e.get("mean_power_w") is not None]
    idle = [e["idle_power_w"] for e in energy if e.get("idle_power_w") is not None]
    kernels = None
    profiles = [r["value"] for r in recs if r["key"] == "profile" and r["metadata"].get("rank", 0) == 0]
    if profiles and log.status["status"] == "ok":
        p = run_dir / profiles[0]["trace_file"]
        if p.exists():
            kernels = kernel_breakdown(str(p))
    files = {}
    for rel, digest in sorted((log.status.get("files_sha256") or {}).items()):
        files[rel] = digest
    return MeasuredRun(
        run_id=log.run_id,
        raw_dir=_rel(run_dir, Path(root) if root is not None else None),
        spec=spec,
        status=log.status["status"],
        device_name=peaks[0].get("device_name") if peaks else None,
        peak_flops=peaks[0].get("peak_flops_per_s") if peaks else None,
        step_time_s=step_time,
        tokens_per_step=spec.tokens_per_step,
        mean_power_w=sum(power) / len(power) if power else None,
        idle_power_w=sum(idle) / len(idle) if idle else None,
        kernels=kernels,
        files_sha256=files,
        alloc_retries=retries,
        step_cv=step_cv,
        n_steps=n_steps,
    )


def _alloc_retries(iteration: dict) -> int:
    """The allocator's retry count so far (cumulative; 0 where the record has none, e.g. on CPU)."""
    return int((iteration["value"].get("memory") or {}).get("alloc_retries") or 0)


def read_measured_dir(raw_dir: Path | str, root: Path | str | None = None) -> list[MeasuredRun]:
    """Every complete training run under raw_dir, sorted by run id."""
    out = []
    for d in find_runs(raw_dir):
        if not (d / "status.json").exists():
            continue
        m = read_measured(d, root)
        if m is not None:
            out.append(m)
    return sorted(out, key=lambda m: m.run_id)


def digest(runs: list[MeasuredRun]) -> str:
    """A short digest of the calibration data (run ids and their files' sha256)."""
    h = hashlib.sha256()
    for r in sorted(runs, key=lambda r: r.run_id):
        h.update(r.run_id.encode())
        for k, v in sorted(r.files_sha256.items()):
            h.update(f"{k}={v}".encode())
    return h.hexdigest()[:16]


def finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)
