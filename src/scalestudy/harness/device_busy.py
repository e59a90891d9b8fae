"""How long the GPU itself works in a step: the union of its kernel, memory-copy and memset
intervals, recorded by torch.profiler (CUDA activity only, no CPU operator tracing).

A rank share (spec `comm: fake`) of a tensor-parallel layout is host-bound on one GPU: DTensor's
dispatch issues kernels more slowly than the GPU runs them, and with the collectives faked the GPU
waits on the host. The wall step is then the host's loop, not the GPU's work. This meter records
the GPU's side in a `device_busy` record, so the analysis can tell the two apart
(perfmodel/rank_shares.py: the GPU's time is the computation, the host's loop a floor).

Tracing slows a host-bound loop (measured on the H200: a TP=8 share's step 0.42 s untraced, 0.54 s
with the meter inside the measured window), so the meter never traces a measured step: after the
measured window (and the energy window) the run trains BUSY_STEPS more steps (one where a
measured step takes over LONG_STEP_S: the two traced steps of 29 shares on the H200 agreed within
0.5% but one, 5%), each in its own profiler session, and everything that session records is that
step's. These steps are logged only in the `device_busy` record, never as iterations.

Runs on CUDA rank shares only, and not for a run with its own profiler window (its trace holds
the kernels). The meter never fails a run: an error becomes the reason it is unavailable.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

from torch.profiler import ProfilerActivity, profile

from scalestudy.measure.intervals import total

BUSY_STEPS = 2
LONG_STEP_S = 5.0
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
METHOD = (
    f"{BUSY_STEPS} steps (1 where a measured step takes over {LONG_STEP_S:g} s) after the measured window, "
    f"each alone in a torch.profiler session (CUDA activity only): the union of the GPU's {', '.join(GPU_CATS)} "
    "intervals in its Chrome trace"
)


def applies(spec, device) -> str | None:
    """None where the meter runs for this run; otherwise why not."""
    if device.type != "cuda":
        return "not a CUDA run"
    if spec.comm != "fake":
        return "not a rank share (the meter runs under comm: fake only)"
    if spec.profile_iters > 0:
        return "the run's own torch.profiler window traces its steps (its trace holds the kernels)"
    return None


def busy_seconds(trace_events: list[dict]) -> tuple[float, int]:
    """Seconds covered by at least one GPU activity of a Chrome trace's events (ts, dur in us),
    and how many activities there were."""
    acts = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e in trace_events
        if e.get("cat") in GPU_CATS and e.get("ph") == "X"
    ]
    return total(acts) / 1e6, len(acts)


def traced_step(run_step, sync, activities=None) -> tuple[float, float, int]:
    """Run one step alone in a profiler session of CUDA activity (`activities`: torch.profiler's,
    for a test on the CPU): (its GPU-busy seconds, its host wall seconds, its GPU activities)."""
    prof = profile(activities=activities or [ProfilerActivity.CUDA], record_shapes=False)
    sync()
    prof.start()
    t0 = time.perf_counter()
    run_step()
    sync()
    wall = time.perf_counter() - t0
    prof.stop()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="scalestudy-busy-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    finally:
        os.unlink(path)
    busy, n = busy_seconds(events)
    return busy, wall, n


def steps_to_trace(measured_step_s: list[float]) -> int:
    return 1 if measured_step_s and sum(measured_step_s) / len(measured_step_s) > LONG_STEP_S else BUSY_STEPS


def measure(run_step, sync, n_steps: int = BUSY_STEPS) -> dict:
    """The `device_busy` record: n_steps traced steps (run_step(i) trains extra step i)."""
    busy, walls, counts = [], [], []
    try:
        for i in range(n_steps):
            b, w, n = traced_step(lambda: run_step(i), sync)
            busy.append(b), walls.append(w), counts.append(n)
    except Exception as e:  # noqa: BLE001 - the meter never fails a run
        return {"available": False, "reason": f"{type(e).__name__}: {e}", "method": METHOD}
    if not any(counts):
        return {"available": False, "reason": "the profiler recorded no GPU activity", "method": METHOD}
    return {
        "available": True,
        "method": METHOD,
        "n_steps": len(busy),
        "busy_s": busy,
        "host_wall_s": walls,
        "n_activities": counts,
        "busy_s_per_step": sum(busy) / len(busy),
    }
