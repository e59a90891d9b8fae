"""Launch one planned run on this host: torchrun in a subprocess under a wall-clock limit, and a
raw log that always ends with status.json.

    python -m torch.distributed.run --nproc_per_node P --nnodes 1 --rdzv-backend c10d \\
        --rdzv-endpoint localhost:0 -m scalestudy train --spec SPEC.json --run-dir DIR --quiet

Inside a SLURM job (SLURM_JOB_ID set) a run of N nodes starts as `srun --nodes N
--ntasks-per-node 1 ... torchrun --nnodes N ... --rdzv-endpoint FIRST_HOST:PORT` (see
scalestudy.launch.slurm); a one-node run that already runs inside a job step (Snakemake's SLURM job
step wraps single-node jobs in `srun -n1`) starts torchrun directly, as above.

At the time limit the launcher sends SIGTERM to torchrun, which passes it to its workers; the
harness records `timeout` on every rank that still runs Python. After `grace_s` whatever is left
of the process group is killed. When the processes have ended and no status.json exists (a rank
died without a word, or never got to write one), the launcher finalises the raw log itself with
`rawlog.try_finalize(force=True)`: ranks without a status count as `timeout` if the launcher
stopped the run, `crashed` otherwise.

When SLURM stops the job (its time limit, a preemption, scancel, a failed node), every process
gets SIGTERM: the ranks record `timeout`, and the launcher asks SLURM why (`scontrol show job`):
a job stopped from outside before its time limit makes the run `preempted`, and status.json
says so in `stopped_by`.

The ranks write into a directory of the attempt (data/STUDY/attempts/RUN_ID.attemptN...), which
the launcher moves to the run directory when the run has ended: the run directory only ever
appears finished, and a job that fails while the run is stopping (Snakemake removes a failed
job's output at once) cannot take the record with it. A run that ends `timeout` or `preempted`
goes to interrupted/ next to raw/ (never read as a result) instead while attempts remain
(--attempt A --max-attempts M): the launcher exits 3 so that the workflow runs it again; the
last attempt exits 0 with the status as data. A run directory that holds such an interrupted
run is moved aside when the run is launched again (SLURM's requeue).

Exit codes (the workflow's job fails only on 1, 2 and 3):
  0  the run has a status.json with a classified status - ok, oom, timeout, preempted,
     comm_error, invalid_config, diverged, invalid, or crashed because a process died without
     writing its status (segfault, killed by the host, os._exit): the outcome is data, the DAG
     goes on.
  1  the harness itself failed: a rank raised an error that it could not classify (status
     crashed with a Python traceback: a bug to fix, not a measurement), or the processes
     ended without ever starting a raw log. The run directory is copied next to raw/ (into
     crashed/) first, since Snakemake deletes the outputs of a failed job.
  2  the launcher could not start the run: unknown run id, invalid spec, a multi-node spec
     outside a SLURM job, an allocation with fewer nodes than the spec.
  3  the run was stopped (timeout, preempted) and attempts remain: run it again.

A finished run found in the run directory when the launch begins (it appeared after the workflow
planned the run: another workflow, a copy) is never deleted: it is moved aside to the sibling
RUN_ID.found-STAMP, named on the console and in the log, and the run is measured again.

Pure Python at import time (no torch): the workflow imports it to plan resources.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Union

from scalestudy.launch import local_workers, run_guard, slurm, warm_workers
from scalestudy.measure import rawlog
from scalestudy.spec.catalog.models import parameter_counts
from scalestudy.spec.collectives import CollectivesSpec
from scalestudy.spec.run import RunSpec
from scalestudy.spec.site import Site

Spec = Union[RunSpec, CollectivesSpec]

EXIT_CLASSIFIED = 0
EXIT_HARNESS_ERROR = 1
EXIT_USAGE = 2
EXIT_RETRY = 3
# statuses of a run stopped from outside or at its limit: rerun while attempts remain
INTERRUPTED = ("timeout", "preempted")

DEFAULT_GRACE_S = 30.0
# The dense bf16 peak used only to size time limits (H100/H200 SXM); MFU 20% is a pessimistic floor.
_PLANNING_PEAK_FLOPS = 989.4e12
_PLANNING_MFU = 0.2


class LaunchError(Exception):
    """The launcher cannot start this run (exit code 2)."""


@dataclass(frozen=True)
class LaunchOutcome:
    run_id: str
    run_dir: Path
    status: str | None  # the run's status from status.json; None if there is none
    exit_code: int
    message: str
    timed_out: bool  # the launcher stopped the run at its time limit
    returncode: int | None  # torchrun's exit code
    finalized_by_launcher: bool  # the launcher wrote status.json (force)
    kept_at: Path | None = None  # where a crashed or interrupted run's directory was copied
    stopped_by: dict | None = None  # what SLURM said when it stopped the job


# The thread-count variables Snakemake sets per job. torch takes the larger of OMP_NUM_THREADS and
# MKL_NUM_THREADS, so sharing out only the first left every process of a multi-process run with all
# of the job's threads (idle OpenMP threads spin, starving the peer ranks a collective waits for).
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def _launcher_name(cmd: list[str]) -> str:
    """What starts the run's processes: torchrun, srun, a module (`python -m scalestudy.launch.warm_workers`)
    or a scalestudy command (`python -m scalestudy workers`)."""
    if "-m" not in cmd:
        return Path(cmd[0]).name
    i = cmd.index("-m") + 1
    return f"scalestudy {cmd[i + 1]}" if cmd[i] == "scalestudy" and len(cmd) > i + 1 else cmd[i]


def share_threads(env: dict, procs_per_node: int) -> None:
    """Divide each thread count set in `env` (the job's, as Snakemake sets them) among the run's
    processes on a node, at least one thread each."""
    for var in THREAD_VARS:
        if env.get(var, "").isdigit():
            env[var] = str(max(1, int(env[var]) // procs_per_node))


# ---- planning -------------------------------------------------------------------------
def default_time_limit_s(spec: Spec) -> float:
    """A generous wall-clock limit for one run, from its spec: start-up plus every iteration at a
    pessimistic speed, twice over. A study's `time_limit_s` or --time-limit-s overrides it."""
    if isinstance(spec, CollectivesSpec):
        moved = sum(spec.sizes()) * len(spec.ops) * (spec.iters + spec.warmup_iters)
        if spec.device == "cpu":
            return 120.0 + moved / 50e6
        return 300.0 + 5 * spec.nodes + 2 * moved / 5e9
    steps = spec.warmup_iters + spec.measured_iters
    if spec.device == "cpu":
        return 120.0 + 10.0 * steps * max(1, spec.world_size // 2)
    cfg = spec.model_config()
    flops = 6 * parameter_counts(cfg)["n_params"] * spec.tokens_per_step
    step_s = flops / (spec.world_size * _PLANNING_PEAK_FLOPS * _PLANNING_MFU) + 1.0
    trace_s = 120.0 if spec.profile_iters else 0.0
    return 300.0 + 5 * spec.nodes + 2 * steps * step_s + trace_s


# A CPU run's processes on one host beyond this many a CPU measure the scheduler, not training: the
# smoke study runs 4 on a 2-core host (2 a CPU); 64 on 2 cores would be refused.
CPU_PROCS_PER_CPU_MAX = 4


def host_problem(spec: Spec, cpus: int | None = None) -> str | None:
    """Why this host cannot run `spec` as planned (None: it can): a CPU run with more processes on
    one host than CPU_PROCS_PER_CPU_MAX a CPU of this host."""
    cpus = cpus or os.cpu_count() or 1
    if spec.device == "cpu" and spec.launch_procs_per_node > CPU_PROCS_PER_CPU_MAX * cpus:
        return (
            f"run {spec.run_id}: procs_per_node {spec.launch_procs_per_node} is more than {CPU_PROCS_PER_CPU_MAX} "
            f"processes a CPU of this host ({cpus} CPUs): its step times would measure the scheduler"
        )
    return None


def job_resources(spec: Spec, time_limit_s: float | None = None, site: Site | None = None) -> dict:
    """Scheduler resources of one run: Snakemake's local scheduler reads threads, gpus and
    mem_mb; the SLURM executor plugin reads nodes, tasks, cpus_per_task, mpi, runtime (minutes),
    mem_mb (per node), slurm_partition, slurm_account, qos, constraint and slurm_extra, which
    scalestudy.launch.slurm.job_resources derives from the spec and the site (slurm/site.yaml; None:
    not set). One torchrun agent a node starts procs_per_node processes."""
    limit = time_limit_s or default_time_limit_s(spec)
    cuda = spec.device == "cuda"
    per_node = spec.launch_procs_per_node
    res = {
        "threads": per_node,
        "gpus": spec.processes if cuda else 0,
        "time_limit_s": int(math.ceil(limit)),
    }
    res.update(
        slurm.job_resources(
            nodes=spec.launch_nodes,
            procs_per_node=per_node,
            cuda=cuda,
            site=site or Site(),
            what=f"run {spec.run_id}",
            runtime_min=int(math.ceil((limit + 2 * DEFAULT_GRACE_S) / 60)) + 2,
            mem_mb=16384 * per_node if cuda else 1024 + 768 * per_node,
        )
    )
    return res


def _module_args(spec: Spec, spec_file: Path, run_dir: Path) -> list[str]:
    """What torchrun's -m runs on every process."""
    if isinstance(spec, CollectivesSpec):
        module = ["scalestudy", "collectives"]
    else:
        module = ["scalestudy", "train"]
    return [*module, "--spec", str(spec_file), "--run-dir", str(run_dir), "--quiet"]


def torchrun_command(spec: Spec, spec_file: Path, run_dir: Path, python: str = sys.executable) -> list[str]:
    return [
        python,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={spec.launch_procs_per_node}",
        "--nnodes=1",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=localhost:0",
        "-m",
        *_module_args(spec, spec_file, run_dir),
    ]


def launch_command(
    spec: Spec,
    spec_file: Path,
    run_dir: Path,
    python: str = sys.executable,
    allocation: slurm.Allocation | None = None,
    site: Site | None = None,
) -> list[str]:
    """torchrun on this host, or inside a SLURM allocation srun + torchrun on its nodes (one-node
    runs already inside a job step start torchrun directly: the step holds the node)."""
    if allocation is None or (allocation.in_step and spec.launch_nodes == 1):
        if spec.launch_nodes != 1:
            raise LaunchError(
                f"{spec.run_id} needs {spec.launch_nodes} nodes; outside a SLURM job this launcher starts "
                "single-node runs only (run the workflow with --profile slurm)"
            )
        choice = (
            local_workers.launcher_choice(spec.device, spec.launch_nodes, os.environ)
            if allocation is None
            else "torchrun"
        )
        if choice == "warm":
            return warm_workers.command(spec.launch_procs_per_node, _module_args(spec, spec_file, run_dir), python)
        if choice == "local":
            return local_workers.command(spec.launch_procs_per_node, _module_args(spec, spec_file, run_dir), python)
        return torchrun_command(spec, spec_file, run_dir, python)
    if len(allocation.hosts) < spec.launch_nodes:
        raise LaunchError(
            f"{spec.run_id} needs {spec.launch_nodes} nodes; SLURM job {allocation.job_id} has "
            f"{len(allocation.hosts)} ({allocation.nodelist})"
        )
    site = site or Site()
    cuda = spec.device == "cuda"
    res = slurm.job_resources(
        nodes=spec.launch_nodes,
        procs_per_node=spec.launch_procs_per_node,
        cuda=cuda,
        runtime_min=0,
        mem_mb=0,
        site=site,
        what=f"run {spec.run_id}",
    )
    return slurm.srun_torchrun_command(
        nodes=spec.launch_nodes,
        procs_per_node=spec.launch_procs_per_node,
        first_host=allocation.first_host,
        job_id=allocation.job_id,
        module_args=_module_args(spec, spec_file, run_dir),
        python=python,
        cpus_per_task=res["cpus_per_task"],
        gpus_per_node=spec.launch_procs_per_node if cuda else None,
        port=slurm.rdzv_port(allocation.job_id, site.rdzv_port),
        overlap=allocation.in_step,
        srun_extra=site.srun_extra,
    )


# ---- launching ------------------------------------------------------------------------
def launch(
    spec: Spec,
    run_dir: Path | str,
    *,
    time_limit_s: float | None = None,
    log_path: Path | str | None = None,
    grace_s: float = DEFAULT_GRACE_S,
    env: dict | None = None,
    python: str = sys.executable,
    keep_crashed: bool = True,
    attempt: int = 1,
    max_attempts: int = 1,
    site: Site | None = None,
    identity: dict | None = None,
) -> LaunchOutcome:
    """Run `spec` on this host, or on the nodes of the SLURM job it runs in, and leave a
    finished raw log in run_dir (see the module doc). `identity` ({"study", "hardware"}: the
    study that planned the run and its hardware line) goes into run.json (rawlog.IDENTITY_ENV)."""
    run_dir = Path(run_dir)
    env = dict(os.environ if env is None else env)
    problem = host_problem(spec)
    if problem:
        raise LaunchError(problem)
    if site is not None and site.lock_dir and not env.get(run_guard.LOCK_DIR_ENV):
        env[run_guard.LOCK_DIR_ENV] = site.lock_dir  # the locks, and the warm servers' sockets, live there
    try:
        run_guard.foreign_cpu_threshold(env)
    except ValueError as e:
        raise LaunchError(str(e)) from None
    if identity is not None:
        env[rawlog.IDENTITY_ENV] = rawlog.identity_env(identity.get("study"), identity.get("hardware"))
    allocation = slurm.current_allocation(env) if slurm.job_id_of(env) else None
    if spec.launch_nodes != 1 and allocation is None:
        raise LaunchError(
            f"{spec.run_id} needs {spec.launch_nodes} nodes; outside a SLURM job this launcher starts "
            "single-node runs only (run the workflow with --profile slurm)"
        )
    who = f"launcher pid {os.getpid()} on {os.uname().nodename} since {time.strftime('%Y-%m-%dT%H:%M:%S')}"
    try:
        with run_guard.run_lock(run_dir, who):
            return _launch_locked(
                spec,
                run_dir,
                env,
                allocation,
                time_limit_s=time_limit_s,
                log_path=log_path,
                grace_s=grace_s,
                python=python,
                keep_crashed=keep_crashed,
                attempt=attempt,
                max_attempts=max_attempts,
                site=site,
            )
    except run_guard.RunLockedError as e:
        raise LaunchError(str(e)) from None


def _launch_locked(
    spec: Spec,
    run_dir: Path,
    env: dict,
    allocation: slurm.Allocation | None,
    *,
    time_limit_s: float | None,
    log_path: Path | str | None,
    grace_s: float,
    python: str,
    keep_crashed: bool,
    attempt: int,
    max_attempts: int,
    site: Site | None,
) -> LaunchOutcome:
    found_note = None
    if (run_dir / rawlog.STATUS_FILE).exists():
        try:
            before = json.loads((run_dir / rawlog.STATUS_FILE).read_text()).get("status")
        except (OSError, ValueError, AttributeError):
            before = "unreadable"
        if before in INTERRUPTED:
            # an interrupted attempt (e.g. SLURM requeued the job after a preemption): kept, replaced
            aside = _keep_copy(run_dir, run_dir, "interrupted", f"replaced.{_stamp()}", move=True)
            print(f"[scalestudy] the run directory held an interrupted run ({before}); moved to {aside}", flush=True)
        else:
            # a finished run that appeared after the workflow planned this one (another workflow, a
            # copy): a measurement is never deleted; it is moved aside to a named sibling, which the
            # aggregation lists as an unplanned run (and the audit as a problem) until someone decides
            aside = _move_found(run_dir)
            found_note = (
                f"{run_dir} already held a finished run (status {before}) when this launch was about to "
                f"measure into it: moved aside to {aside}, kept, not deleted; measuring the run again"
            )
            print(f"[scalestudy] {found_note}", flush=True)
    limit = float(time_limit_s or default_time_limit_s(spec))
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    env.setdefault("PYTHONUNBUFFERED", "1")
    share_threads(env, spec.launch_procs_per_node)
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    log: IO[str]
    # The ranks write into a directory of this attempt (data/STUDY/attempts/...), moved to run_dir
    # when the run has ended: a workflow job that fails while the run is stopping (Snakemake
    # removes a failed job's output at once) cannot take the record with it, and run_dir only
    # ever appears finished.
    stage = _stage_dir(run_dir, attempt, allocation)
    with (
        tempfile.TemporaryDirectory(prefix="scalestudy-launch-") as tmp,
        open(log_path, "a" if attempt > 1 else "w") if log_path is not None else _Stdout() as log,
    ):
        # the spec file must be readable on every node of a multi-node run: on the shared file
        # system next to the run's directory, not in this host's /tmp
        spec_dir = Path(tmp) if allocation is None or spec.launch_nodes == 1 else stage.parent
        spec_file = spec_dir / (f".{stage.name}.spec.json" if spec_dir != Path(tmp) else "spec.json")
        spec_file.parent.mkdir(parents=True, exist_ok=True)
        spec_file.write_text(json.dumps(spec.to_dict(), indent=1, sort_keys=True) + "\n")
        try:
            cmd = launch_command(spec, spec_file, stage, python, allocation, site)
            stage.mkdir(parents=True)
            if allocation is not None:
                _note(
                    log,
                    f"SLURM job {allocation.job_id}, nodes {allocation.nodelist}, attempt {attempt} of "
                    f"{max_attempts}" + (" (inside a job step)" if allocation.in_step else ""),
                )
            if found_note:
                _note(log, found_note)
            _note(log, f"run {spec.run_id}: {' '.join(cmd)}")
            _note(log, f"wall-clock limit {limit:.0f} s, then SIGTERM and {grace_s:.0f} s grace")
            token = run_guard.new_token()
            watch = run_guard.LoadWatch(
                token,
                gpus=tuple(run_guard.gpu_ids(spec.launch_procs_per_node, env)) if spec.device == "cuda" else (),
                cpu_share_max=run_guard.foreign_cpu_threshold(env),
            )
            with run_guard.device_lock(
                run_guard.device_names(spec.device, spec.launch_procs_per_node, env),
                f"{spec.run_id} ({os.getpid()})",
                env,
                on_wait=lambda p, h: _note(log, f"waiting for {p}: held by {h}"),
            ) as held:
                started = time.monotonic()
                returncode, timed_out, signalled, strays = _supervise(
                    cmd, run_guard.guarded_env(env, token), log, limit, grace_s, token, watch
                )
            load = watch.record(held.waited_s, window=measured_window(stage))
            _note(
                log,
                f"{_launcher_name(cmd)} ended with exit code {returncode} after {time.monotonic() - started:.1f} s"
                + (" (stopped at the time limit)" if timed_out else "")
                + (f" (stopped: the launcher received {signal.Signals(signalled).name})" if signalled else "")
                + (f"; killed {len(strays)} leftover process(es) of the run: {strays}" if strays else ""),
            )
            if load["contaminated"]:
                _note(log, f"CONTAMINATED: {load['reason']} (pids {load['other_run_processes']})")
        finally:
            if spec_file.parent != Path(tmp):
                spec_file.unlink(missing_ok=True)
        stop = None
        if signalled is not None and allocation is not None:
            verdict, facts = slurm.why_stopped(allocation.job_id, signal=signalled)
            stop = {"scheduler": "slurm", "job_id": allocation.job_id, "status": verdict, **facts}
            _note(
                log,
                f"SLURM says: {' '.join(f'{k}={v}' for k, v in facts.items()) or 'nothing'}"
                f" -> {verdict or 'no verdict'}",
            )
        try:
            outcome = _conclude(
                spec,
                stage,
                returncode,
                timed_out,
                signalled,
                limit,
                keep_crashed,
                stop,
                allocation,
                final_dir=run_dir,
                identity=rawlog.identity_from_env(env),
            )
            _record_load(stage / rawlog.STATUS_FILE, load)
            compress_gpu_run(spec, stage)
        except (rawlog.RawLogError, OSError) as e:  # e.g. a full disk: say which file, and how much room is left
            message = f"{spec.run_id}: the raw log could not be finished: {e}"
            if not isinstance(e, OSError):
                message += f" ({rawlog.free_space_note(stage)})"
            _note(log, message)
            return LaunchOutcome(spec.run_id, stage, None, EXIT_HARNESS_ERROR, message, timed_out, returncode, False)
        outcome = _place(outcome, stage, run_dir, attempt, max_attempts, stopping=signalled is not None)
        _note(log, outcome.message)
    return outcome


def compress_gpu_run(spec: Spec, run_dir: Path) -> bool:
    """A finished GPU run's metrics gzipped as committed datasets keep them (rawlog.compress_run:
    status.json's checksums are of the content, so the seal holds). CPU runs are regenerated, never
    committed, and stay plain text."""
    if spec.device != "cuda" or not (run_dir / rawlog.STATUS_FILE).exists():
        return False
    rawlog.compress_run(run_dir)
    return True


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%S")


FOUND_SUFFIX = ".found-"


def _free_path(dest: Path) -> Path:
    """dest, or dest~N (N = 2, 3, ...) where dest is taken: a kept copy never overwrites another."""
    base, n = dest.name, 1
    while dest.exists():
        n += 1
        dest = dest.with_name(f"{base}~{n}")
    return dest


def _move_found(run_dir: Path) -> Path:
    """Move a finished run found at run_dir to its sibling RUN_ID.found-STAMP (~N if taken)."""
    dest = _free_path(run_dir.with_name(f"{run_dir.name}{FOUND_SUFFIX}{_stamp()}"))
    os.replace(run_dir, dest)
    return dest


def _stage_dir(run_dir: Path, attempt: int, allocation: slurm.Allocation | None) -> Path:
    """Where this attempt's ranks write: data/STUDY/attempts/RUN_ID.attemptN.jobJ.STAMP for a run
    under raw/, else a hidden sibling of run_dir."""
    who = f"job{allocation.job_id}" if allocation is not None else f"pid{os.getpid()}"
    name = f"{run_dir.name}.attempt{attempt}.{who}.{_stamp()}"
    stage = (
        (run_dir.parent.parent / "attempts" / name) if run_dir.parent.name == "raw" else run_dir.with_name(f".{name}")
    )
    n = 1
    while stage.exists():
        n += 1
        stage = stage.with_name(f"{name}~{n}")
    return stage


def _place(
    outcome: LaunchOutcome, stage: Path, run_dir: Path, attempt: int, max_attempts: int, stopping: bool
) -> LaunchOutcome:
    """Move the finished attempt to run_dir. An interrupted run (timeout, preempted) goes to
    interrupted/ instead, where it is never read as a result, while attempts remain: the launcher
    exits EXIT_RETRY and the workflow runs it again. A job that SLURM is stopping fails whatever
    the exit code says (the workflow removes run_dir and retries it): its run is copied to
    interrupted/ too."""
    interrupted = outcome.exit_code == EXIT_CLASSIFIED and outcome.status in INTERRUPTED
    retry = interrupted and attempt < max_attempts
    kept, text = outcome.kept_at, outcome.message
    if interrupted and (retry or stopping):
        kept = _keep_copy(stage, run_dir, "interrupted", f"attempt{attempt}.{_stamp()}", move=retry)
        text += f"; kept at {kept}" if kept else ""
    if retry:
        text += f"; attempt {attempt} of {max_attempts}: the workflow runs it again"
    elif stage.exists():
        if any(stage.iterdir()):
            if run_dir.exists():  # something appeared meanwhile: keep it, never overwrite
                if any(run_dir.iterdir()):
                    _keep_copy(run_dir, run_dir, "interrupted", f"displaced.{_stamp()}", move=True)
                else:
                    run_dir.rmdir()
            os.replace(stage, run_dir)
        else:
            stage.rmdir()
    if stage.parent.name == "attempts":
        try:
            stage.parent.rmdir()  # when no other attempt is in flight
        except OSError:
            pass
    return dataclasses.replace(
        outcome, run_dir=run_dir, exit_code=EXIT_RETRY if retry else outcome.exit_code, message=text, kept_at=kept
    )


class _Stdout:
    def __enter__(self):
        return sys.stdout

    def __exit__(self, *exc):
        sys.stdout.flush()
        return False


def _note(log: IO[str], text: str) -> None:
    log.write(f"[scalestudy launch {time.strftime('%H:%M:%S')}] {text}\n")
    log.flush()


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM to torchrun if the launcher dies (Linux). The workers,
    in sessions of their own, watch the launcher themselves (run_guard.guard_worker)."""
    run_guard.die_with_parent(signal.SIGTERM)


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _supervise(
    cmd: list[str],
    env: dict,
    log: IO[str],
    limit: float,
    grace_s: float,
    token: str,
    watch: run_guard.LoadWatch | None = None,
) -> tuple[int, bool, int | None, list[int]]:
    """Run torchrun in its own session; stop it at `limit` (SIGTERM to torchrun, which passes it
    on to its workers, then SIGKILL to the whole group after grace_s). A SIGTERM or SIGINT sent
    to the launcher (a scheduler's limit, Ctrl-C) is passed on the same way. On every way out,
    every process carrying the run's token is killed (torchrun's workers run in sessions of their
    own: killing its group misses them); returns their pids as the last item."""
    try:
        out = log.fileno()
    except (AttributeError, OSError, ValueError):  # e.g. a captured sys.stdout
        out = None
    proc = subprocess.Popen(
        cmd,
        stdout=out,
        stderr=subprocess.STDOUT if out is not None else None,
        env=env,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    try:
        returncode, timed_out, signalled = _wait(proc, limit, grace_s, watch)
        if watch is not None:  # a last sample after the run: the measured steps lie between two
            watch.sample()
    finally:
        strays = run_guard.end_processes(token)
    return returncode, timed_out, signalled, strays


def _wait(
    proc: subprocess.Popen, limit: float, grace_s: float, watch: run_guard.LoadWatch | None
) -> tuple[int, bool, int | None]:
    pgid = proc.pid
    received: list[int] = []

    def _forward(signum, _frame):
        received.append(signum)

    previous = {}
    for s in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[s] = signal.signal(s, _forward)
        except ValueError:  # not the main thread: no forwarding
            pass
    deadline = time.monotonic() + limit
    stop_sent_at: float | None = None
    timed_out = False
    next_sample = 0.0
    try:
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if watch is not None and now >= next_sample:
                watch.sample()
                next_sample = now + 1.0
            if stop_sent_at is None and (now >= deadline or received):
                timed_out = not received
                proc.send_signal(signal.SIGTERM)
                stop_sent_at = now
            elif stop_sent_at is not None and now - stop_sent_at > grace_s:
                _kill_group(pgid)
        # torchrun has ended; give stragglers of its group (if any) a moment, then kill them
        wait_until = time.monotonic() + (grace_s if stop_sent_at is not None else 5.0)
        while _alive(pgid) and time.monotonic() < wait_until:
            time.sleep(0.2)
        _kill_group(pgid)
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    return proc.returncode, timed_out, (received[0] if received else None)


def _missing_ranks(run_dir: Path, world: int) -> list[int]:
    return [r for r in range(world) if not (run_dir / rawlog.rank_status_file(r)).exists()]


def _conclude(
    spec: Spec,
    run_dir: Path,
    returncode: int,
    timed_out: bool,
    signalled: int | None,
    limit: float,
    keep_crashed: bool,
    stop: dict | None = None,
    allocation: slurm.Allocation | None = None,
    final_dir: Path | None = None,
    identity: dict | None = None,
) -> LaunchOutcome:
    """The outcome of the run written in run_dir (this attempt's directory); copies of it go
    where final_dir's would (crashed/ next to raw/)."""
    final_dir = final_dir or run_dir
    world = spec.processes
    stopped = timed_out or signalled is not None
    verdict = (stop or {}).get("status")
    if verdict == "preempted":
        why = f"SLURM stopped job {stop['job_id']} before its time limit (preemption, scancel or a failed node)"
    elif verdict == "timeout":
        why = f"SLURM stopped job {stop['job_id']} at its time limit"
    elif signalled is not None:
        why = f"the launcher received {signal.Signals(signalled).name} (a scheduler's limit or an interrupt)"
    else:
        why = f"the launcher stopped the run at its wall-clock limit of {limit:.0f} s"
    status_path = run_dir / rawlog.STATUS_FILE
    finalized = False
    missing: list[int] = []
    if not status_path.exists():
        started = (run_dir / rawlog.RUN_FILE).exists() or any(run_dir.glob("rank-*.jsonl"))
        if not started and not stopped:
            return LaunchOutcome(
                spec.run_id,
                run_dir,
                None,
                EXIT_HARNESS_ERROR,
                f"{spec.run_id}: the run's launcher ended (exit code {returncode}) before the harness "
                "started a raw log; see the log above",
                timed_out,
                returncode,
                False,
            )
        if not started:  # stopped before the harness got going (e.g. stuck in rendezvous)
            run_dir.mkdir(parents=True, exist_ok=True)
            _write_launcher_run_json(spec, run_dir, limit, allocation, identity)
        missing = _missing_ranks(run_dir, world)
        (run_dir / rawlog.LOCK_FILE).unlink(missing_ok=True)  # a finaliser killed half-way
        if stopped:
            reason = f"no status from this rank: {why}"
        else:
            reason = f"the process ended without writing its status (torchrun exit code {returncode})"
        finalized = rawlog.try_finalize(
            run_dir,
            world,
            force=True,
            missing_status=(verdict or "timeout") if stopped else "crashed",
            missing_reason=reason,
        )
    if stop is not None:
        _record_scheduler_stop(status_path, stop, why)
    final = json.loads(status_path.read_text())
    status = final["status"]
    culprits = final.get("culprit_ranks", [])
    harness_error = status == "crashed" and not (culprits and set(culprits) <= set(missing))
    text = f"{spec.run_id}: {status}"
    if final.get("error"):
        text += f" ({final['error']})"
    if finalized:
        text += "; status.json written by the launcher"
    if not harness_error:
        return LaunchOutcome(
            spec.run_id, run_dir, status, EXIT_CLASSIFIED, text, timed_out, returncode, finalized, stopped_by=stop
        )
    kept = _keep_copy(run_dir, final_dir, "crashed", _stamp()) if keep_crashed else None
    text = (
        f"{text}. The harness raised an error it could not classify: a bug, not a measurement"
        + (f"; the raw log is kept at {kept}" if kept else "")
        + _traceback_of(run_dir)
    )
    return LaunchOutcome(
        spec.run_id, run_dir, status, EXIT_HARNESS_ERROR, text, timed_out, returncode, finalized, kept, stopped_by=stop
    )


def _record_scheduler_stop(status_path: Path, stop: dict, why: str) -> None:
    """Say in status.json what SLURM said when it stopped the job. The ranks took SLURM's SIGTERM
    for a time limit (`timeout`); when SLURM says the job was taken away before its limit, the
    run is `preempted` (the ranks' own records stay as they wrote them)."""
    final = json.loads(status_path.read_text())
    final["stopped_by"] = stop
    if stop.get("status") == "preempted" and final["status"] == "timeout":
        final["status"] = "preempted"
        final["error"] = f"{why}; the ranks recorded: {final.get('error')}"
        final["culprit_ranks"] = []
    rawlog.write_status(status_path, final)


def measured_window(run_dir: Path) -> tuple[float, float] | None:
    """(start, end) in time_unix of a run's measured steps, from its iteration records (merged
    metrics.jsonl, else the ranks' files): each record is written at its step's end. None: no
    measured step."""
    files = (
        [run_dir / rawlog.METRICS_FILE]
        if (run_dir / rawlog.METRICS_FILE).exists()
        else sorted(run_dir.glob("rank-*.jsonl"))
    )
    start = end = None
    for f in files:
        try:
            lines = f.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if '"measured"' not in line:
                continue
            try:
                rec = json.loads(line)
                v, t = rec["value"], float(rec["metadata"]["time_unix"])
                if rec.get("key") != "iteration" or v.get("phase") != "measured":
                    continue
                t0 = t - max(0.0, float(v.get("step_time_s") or 0.0))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            start = t0 if start is None else min(start, t0)
            end = t if end is None else max(end, t)
    return None if start is None else (start, end)


def _record_load(status_path: Path, load: dict) -> None:
    """Say in status.json what else ran on the host while the run measured (run_guard.LoadWatch):
    `load.contaminated` is true when processes of another run of the package were seen."""
    if not status_path.exists():
        return
    final = json.loads(status_path.read_text())
    final["load"] = load
    rawlog.write_status(status_path, final)


def _write_launcher_run_json(
    spec: Spec, run_dir: Path, limit: float, allocation: slurm.Allocation | None = None, identity: dict | None = None
) -> None:
    kind = "collectives" if isinstance(spec, CollectivesSpec) else "train"
    provenance = {"written_by": "scalestudy.launch.launcher: the harness never started", "command": sys.argv}
    if allocation is not None:
        provenance["slurm"] = {
            "job_id": allocation.job_id,
            "nodelist": allocation.nodelist,
            "nnodes": str(len(allocation.hosts)),
        }
    rawlog.atomic_write_json(
        run_dir / rawlog.RUN_FILE,
        {
            "schema": rawlog.SCHEMA,
            "kind": kind,
            "run_id": spec.run_id,
            "config_id": spec.config_id,
            **(identity or rawlog.identity_from_env({})),
            "overrides": rawlog.overrides_from_env(),
            "spec": spec.to_dict(),
            "launch": {"time_limit_s": limit, "world_size": spec.world_size},
            "provenance": provenance,
            "start_time_unix": round(time.time(), 3),
        },
    )


def _keep_copy(src: Path, run_dir: Path, kind: str, suffix: str, move: bool = False) -> Path | None:
    """Copy (or move) src to where run_dir's `kind` copies live: data/STUDY/KIND/RUN_ID.SUFFIX
    for a run under raw/ (crashed/, interrupted/: never read as results), else a sibling
    RUN_DIR.KIND-SUFFIX."""
    if not src.exists():
        return None
    if run_dir.parent.name == "raw":
        dest = run_dir.parent.parent / kind / f"{run_dir.name}.{suffix}"
    else:
        dest = run_dir.with_name(f"{run_dir.name}.{kind}-{suffix}")
    dest = _free_path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if move:
        os.replace(src, dest)
    else:
        shutil.copytree(src, dest)
    return dest


def _traceback_of(run_dir: Path) -> str:
    metrics = run_dir / rawlog.METRICS_FILE
    if not metrics.exists():
        return ""
    for line in metrics.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("key") == "error" and rec.get("metadata", {}).get("traceback"):
            return f"\nrank {rec['metadata'].get('rank')}:\n{rec['metadata']['traceback'].rstrip()}"
    return ""
