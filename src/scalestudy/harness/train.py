"""The training loop of one run: warm-up then measured iterations, writing the raw log. The
backend (harness.backend: torch or megatron-core) makes each step; the measurement hooks
(harness.hooks) time, record and trace them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

from scalestudy.harness import faults, optimisations, provenance
from scalestudy.harness.backend import build_backend
from scalestudy.harness.cpu_peak import calibrate_cpu_peak
from scalestudy.harness.fake_comm import cap_device_memory, start_record
from scalestudy.harness.hooks import MeasurementHooks, sync
from scalestudy.harness.metrics_sink import SinkUnavailable, open_sink, resolve
from scalestudy.harness.metrics_sink import check as check_sink
from scalestudy.harness.parallel_dims import ParallelDims
from scalestudy.harness.progress import memory_bytes, summary_line
from scalestudy.harness.run_start import begin_run
from scalestudy.measure import metrics, rawlog
from scalestudy.measure.metrics import device_peak_record, flops_per_token
from scalestudy.spec.catalog import peak_flops
from scalestudy.spec.catalog.gpus import UnknownDeviceError
from scalestudy.spec.memory_estimate import estimate_memory
from scalestudy.spec.run import RunSpec


def device_peak(spec: RunSpec, device: torch.device, user_peak_tflops: float | None, shared: bool = False) -> dict:
    """The `device_peak` record: the datasheet peak of this GPU, the user's, or on CPU a
    matrix-product calibration made now - by rank 0 alone while the others wait when `shared`
    (the processes of a run on one host share its cores: calibrating side by side they would
    measure each other, and pay it once a process). An unknown GPU gets no peak (and so no
    MFU), never a guess."""
    dtype = spec.precision
    user = user_peak_tflops * 1e12 if user_peak_tflops else None
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        try:
            return device_peak_record(peak_flops(name, dtype, user))
        except UnknownDeviceError as e:
            return {"device_name": name, "dtype": dtype, "peak_flops_per_s": None, "source": None, "reason": str(e)}
    if user:
        return device_peak_record(peak_flops("cpu", dtype, user))
    if not shared:
        return calibrate_cpu_peak(torch.float32 if dtype == "fp32" else torch.bfloat16)
    rec = [calibrate_cpu_peak(torch.float32 if dtype == "fp32" else torch.bfloat16) if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(rec, src=0)
    return {**rec[0], "detail": {**rec[0]["detail"], "measured_by_rank": 0}}


# set by `scalestudy launch` for the workers it starts (scalestudy.launch.run_guard.LAUNCHER_PID_ENV): the
# launcher prints the run's summary line once the run has ended (its final status and directory)
LAUNCHER_PID_ENV = "SCALESTUDY_LAUNCHER_PID"


def summary_numbers(
    spec: RunSpec,
    world: int,
    device: torch.device,
    step_times: list[float],
    memory: dict,
    peak: dict,
    flops_per_token_: float,
) -> dict:
    """The summary line's numbers, by the tables' rule (scalestudy.analysis.run_table): tokens/s
    over the measured steps, each step timed on its slowest rank (metrics.throughput of the same
    step times the raw log records), MFU against the ranks' mean peak, the largest peak memory.
    Every rank calls it (two small all-reduces); rank 0's answer is the one to print."""
    mem = memory_bytes(memory)
    t = torch.tensor([*step_times, -1.0 if mem is None else float(mem)], dtype=torch.float64, device=device)
    p = torch.tensor(
        [float(peak.get("peak_flops_per_s") or 0.0), 1.0 if peak.get("peak_flops_per_s") else 0.0],
        dtype=torch.float64,
        device=device,
    )
    if world > 1 and spec.comm_backend != "fake":
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        dist.all_reduce(p)
    values = t.tolist()
    out: dict = {"peak_memory_bytes": int(values[-1]) if values[-1] >= 0 else None}
    records = [
        {
            "value": {
                "step": spec.warmup_iters + i,
                "phase": "measured",
                "step_time_s": v,
                "tokens": spec.tokens_per_step,
            }
        }
        for i, v in enumerate(values[:-1])
    ]
    try:
        out["throughput"] = metrics.throughput(records, spec.world_size)
    except ValueError:  # no measured step
        return out
    peak_mean = p[0].item() / p[1].item() if p[1].item() else None
    if peak_mean is None:
        out["no_mfu"] = f"no device peak: {peak.get('reason') or 'none recorded'}"
        return out
    try:
        out["mfu"] = metrics.mfu(out["throughput"]["tokens_per_s_per_device"], flops_per_token_, peak_mean)
    except ValueError as e:  # MFUError
        out["no_mfu"] = str(e)
    return out


def run_record(
    spec: RunSpec,
    run,
    *,
    time_limit_s,
    peak_tflops,
    power_period_s: float,
    sink: dict,
    fake_comm: dict | None,
    memory_cap: dict | None,
) -> dict:
    """run.json of a training run: what was asked (spec, layout, launch settings), the memory
    estimate, the machine (provenance), and for a rank share what it stands in for."""
    return {
        "schema": rawlog.SCHEMA,
        "kind": "train",
        "run_id": spec.run_id,
        "config_id": spec.config_id,
        **rawlog.identity_from_env(),
        "overrides": rawlog.overrides_from_env(),
        "spec": spec.to_dict(),
        "layout": spec.layout,
        "memory_estimate": estimate_memory(spec).as_dict(),
        "launch": {
            "time_limit_s": time_limit_s,
            "world_size": run.world,
            "comm_backend": spec.comm_backend,
            "peak_tflops": peak_tflops,
            "power": spec.power_sampling,  # the spec's power_sampling (readers of earlier runs look here)
            "power_period_s": power_period_s,
            **({"metrics_sink": sink} if sink["kind"] != "none" else {}),
        },
        "provenance": provenance.collect(run.facts),
        "start_time_unix": round(time.time(), 3),
        **({"rank_share": fake_comm} if fake_comm else {}),
        **({"memory_cap": memory_cap} if memory_cap else {}),
    }


def train(
    spec: RunSpec,
    run_dir: Path,
    *,
    time_limit_s: float | None = None,
    quiet: bool = False,
    peak_tflops: float | None = None,
    power_period_s: float = 0.1,
    progress_every: int | None = None,
    metrics_sink: str | dict | None = "none",
) -> str:
    """Run `spec` in this process (one rank of it) and write its raw log; returns the run's status
    as this rank saw it. Classified failures return; unclassified ones re-raise after logging.
    Rank 0 prints a progress line every `progress_every` steps (None: about ten a run; 0: none)
    and the run's summary line at the end (left to `scalestudy launch` when it started the run),
    and mirrors each step's numbers to `metrics_sink` (tensorboard, wandb, or a sink config; "none":
    the one `scalestudy launch` passes from the study, if any: harness.metrics_sink)."""
    started = time.monotonic()
    sink = resolve(metrics_sink)
    try:  # before the run starts: a sink whose package is missing is one sentence, not a failed run
        check_sink(sink)
    except SinkUnavailable as e:
        raise faults.InvalidConfig(str(e)) from None
    optimisations.apply_allocator_setting()
    run = begin_run(spec, run_dir)
    fake_comm, refused = _record_run(spec, run, time_limit_s, peak_tflops, power_period_s, sink)
    hooks = MeasurementHooks(spec, run.run_dir, run.rank, run.device, run.log, power_period_s=power_period_s)
    try:
        if refused is not None:
            raise refused
        numbers = _steps(spec, run, hooks, started, time_limit_s, peak_tflops, progress_every, sink, fake_comm)
    except BaseException as e:  # noqa: BLE001 - every failure is recorded, then classified or re-raised
        hooks.abort()
        return run.fail(e, quiet=quiet)
    finally:
        hooks.close()
    status = run.finish()
    if run.rank == 0 and LAUNCHER_PID_ENV not in os.environ:
        elapsed_s = time.monotonic() - started
        line = summary_line(
            spec.run_id, status, run.run_dir, **numbers, rank_share=hooks.progress.rank_share, elapsed_s=elapsed_s
        )
        print(line, flush=True)
    return status


def _record_run(spec: RunSpec, run, time_limit_s, peak_tflops, power_period_s, sink):
    """Start the fake process group's record and cap the GPU's memory where the spec asks, and write
    run.json (rank 0). Returns the fake-communication record (or None) and the refusal of a memory cap
    above this GPU's (or None): the run is then invalid_config, its run.json written."""
    fake_comm = memory_cap = refused = None
    if spec.device == "cuda":
        try:
            memory_cap = cap_device_memory(spec, run.device)
        except faults.InvalidConfig as e:
            refused = e
    if spec.comm == "fake":
        fake_comm = start_record(spec, run.device)
    if run.rank == 0:
        record = run_record(
            spec,
            run,
            time_limit_s=time_limit_s,
            peak_tflops=peak_tflops,
            power_period_s=power_period_s,
            sink=sink,
            fake_comm=fake_comm,
            memory_cap=memory_cap,
        )
        rawlog.atomic_write_json(run.run_dir / rawlog.RUN_FILE, record)
    return fake_comm, refused


def _steps(spec: RunSpec, run, hooks, started, time_limit_s, peak_tflops, progress_every, sink, fake_comm) -> dict:
    """Build the backend, then warm-up and measured steps under the hooks; the run's summary numbers."""
    rank, world, device, log, injector = run.rank, run.world, run.device, run.log, run.injector
    run.check_world()
    torch.manual_seed(spec.seed)
    dims = ParallelDims.from_spec(spec, dist.get_world_size())  # the emulated world under fake comm
    trainer = build_backend(spec, dims, device, log)
    one_host = len({f["host"] for f in run.facts}) == 1
    peak = device_peak(spec, device, peak_tflops, shared=world > 1 and spec.comm_backend != "fake" and one_host)
    log.log("device_peak", peak)
    flops = flops_per_token(trainer.cfg, spec.seq_len)
    if rank == 0:
        log.log("flops", flops)
    total_iters = spec.warmup_iters + spec.measured_iters
    hooks.open(
        world,
        progress_every,
        flops["flops_per_token"],
        peak.get("peak_flops_per_s"),
        open_sink(sink, run.run_dir, spec.run_id, spec.to_dict()) if rank == 0 else None,
        fake_comm["label"] if fake_comm else None,
    )
    if rank == 0:
        print(
            f"[scalestudy] run {spec.run_id}: {spec.layout} on {world} process{'es' if world > 1 else ''}, {total_iters} steps "
            f"({spec.warmup_iters} warm-up); raw log {run.run_dir}",
            flush=True,
        )
    # under fake communication no data moves between ranks: the loss is not a training loss
    vocab_size = getattr(trainer.cfg, "vocab_size", None)
    memory = None
    for step in range(total_iters):
        hooks.before(step)
        if time_limit_s is not None and time.monotonic() - started > time_limit_s:
            raise faults.RunTimeout(f"time limit of {time_limit_s} s reached before step {step}")
        injector.maybe_fire(step)
        sync(device)
        t0 = time.perf_counter()
        local = trainer.step(step)
        sync(device)
        dt = injector.step_time(step, time.perf_counter() - t0)
        loss = injector.loss(step, trainer.global_loss(local))
        # the run proves it trained: a non-finite loss or one out of its band is `diverged`, a
        # step time <= 0 `invalid`, with this step (the loss is global: every rank stops here)
        faults.check_step(step, None if spec.comm == "fake" else loss, dt, vocab_size)
        memory = hooks.step(step, dt, loss)
    hooks.finish(lambda i: trainer.step(total_iters + i))
    numbers = summary_numbers(spec, world, device, hooks.measured_times, memory, peak, flops["flops_per_token"])
    dist.barrier()
    return numbers
