"""The collectives benchmark of one run: for each collective and message size, warm up, time,
check the result, and log one `collective` record; it writes the same raw log as a training run.

Measurement as nccl-tests does it: every rank times `iters` back-to-back calls (host clock,
device synchronised once after the last), the time per call is averaged over the ranks (nccl-tests'
default `-a 1`), and the result of one more call on fresh inputs is checked on every rank, the
wrong elements summed over the ranks. Unlike nccl-tests, each size gets its own warm-up calls,
buffers are allocated per size (no offset rotation), and only one placement is timed per
collective: in place for all_reduce (torch's all_reduce has no separate output), out of place
for the others.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import ModuleType

import torch
import torch.distributed as dist

from scalestudy.harness import provenance
from scalestudy.harness.collectives import OPS
from scalestudy.harness.run_start import begin_run
from scalestudy.measure import bandwidth, rawlog
from scalestudy.measure.bandwidth import Message
from scalestudy.spec.collectives import CollectivesSpec

TIME_OVER_RANKS = "mean"  # nccl-tests' default (-a 1); min and max are recorded too
NCCL_TYPE_NAMES = {"float32": "float", "bfloat16": "bfloat16", "float16": "half"}


def plan(spec: CollectivesSpec, nranks: int) -> tuple[list[Message], list[dict]]:
    """The messages to run, and the requested sizes skipped because they round to no element."""
    messages, skipped = [], []
    for op in spec.ops:
        for size in spec.sizes():
            if bandwidth.is_valid_size(op, size, nranks, spec.dtype):
                messages.append(bandwidth.message(op, size, nranks, spec.dtype))
            else:
                skipped.append(
                    {
                        "op": op,
                        "requested_bytes": size,
                        "reason": f"rounds to no element; the smallest valid size is "
                        f"{bandwidth.min_valid_bytes(op, nranks, spec.dtype)} B",
                    }
                )
    return messages, skipped


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(coll: ModuleType, msg: Message, spec: CollectivesSpec, rank: int, device: torch.device) -> dict:
    """Time one collective at one size and check its result; the same answer on every rank."""
    n = msg.nranks
    b = coll.allocate(msg, device)
    coll.fill(b, rank, n)
    for _ in range(spec.warmup_iters):
        coll.call(b)
    _sync(device)
    dist.barrier()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(spec.iters):
        coll.call(b)
    _sync(device)
    per_call = (time.perf_counter() - t0) / spec.iters
    coll.fill(b, rank, n)
    coll.call(b)
    _sync(device)
    wrong = coll.wrong_elements(b, rank, n)
    del b
    mine = torch.tensor([per_call, float(wrong)], dtype=torch.float64, device=device)
    every = torch.empty(2 * n, dtype=torch.float64, device=device)
    (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(every, mine)
    times, wrongs = every.view(n, 2).cpu().unbind(1)
    return {
        "time_s": times.mean().item(),
        "time_s_min_rank": times.min().item(),
        "time_s_max_rank": times.max().item(),
        "wrong_elements": int(wrongs.sum().item()),
    }


def collective_record(
    msg: Message, spec: CollectivesSpec, coll: ModuleType, timing: dict, nccl_algo: str | None
) -> dict:
    factor = bandwidth.busbw_factor(msg.op, msg.nranks, nccl_algo)
    algbw = bandwidth.algbw_GBps(msg.size_bytes, timing["time_s"])
    return {
        "op": msg.op,
        "size_bytes": msg.size_bytes,
        "requested_bytes": msg.requested_bytes,
        "count": msg.count,
        "dtype": msg.dtype,
        "world_size": msg.nranks,
        "nodes": spec.nodes,
        "procs_per_node": spec.procs_per_node,
        "iters": spec.iters,
        "warmup": spec.warmup_iters,
        "in_place": coll.IN_PLACE,
        "time_s": timing["time_s"],
        "time_over_ranks": TIME_OVER_RANKS,
        "time_s_min_rank": timing["time_s_min_rank"],
        "time_s_max_rank": timing["time_s_max_rank"],
        "algbw_GBps": algbw,
        "busbw_GBps": algbw * factor,
        "busbw_factor": factor,
        "wrong_elements": timing["wrong_elements"],
        "correct": timing["wrong_elements"] == 0,
    }


class ProgressTable:
    """Rank 0's table, laid out like nccl-tests' output (one placement, so one set of columns)."""

    def __init__(self, spec: CollectivesSpec, world: int, backend: str):
        self.spec, self.world, self.backend = spec, world, backend
        self.op: str | None = None
        self.busbw: list[float] = []
        self.wrong = 0

    def header(self, op: str) -> None:
        self.end_op()
        self.op = op
        s = self.spec
        print(
            f"# scalestudy collectives: {op}  world {self.world} ({s.nodes} x {s.procs_per_node} processes)  "
            f"backend {self.backend}  warmup iters {s.warmup_iters}  iters {s.iters}  "
            f"time: {TIME_OVER_RANKS} over ranks  {'in place' if OPS[op].IN_PLACE else 'out of place'}\n"
            f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'time':>8}  {'algbw':>7}  {'busbw':>7}"
            f"  {'#wrong':>6}\n"
            f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'(us)':>8}  {'(GB/s)':>7}  {'(GB/s)':>7}"
            f"  {'':>6}",
            flush=True,
        )

    def row(self, rec: dict) -> None:
        us = rec["time_s"] * 1e6
        t = f"{us:8.0f}" if us >= 10000 else f"{us:8.1f}" if us >= 100 else f"{us:8.2f}"
        print(
            f"{rec['size_bytes']:>12}  {rec['count']:>12}  {NCCL_TYPE_NAMES[rec['dtype']]:>8}  "
            f"{OPS[rec['op']].REDOP:>6}  {t}  {rec['algbw_GBps']:7.2f}  {rec['busbw_GBps']:7.2f}  "
            f"{rec['wrong_elements']:>6}",
            flush=True,
        )
        self.busbw.append(rec["busbw_GBps"])
        self.wrong += rec["wrong_elements"]

    def skipped(self, item: dict) -> None:
        print(f"# skipped {item['op']} of {item['requested_bytes']} B: {item['reason']}", flush=True)

    def end_op(self) -> None:
        if self.op is None:
            return
        avg = sum(self.busbw) / len(self.busbw) if self.busbw else float("nan")
        print(
            f"# Out of bounds values : {self.wrong} {'OK' if self.wrong == 0 else 'FAILED'}\n"
            f"# Avg bus bandwidth    : {avg:.4g}\n#",
            flush=True,
        )
        self.op, self.busbw, self.wrong = None, [], 0


def run_collectives(spec: CollectivesSpec, run_dir: Path, *, quiet: bool = False) -> str:
    """Run `spec` in this process (one rank of it) and write its raw log; returns the run's status
    as this rank saw it. Classified failures return; unclassified ones re-raise after logging."""
    run = begin_run(spec, run_dir)
    rank, world, device, log, injector, run_dir = run.rank, run.world, run.device, run.log, run.injector, run.run_dir
    messages, skipped = plan(spec, world)
    nccl_algo = os.environ.get("NCCL_ALGO") if spec.comm_backend == "nccl" else None
    if rank == 0:
        rawlog.atomic_write_json(
            run_dir / rawlog.RUN_FILE,
            {
                "schema": rawlog.SCHEMA,
                "kind": "collectives",
                "run_id": spec.run_id,
                "config_id": spec.config_id,
                **rawlog.identity_from_env(),
                "overrides": rawlog.overrides_from_env(),
                "spec": spec.to_dict(),
                "launch": {"world_size": world, "comm_backend": spec.comm_backend},
                "measurement": {
                    "size_convention": "nccl-tests",
                    "time_over_ranks": TIME_OVER_RANKS,
                    "timer": "host perf_counter around iters back-to-back calls, device synchronised after the last",
                    "warmup": "warmup_iters calls at every size",
                    "nccl_algo": nccl_algo,
                    "in_place": {op: OPS[op].IN_PLACE for op in spec.ops},
                    "skipped": skipped,
                },
                "provenance": provenance.collect(run.facts),
                "start_time_unix": round(time.time(), 3),
            },
        )
    table = ProgressTable(spec, world, spec.comm_backend) if rank == 0 and not quiet else None
    if table:
        for item in skipped:
            table.skipped(item)
    try:
        run.check_world()
        for i, msg in enumerate(messages):
            injector.maybe_fire(i)
            coll = OPS[msg.op]
            if table and msg.op != table.op:
                table.header(msg.op)
            rec = collective_record(msg, spec, coll, measure(coll, msg, spec, rank, device), nccl_algo)
            if rank == 0:
                log.log("collective", rec)
                if table:
                    table.row(rec)
        if table:
            table.end_op()
        dist.barrier()
    except BaseException as e:  # noqa: BLE001 - every failure is recorded, then classified or re-raised
        return run.fail(e, quiet=quiet)
    return run.finish()
