"""The start of a run, training or benchmark: joining the process group that torchrun (or srun +
torchrun) set up, and preparing the run directory. Light on imports, so that a benchmark process
need not load the model code."""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from scalestudy.harness import faults, provenance
from scalestudy.measure import portable, rawlog

COMM_TIMEOUT_ENV = "SCALESTUDY_COMM_TIMEOUT_S"


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_distributed(spec) -> tuple[int, int, torch.device]:
    """Join the process group for `spec` (any spec with world_size, procs_per_node, device and
    comm_backend): gloo on CPU, NCCL bound to the local GPU on cuda. A one-process spec may
    also run without a launcher, and so does a fake-communication one (spec `comm: fake`), which
    joins a fake process group as the rank it emulates; its own rank and world are 0 and 1."""
    processes = getattr(spec, "processes", spec.world_size)
    unrunnable = spec.harness_problems() if hasattr(spec, "harness_problems") else []
    if unrunnable:
        raise faults.InvalidConfig("; ".join(f"{f}: {r}" for f, r in unrunnable))
    if "RANK" not in os.environ:
        if processes != 1:
            raise faults.InvalidConfig(
                f"the spec needs {processes} processes: start it with "
                f"torchrun --nproc_per_node {spec.procs_per_node} -m scalestudy ..., or "
                "let scalestudy launch --spec-json SPEC start them"
            )
        os.environ.update(
            RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port())
        )
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if spec.device == "cuda":
        if not torch.cuda.is_available():
            raise faults.InvalidConfig("device 'cuda' was asked for but torch sees no CUDA device")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if spec.comm_backend == "fake":
        from scalestudy.harness.fake_comm import init_fake_process_group  # local: rank shares only; it loads FSDP

        if world != 1:
            raise faults.InvalidConfig(f"a fake-communication run is one process; the launcher started {world}")
        init_fake_process_group(spec)
        return rank, world, device
    timeout = datetime.timedelta(seconds=float(os.environ.get(COMM_TIMEOUT_ENV, 300)))
    kwargs = {"device_id": device} if device.type == "cuda" else {}
    dist.init_process_group(spec.comm_backend, timeout=timeout, **kwargs)
    return rank, world, device


def prepare_run_dir(run_dir: Path) -> None:
    """Refuse a directory that holds a finished run; move an unfinished one aside (kept, not lost)."""
    if (run_dir / rawlog.STATUS_FILE).exists():
        raise FileExistsError(f"{run_dir} already holds a finished run; remove it to run again")
    if run_dir.exists() and any(run_dir.iterdir()):
        aside = run_dir.with_name(f"{run_dir.name}.incomplete-{time.strftime('%Y%m%dT%H%M%S')}")
        shutil.move(str(run_dir), aside)
        print(f"[scalestudy] moved the unfinished run directory aside to {aside}", flush=True)
    run_dir.mkdir(parents=True, exist_ok=True)


@dataclass
class RunContext:
    """One rank's part of a run that has started: its process group, device and raw log."""

    spec: object
    run_dir: Path
    rank: int
    world: int
    device: torch.device
    log: rawlog.RankLog
    injector: faults.FaultInjector
    facts: list[dict]

    def check_world(self) -> None:
        need = getattr(self.spec, "processes", self.spec.world_size)
        if self.world != need:
            raise faults.InvalidConfig(f"the launcher started {self.world} processes but the spec needs {need}")

    def fail(self, e: BaseException, *, quiet: bool) -> str:
        """Record a failure; return its status if classified, re-raise it if not."""
        faults.ignore_sigterm()
        status = faults.classify(e)
        self.log.log("error", {"type": type(e).__name__, "message": str(e)}, traceback=portable.portable_traceback(e))
        step = getattr(e, "step", None)  # diverged, invalid: the step where it happened
        self.log.write_status(status, error=f"{type(e).__name__}: {e}", **({"step": step} if step is not None else {}))
        rawlog.try_finalize(self.run_dir, self.world)
        if status == "crashed":
            raise e
        if self.rank == 0 or not quiet:
            print(f"[scalestudy] rank {self.rank}: run ended with status {status}: {type(e).__name__}: {e}", flush=True)
        _release_gloo_group()
        return status

    def finish(self) -> str:
        faults.ignore_sigterm()
        self.log.write_status("ok")
        rawlog.try_finalize(self.run_dir, self.world)
        dist.destroy_process_group()
        return "ok"


def _release_gloo_group() -> None:
    """Destroy a gloo process group after a failure, while the interpreter is still whole: left to
    the interpreter's exit, a gloo worker thread can still hold a failed collective's tensors, and
    freeing them then aborts the process (std::terminate), turning a classified failure into a
    crash of the launcher. NCCL groups are left alone (destroying one after a communication error
    can block on the peers)."""
    if dist.is_initialized() and dist.get_backend() == "gloo":
        dist.destroy_process_group()


def begin_run(spec, run_dir: Path) -> RunContext:
    """Join the process group, prepare the run directory, open this rank's log and gather every
    rank's host and device facts (for run.json's provenance)."""
    faults.install_sigterm_handler()
    rank, world, device = init_distributed(spec)
    run_dir = Path(run_dir)
    if rank == 0:
        prepare_run_dir(run_dir)
    dist.barrier()
    log = rawlog.RankLog(run_dir, rank, spec.run_id)
    if spec.comm_backend == "fake":  # one process: no peers to ask
        facts = [provenance.local_facts(device)]
    else:
        facts = [None] * world
        dist.all_gather_object(facts, provenance.local_facts(device))
    return RunContext(spec, run_dir, rank, world, device, log, faults.FaultInjector(rank), facts)
