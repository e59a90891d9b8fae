"""Synthetic but well-formed raw logs for the analysis tests, written through rawlog's own
writers (RankLog and try_finalize), and Study objects built directly."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from scalestudy.measure import rawlog
from scalestudy.spec.collectives import CollectivesSpec
from scalestudy.spec.run import RunSpec
from scalestudy.spec.studies import PlannedRun, Study

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
CPU_NAME = "Test CPU"
GIT_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def provenance(world_size: int, device_name: str, nodes: int = 1, dirty: bool = False) -> dict:
    return {
        "package": {
            "name": "scalestudy",
            "version": "0.1.0",
            "git": {"commit": GIT_COMMIT, "dirty": dirty, "reason": None},
        },
        "python": "3.11.9",
        "platform": "Linux-test",
        "torch": "2.7.0",
        "cuda": "12.6",
        "nccl": "2.26.2",
        "libraries": {"torch": "2.7.0", "numpy": "2.0.0"},
        "command": ["scalestudy", "train"],
        "environment": {},
        "slurm": {"job_id": "4242", "nodelist": "node[01-02]", "nnodes": str(nodes)},
        "hosts": [f"node{i:02d}" for i in range(nodes)],
        "devices": {"count": world_size, "names": [device_name]},
        "ranks": [],
    }


def chrome_trace(steps: list[int], compute_us: float, comm_us: float, overlap_us: float) -> dict:
    """A torch.profiler-like GPU trace: per step one compute kernel and one NCCL kernel that
    overlaps its end by overlap_us."""
    events, t = [], 1000.0
    for n in steps:
        length = compute_us + comm_us - overlap_us + 10.0
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{n}",
                "ts": t,
                "dur": length,
                "pid": 1,
                "tid": 1,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "sm90_xmma_gemm_bf16",
                "ts": t + 1,
                "dur": compute_us,
                "pid": 0,
                "tid": 7,
                "args": {},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "ncclDevKernel_AllGather_RING_LL",
                "ts": t + 1 + compute_us - overlap_us,
                "dur": comm_us,
                "pid": 0,
                "tid": 20,
                "args": {},
            }
        )
        t += length + 50.0
    return {"traceEvents": events, "distributedInfo": {"backend": "nccl", "rank": 0}}


def write_train_run(
    raw_dir: Path,
    spec: RunSpec,
    *,
    status: str = "ok",
    step_time_s: float | list = 0.5,
    warmup_step_time_s: float = 5.0,
    device_name: str = H100,
    peak_flops: float = 1e12,
    peak_source: str = "table",
    flops_record: bool = True,
    peak_record: bool = True,
    power_w: float | None = None,
    idle_w: float = 70.0,
    energy_reason: str = "no NVML: CPU run",
    trace: tuple[float, float, float] | None = None,
    memory_bytes: int = 1 << 30,
    fail_at_step: int = 1,
    device_busy_s: float | None = None,
    overrides: dict | None = None,
    dirty: bool = False,
) -> Path:
    """One training run's directory, as the harness would write it (device_busy_s: the GPU's busy
    time per step, a `device_busy` record as harness/device_busy.py writes it)."""
    from scalestudy.measure import metrics

    run_dir = Path(raw_dir) / spec.run_id
    run_dir.mkdir(parents=True)
    world = spec.processes  # a fake-communication rank share is one process
    rawlog.atomic_write_json(
        run_dir / rawlog.RUN_FILE,
        {
            "schema": rawlog.SCHEMA,
            "kind": "train",
            "run_id": spec.run_id,
            "config_id": spec.config_id,
            "spec": spec.to_dict(),
            "layout": spec.layout,
            "launch": {"world_size": world},
            "provenance": provenance(world, device_name, spec.nodes, dirty),
            "start_time_unix": 1.0,
            **({"overrides": overrides} if overrides is not None else {}),
        },
    )
    times = step_time_s if isinstance(step_time_s, list) else [step_time_s] * spec.measured_iters
    fpt = metrics.flops_per_token(spec.model_config(), spec.seq_len)
    traced = list(
        range(spec.warmup_iters + spec.profile_start, spec.warmup_iters + spec.profile_start + spec.profile_iters)
    )
    for rank in range(world):
        log = rawlog.RankLog(run_dir, rank, spec.run_id)
        if peak_record:
            log.log(
                "device_peak",
                {
                    "device_name": device_name,
                    "dtype": "bf16",
                    "peak_flops_per_s": peak_flops,
                    "source": peak_source,
                    "detail": {},
                },
            )
        if rank == 0 and flops_record:
            log.log("flops", fpt)
        n_steps = spec.warmup_iters + spec.measured_iters if status == "ok" else fail_at_step
        for step in range(n_steps):
            phase = "warmup" if step < spec.warmup_iters else "measured"
            dt = warmup_step_time_s if phase == "warmup" else times[step - spec.warmup_iters]
            mem = (
                {
                    "kind": "cuda_caching_allocator",
                    "peak_allocated_bytes": memory_bytes + rank,
                    "peak_reserved_bytes": memory_bytes + 1000,
                    "alloc_retries": 0,
                }
                if spec.device == "cuda"
                else {"kind": "cpu_peak_rss", "peak_rss_bytes": memory_bytes + rank}
            )
            log.log(
                "iteration",
                {
                    "step": step,
                    "phase": phase,
                    "step_time_s": dt,
                    "tokens": spec.tokens_per_step,
                    "loss": 5.0,
                    "memory": mem,
                },
            )
        if status != "ok":
            log.log("error", {"type": "OutOfMemoryError", "message": "CUDA out of memory"})
            log.write_status(status, error="OutOfMemoryError: CUDA out of memory")
            continue
        window = sum(times)
        if power_w is None:
            from scalestudy.measure.energy import unavailable_record

            log.log("energy", unavailable_record(energy_reason))
        else:
            log.log(
                "energy",
                {
                    "available": True,
                    "gpu_index": rank % spec.procs_per_node,
                    "energy_j": power_w * window,
                    "window_s": window,
                    "sampled_energy_j": power_w * window,
                    "mean_power_w": power_w,
                    "idle_power_w": idle_w,
                    "sample_period_s": 0.1,
                    "n_samples": 10,
                    "method": "nvml_total_energy_counter",
                    "scope": "GPU board power only (NVML); CPU, memory and network not included",
                    "reason": None,
                },
            )
        if device_busy_s is not None:
            log.log(
                "device_busy",
                {
                    "available": True,
                    "method": "test",
                    "n_steps": 2,
                    "busy_s": [device_busy_s] * 2,
                    "host_wall_s": [times[0]] * 2,
                    "n_activities": [100, 100],
                    "busy_s_per_step": device_busy_s,
                },
            )
        if trace is not None and spec.profile_iters:
            rel = f"traces/rank-{rank:05d}.json.gz"
            (run_dir / "traces").mkdir(exist_ok=True)
            with gzip.open(run_dir / rel, "wt") as f:
                json.dump(chrome_trace(traced, *trace), f)
            log.log("profile", {"trace_file": rel, "steps": [traced[0], traced[-1]], "activities": ["cpu", "cuda"]})
        log.write_status("ok")
    assert rawlog.try_finalize(run_dir, world)
    return run_dir


def write_collectives_run(
    raw_dir: Path, cs: CollectivesSpec, busbw, *, status: str = "ok", device_name: str = H100
) -> Path:
    """One collectives-benchmark run; busbw(op, size_bytes, nodes, seed) gives its bus bandwidth."""
    from scalestudy.measure import bandwidth

    run_dir = Path(raw_dir) / cs.run_id
    run_dir.mkdir(parents=True)
    world = cs.world_size
    rawlog.atomic_write_json(
        run_dir / rawlog.RUN_FILE,
        {
            "schema": rawlog.SCHEMA,
            "kind": "collectives",
            "run_id": cs.run_id,
            "config_id": cs.config_id,
            "spec": cs.to_dict(),
            "launch": {"world_size": world},
            "provenance": provenance(world, device_name, cs.nodes),
            "start_time_unix": 1.0,
        },
    )
    for rank in range(world):
        log = rawlog.RankLog(run_dir, rank, cs.run_id)
        if status != "ok":
            log.write_status(status, error="DistBackendError: NCCL timeout")
            continue
        if rank == 0:
            for op in cs.ops:
                for size in cs.sizes():
                    msg = bandwidth.message(op, size, world, cs.dtype)
                    bus = busbw(op, msg.size_bytes, cs.nodes, cs.seed)
                    factor = bandwidth.busbw_factor(op, world)
                    algbw = bus / factor
                    log.log(
                        "collective",
                        {
                            "op": op,
                            "size_bytes": msg.size_bytes,
                            "requested_bytes": size,
                            "count": msg.count,
                            "dtype": cs.dtype,
                            "world_size": world,
                            "nodes": cs.nodes,
                            "procs_per_node": cs.procs_per_node,
                            "iters": cs.iters,
                            "warmup": cs.warmup_iters,
                            "in_place": False,
                            "time_s": msg.size_bytes / (algbw * 1e9),
                            "algbw_GBps": algbw,
                            "busbw_GBps": bus,
                            "busbw_factor": factor,
                            "wrong_elements": 0,
                            "correct": True,
                        },
                    )
        log.write_status("ok")
    assert rawlog.try_finalize(run_dir, world)
    return run_dir


def make_study(
    root: Path,
    runs: list[PlannedRun],
    collectives: tuple = (),
    *,
    name: str = "t",
    hardware: str = "H100 SXM (synthetic test data)",
) -> Study:
    from scalestudy.analysis.figures import FIGURES

    return Study(
        name=name,
        description="synthetic test study",
        hardware=hardware,
        assumptions=("sequence length 4096 [assumed]",),
        runs=tuple(runs),
        collectives=tuple(collectives),
        figures=tuple(FIGURES),
        root=Path(root),
    )


# one small GPU configuration of the integrity tests (audit, faults)
INTEGRITY_SPEC = RunSpec(
    model="tiny", seq_len=128, warmup_iters=1, measured_iters=4, device="cuda", nodes=1, procs_per_node=1, micro_batch=2
)


def analysis_cli(*argv) -> int:
    """The analysis commands (aggregate, audit, provenance, ...) as `scalestudy` runs them, in process."""
    import argparse

    from scalestudy.cli import analysis as cli_analysis

    parser = argparse.ArgumentParser(prog="scalestudy")
    cli_analysis.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def planned(spec: RunSpec, experiments: tuple[str, ...], label: str) -> PlannedRun:
    return PlannedRun(spec=spec, experiments=experiments, label=label)


def integrity_seeds(raw_dir: Path, step_times, spec: RunSpec = INTEGRITY_SPEC) -> list[PlannedRun]:
    """One ok run of `spec` a seed (0, 1, ...) with these step times, planned for weak_scaling."""
    runs = []
    for seed, t in enumerate(step_times):
        s = spec.replace(seed=seed)
        write_train_run(raw_dir, s, step_time_s=t)
        runs.append(planned(s, ("weak_scaling",), "FSDP"))
    return runs


# ---- a small study with every kind of figure data ----------------------------------
def _spec(device: str, **kw) -> RunSpec:
    base = dict(model="tiny", seq_len=128, warmup_iters=2, measured_iters=4, device=device)
    base.update(kw)
    return RunSpec(**base)


def rich_specs(device: str = "cuda") -> dict[str, RunSpec]:
    """Named configurations (seed 0) of the rich study."""
    return {
        "fsdp2": _spec(device, nodes=1, procs_per_node=2, micro_batch=2, profile_iters=2, profile_start=1),
        "fsdp4": _spec(device, nodes=2, procs_per_node=2, micro_batch=2, profile_iters=2, profile_start=1),
        "hsdp4": _spec(device, nodes=2, procs_per_node=2, micro_batch=2, dp_replicate=2),
        "fsdp8": _spec(device, nodes=2, procs_per_node=4, micro_batch=2),
        "tp2": _spec(device, nodes=2, procs_per_node=2, micro_batch=2, tp=2, global_batch=8),
        "pp2": _spec(device, nodes=2, procs_per_node=2, micro_batch=2, pp=2, global_batch=8),
        "tp2pp2": _spec(device, nodes=2, procs_per_node=2, micro_batch=2, tp=2, pp=2, global_batch=8),
        "fsdp2_gb8": _spec(device, nodes=1, procs_per_node=2, micro_batch=4),
    }


RICH_PLAN = {
    # name: (experiments, label, seeds, status, step time per seed, power W)
    "fsdp2": (
        ("weak_scaling", "kernel_breakdown", "power", "hardware_generations"),
        "FSDP",
        (0, 1),
        "ok",
        (0.5, 0.52),
        300.0,
    ),
    "fsdp4": (
        ("weak_scaling", "kernel_breakdown", "power", "tp_pp_grid", "strong_scaling"),
        "FSDP",
        (0, 1),
        "ok",
        (0.6, 0.64),
        290.0,
    ),
    "hsdp4": (("weak_scaling",), "HSDP (2 x 2)", (0,), "ok", (0.55,), 295.0),
    "fsdp8": (("weak_scaling",), "FSDP", (0,), "oom", (0.7,), None),
    "tp2": (("tp_pp_grid", "strong_scaling", "power"), "TP=2, FSDP over 2", (0,), "ok", (0.45,), 310.0),
    "pp2": (("tp_pp_grid", "strong_scaling", "power"), "PP=2, FSDP over 2", (0,), "ok", (0.7,), 280.0),
    "tp2pp2": (("tp_pp_grid",), "TP=2 x PP=2", (0,), "oom", (0.5,), None),
    "fsdp2_gb8": (("strong_scaling",), "FSDP", (0,), "ok", (0.9,), 300.0),
}


def build_rich_study(root: Path, device: str = "cuda", name: str = "rich") -> Study:
    """A study with weak scaling (FSDP, HSDP, a failed FSDP), traces, a TP x PP grid with a failed
    cell, strong scaling, power, one hardware kind, no model-size runs, and collectives at one and
    two nodes (two seeds at one node) plus a failed benchmark."""
    raw = Path(root) / "data" / name / "raw"
    specs = rich_specs(device)
    cpu = device == "cpu"
    runs = []
    for key, (experiments, label, seeds, status, times, power) in RICH_PLAN.items():
        for seed, t in zip(seeds, times):
            spec = specs[key].replace(seed=seed)
            write_train_run(
                raw,
                spec,
                status=status,
                step_time_s=t,
                power_w=None if cpu else power,
                device_name=CPU_NAME if cpu else H100,
                peak_source="cpu_matmul_calibration" if cpu else "table",
                trace=(1000.0, 400.0, 100.0 + 50 * spec.nodes) if spec.profile_iters else None,
            )
            runs.append(planned(spec, experiments, label))
    colls = []
    for nodes, seed, status in ((1, 0, "ok"), (1, 1, "ok"), (2, 0, "ok"), (4, 0, "comm_error")):
        cs = CollectivesSpec(
            ops=("all_reduce", "all_gather"),
            min_bytes=1024,
            max_bytes=8192,
            nodes=nodes,
            procs_per_node=2,
            device=device,
            seed=seed,
        )

        def busbw(op, size, n, s):
            peak = 100.0 if op == "all_reduce" else 100.0 / n
            return peak * size / (size + 4096.0) * (1 + 0.01 * s)

        write_collectives_run(raw, cs, busbw, status=status, device_name=CPU_NAME if cpu else H100)
        colls.append(cs)
    return make_study(
        root,
        runs,
        colls,
        name=name,
        hardware="CPU (gloo), synthetic test data" if cpu else "H100 SXM (synthetic test data)",
    )
