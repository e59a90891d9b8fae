"""Exposed communication from torch.profiler Chrome traces (one trace per rank). Pure Python.

Exposed communication is the time during which communication runs and no computation does,
both taken as unions over every stream or thread of the rank. How the two are told apart
depends on what the trace holds:

gpu_kernels   (a trace with GPU kernels): communication is the kernels whose name contains
              "nccl", computation every other kernel; memcpy and memset are neither.
cpu_gloo_ops  (a CPU trace of the gloo backend, which has no kernels): gloo runs collectives on
              its own threads, which carry `gloo:<op>` annotations. Communication is everything
              on those threads plus the `c10d::*` and `record_param_comms` calls on the training
              threads (on gloo they copy the buffers in and out); computation is the time of
              `aten::*` operators on the training threads outside those calls. Only aten
              operators count as computation because the enclosing autograd and FSDP ops also
              span the time their thread sits blocked waiting for a collective.

Each iteration is one `ProfilerStep#N` annotation. An event belongs to the step in which it
started; a kernel belongs to the step in which the CPU launched it (matched by correlation
id). On CPU traces an event's time counts within its step's window only, so exposed
communication never exceeds the step, and its share of the step is taken against the same
windows (run_table). Per-trace totals are sums over the steps; events outside every step are
left out.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import os
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from scalestudy.measure import intervals
from scalestudy.measure.intervals import Interval

GPU_KERNELS = "gpu_kernels"
CPU_GLOO_OPS = "cpu_gloo_ops"
MEASURED = {
    GPU_KERNELS: "GPU kernel time: communication = NCCL kernels, computation = all other kernels "
    "(memcpy/memset excluded), each a union over streams",
    CPU_GLOO_OPS: "CPU op time on the gloo backend: communication = gloo threads' work and c10d calls, "
    "computation = aten operators on the training threads; a CPU stand-in for the "
    "kernel-level measure, not comparable with GPU numbers",
}
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
_US = 1e-6


class TraceError(ValueError):
    """A trace that cannot be read or analysed, naming the file."""

    def __init__(self, path: str, reason: str):
        self.path = path
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True)
class StepOverlap:
    """Compute, communication and its exposed part in one traced step."""

    step: int | None  # N of ProfilerStep#N; None for a trace without step annotations
    wall_s: float  # the step annotation's length (the traced span without annotations)
    compute_s: float
    comm_s: float
    exposed_comm_s: float
    overlap_fraction: float | None  # 1 - exposed/comm; None without communication


@dataclass(frozen=True)
class ExposedComm:
    """Exposed communication of one trace: its totals and each step's."""

    trace: str
    rank: int | None
    kind: str
    measured: str
    compute_s: float
    comm_s: float
    exposed_comm_s: float
    overlap_fraction: float | None
    per_step: list[StepOverlap] = field(default_factory=list)
    n_events_outside_steps: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def _overlap_fraction(comm_s: float, exposed_s: float) -> float | None:
    return None if comm_s <= 0 else 1.0 - exposed_s / comm_s


# ---- reading ----------------------------------------------------------------------------
def load_trace(path: os.PathLike | str) -> dict:
    """A Chrome trace as exported by torch.profiler (`.json.gz` or `.json`)."""
    path = str(path)
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rt") as f:
                data = json.load(f)
        else:
            with open(path) as f:
                data = json.load(f)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(path, f"not a readable Chrome trace ({e})") from None
    if isinstance(data, list):  # the bare-array form of the Chrome trace format
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError(path, "no traceEvents list")
    return data


# ---- classification ---------------------------------------------------------------------
@dataclass
class _Classified:
    kind: str
    steps: list[tuple[int, float, float]]  # (N, start, end), in microseconds
    comm: list[tuple[float, Interval]]  # (anchor, interval)
    compute: list[tuple[float, Any, Interval]]  # (anchor, thread, interval)
    compute_mask: list[tuple[float, Any, Interval]]  # time on a thread that is not computation


def _span(e: dict) -> Interval:
    ts = float(e["ts"])
    return ts, ts + float(e.get("dur", 0.0))


def _profiler_steps(events: list[dict]) -> list[tuple[int, float, float]]:
    steps = []
    for e in events:
        m = _STEP.match(e.get("name", ""))
        if m and e.get("cat") == "user_annotation":
            steps.append((int(m.group(1)), *_span(e)))
    return sorted(steps, key=lambda s: s[1])


def _classify_gpu(events: list[dict]) -> tuple[list, list, list]:
    launch_ts = {}
    for e in events:
        if e.get("cat") in _RUNTIME_CATS and "correlation" in e.get("args", {}):
            launch_ts[e["args"]["correlation"]] = float(e["ts"])
    comm, compute = [], []
    for e in events:
        if e.get("cat") != "kernel":
            continue
        span = _span(e)
        anchor = launch_ts.get(e.get("args", {}).get("correlation"), span[0])
        if "nccl" in e.get("name", "").lower():
            comm.append((anchor, span))
        else:
            compute.append((anchor, "gpu", span))
    return comm, compute, []


def _is_comm_call(name: str) -> bool:
    return name.startswith("c10d::") or name == "record_param_comms"


def _classify_cpu(events: list[dict]) -> tuple[list, list, list]:
    def thread(e: dict) -> tuple:
        return e.get("pid"), e.get("tid")

    # The training threads carry the ProfilerStep annotations. Gloo runs most collectives on
    # threads of its own, but point-to-point send/recv (pipeline parallelism) on the training
    # thread: there a `gloo:` annotation is a communication call like c10d's, not a thread of
    # communication (else the whole step, its computation too, counted as exposed).
    training = {thread(e) for e in events if _STEP.match(e.get("name", ""))}
    gloo_threads = {thread(e) for e in events if e.get("name", "").startswith("gloo:")} - training
    comm, compute, mask = [], [], []
    for e in events:
        span = _span(e)
        name, t = e.get("name", ""), thread(e)
        if t in gloo_threads:
            if e.get("cat") in ("cpu_op", "user_annotation"):
                comm.append((span[0], span))
        elif e.get("cat") in ("cpu_op", "user_annotation") and name.startswith("gloo:"):
            comm.append((span[0], span))
            mask.append((span[0], t, span))
        elif e.get("cat") == "cpu_op" and _is_comm_call(name):
            comm.append((span[0], span))
            mask.append((span[0], t, span))
        elif e.get("cat") == "cpu_op" and name.startswith("aten::"):
            compute.append((span[0], t, span))
    return comm, compute, mask


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_events(raw: list, path: str) -> list[dict]:
    """The complete ('X') events of a profiler trace; TraceError naming the file for anything that
    is not one (events that are not objects, times that are not numbers, no events at all)."""
    if not raw:
        raise TraceError(path, "no events: not a profiler trace (an empty trace)")
    bad = [i for i, e in enumerate(raw) if not isinstance(e, dict)]
    if bad:
        raise TraceError(
            path,
            f"{len(bad)} of {len(raw)} trace events are not JSON objects (event {bad[0]} is "
            f"{raw[bad[0]]!r}): not a profiler trace",
        )
    events = [e for e in raw if e.get("ph") == "X"]
    if not events:
        raise TraceError(path, "no complete ('ph': 'X') events: not a profiler trace")
    for i, e in enumerate(events):
        if not _number(e.get("ts")) or not _number(e.get("dur", 0.0)):
            raise TraceError(
                path, f"event {e.get('name')!r} has ts {e.get('ts')!r} and dur {e.get('dur')!r}: times must be numbers"
            )
    return events


def _classify(trace: dict, path: str) -> _Classified:
    events = _check_events(trace["traceEvents"], path)
    if any(e.get("cat") == "kernel" for e in events):
        kind = GPU_KERNELS
        comm, compute, mask = _classify_gpu(events)
    else:
        backend = (trace.get("distributedInfo") or {}).get("backend")
        if backend == "nccl":
            raise TraceError(
                path,
                "an NCCL run's trace without GPU kernels: profile with "
                "ProfilerActivity.CUDA to measure exposed communication",
            )
        kind = CPU_GLOO_OPS
        comm, compute, mask = _classify_cpu(events)
    if not comm and not compute:
        raise TraceError(
            path,
            "neither GPU kernels nor CPU operators (aten::, gloo) in its events: not a "
            "torch.profiler trace of a training step",
        )
    return _Classified(kind, _profiler_steps(events), comm, compute, mask)


# ---- analysis ---------------------------------------------------------------------------
def _step_overlap(
    step: int | None,
    window: Interval,
    comm: Iterable[Interval],
    compute_by_thread: dict[Any, list[Interval]],
    mask_by_thread: dict[Any, list[Interval]],
    clip: bool = False,
) -> StepOverlap:
    # clip (CPU traces): spans count within their step's window only. A gloo thread's wait that
    # started in the step but ran on past its end would otherwise count time of the next step,
    # and exposed communication could exceed the step it belongs to. GPU kernels run after the
    # CPU window that launched them, so theirs are not clipped.
    lo, hi = window
    wall_us = hi - lo
    comm_u = intervals.union(comm)
    compute_u = intervals.union(
        *(intervals.subtract(spans, mask_by_thread.get(t, [])) for t, spans in compute_by_thread.items())
    )
    if clip:
        comm_u, compute_u = intervals.clip(comm_u, lo, hi), intervals.clip(compute_u, lo, hi)
    comm_s = intervals.total(comm_u) * _US
    exposed_s = intervals.total(intervals.subtract(comm_u, compute_u)) * _US
    return StepOverlap(
        step=step,
        wall_s=wall_us * _US,
        compute_s=intervals.total(compute_u) * _US,
        comm_s=comm_s,
        exposed_comm_s=exposed_s,
        overlap_fraction=_overlap_fraction(comm_s, exposed_s),
    )


def analyse_trace(trace: os.PathLike | str | dict, *, name: str | None = None) -> ExposedComm:
    """Compute, communication and exposed communication of one rank's trace, per step and summed."""
    if isinstance(trace, dict):
        path, data = name or "<trace>", trace
    else:
        path, data = str(trace), load_trace(trace)
    c = _classify(data, path)

    n_buckets = max(len(c.steps), 1)
    starts = [s[1] for s in c.steps]
    comm: list[list[Interval]] = [[] for _ in range(n_buckets)]
    compute: list[dict] = [defaultdict(list) for _ in range(n_buckets)]
    mask: list[dict] = [defaultdict(list) for _ in range(n_buckets)]
    outside = 0

    def bucket(anchor: float) -> int | None:
        if not c.steps:
            return 0
        i = bisect.bisect_right(starts, anchor) - 1
        return i if i >= 0 and anchor < c.steps[i][2] else None

    for anchor, span in c.comm:
        b = bucket(anchor)
        if b is None:
            outside += 1
        else:
            comm[b].append(span)
    for dest, items in ((compute, c.compute), (mask, c.compute_mask)):
        for anchor, t, span in items:
            b = bucket(anchor)
            if b is None:
                outside += 1
            else:
                dest[b][t].append(span)

    if c.steps:
        windows = [(n, (start, end)) for n, start, end in c.steps]
    else:
        every = [s for _, s in c.comm] + [s for _, _, s in c.compute]
        windows = [(None, (min(s for s, _ in every), max(e for _, e in every)) if every else (0.0, 0.0))]  # type: ignore[list-item]  # one window, not numbered, for a trace without steps
    per_step = [
        _step_overlap(n, win, comm[i], compute[i], mask[i], clip=c.kind == CPU_GLOO_OPS)
        for i, (n, win) in enumerate(windows)
    ]
    comm_s = sum(s.comm_s for s in per_step)
    exposed_s = sum(s.exposed_comm_s for s in per_step)
    return ExposedComm(
        trace=path,
        rank=(data.get("distributedInfo") or {}).get("rank"),
        kind=c.kind,
        measured=MEASURED[c.kind],
        compute_s=sum(s.compute_s for s in per_step),
        comm_s=comm_s,
        exposed_comm_s=exposed_s,
        overlap_fraction=_overlap_fraction(comm_s, exposed_s),
        per_step=per_step,
        n_events_outside_steps=outside,
    )


def summarise(results: list[ExposedComm]) -> dict:
    """Totals over several ranks' traces (rank-seconds), the mean per rank and per rank-step,
    and each rank's detail."""
    if not results:
        raise ValueError("no traces to summarise")
    kinds = sorted({r.kind for r in results})
    if len(kinds) > 1:
        raise ValueError(f"the traces mix kinds {kinds}: analyse GPU and CPU traces separately")
    compute = sum(r.compute_s for r in results)
    comm = sum(r.comm_s for r in results)
    exposed = sum(r.exposed_comm_s for r in results)
    n_ranks = len(results)
    n_rank_steps = sum(len(r.per_step) for r in results)
    return {
        "kind": kinds[0],
        "measured": MEASURED[kinds[0]],
        "n_traces": n_ranks,
        "n_rank_steps": n_rank_steps,
        "compute_s": compute,
        "comm_s": comm,
        "exposed_comm_s": exposed,
        "overlap_fraction": _overlap_fraction(comm, exposed),
        "totals_are": "seconds summed over the traces' ranks and steps",
        "mean_per_rank_step": {
            "compute_s": compute / n_rank_steps,
            "comm_s": comm / n_rank_steps,
            "exposed_comm_s": exposed / n_rank_steps,
        },
        "per_rank": [r.as_dict() for r in sorted(results, key=lambda r: (r.rank is None, r.rank or 0, r.trace))],
    }


# ---- cross-check ------------------------------------------------------------------------
def hta_overlap(trace_dir: os.PathLike | str) -> dict[int, float]:
    """HolisticTraceAnalysis's communication/computation overlap per rank, as a fraction of
    communication time (comparable with `overlap_fraction` of GPU traces)."""
    try:
        from hta.trace_analysis import TraceAnalysis  # optional (scalestudy[hta]) and heavy: only for this cross-check
    except ImportError as e:
        raise ImportError("hta_overlap needs HolisticTraceAnalysis: pip install 'scalestudy[hta]'") from e
    if not Path(trace_dir).is_dir():
        raise NotADirectoryError(f"{trace_dir}: not a directory of traces")
    df = TraceAnalysis(trace_dir=str(trace_dir)).get_comm_comp_overlap(visualize=False)
    return {int(r): float(p) / 100.0 for r, p in zip(df["rank"], df["comp_comm_overlap_pctg"])}
