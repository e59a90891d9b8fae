"""Launch one planned run on this host: torchrun in a subprocess under a wall-clock limit, and a
raw log that always ends with status.json.

    python -m torch.distributed.run --nproc_per_node P --nnodes 1 --rdzv-backend c10d \\
        --rdzv-endpoint localhost:0 -m scalestudy train --spec SPEC.json --run-dir DIR --quiet

At the time limit the launcher sends SIGTERM to torchrun, which passes it to its workers; the
harness records `timeout` on every rank that still runs Python. After `grace_s` whatever is left
of the process group is killed. When the processes have ended and no status.json exists (a rank
died without a word, or never got to write one), the launcher finalises the raw log itself with
`rawlog.try_finalize(force=True)`: ranks without a status count as `timeout` if the launcher
stopped the run, `crashed` otherwise.

Exit codes (the workflow's job fails only on 1 and 2):
  0  the run has a status.json with a classified status - ok, oom, timeout, preempted,
     comm_error, invalid_config, or crashed because a process died without writing its
     status (segfault, killed by the host, os._exit): the outcome is data, the DAG goes on.
  1  the harness itself failed: a rank raised an error that it could not classify (status
     crashed with a Python traceback: a bug to fix, not a measurement), or the processes
     ended without ever starting a raw log. The run directory is copied next to raw/ (into
     crashed/) first, since Snakemake deletes the outputs of a failed job.
  2  the launcher could not start the run: unknown run id, invalid spec, a multi-node spec.

Single node only; multi-node runs (srun + torchrun under SLURM) are a later addition.
Pure Python at import time (no torch): the workflow imports it to plan resources.
"""

from __future__ import annotations

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

from scalestudy import rawlog
from scalestudy.collectives_spec import CollectivesSpec
from scalestudy.spec import RunSpec

Spec = Union[RunSpec, CollectivesSpec]

EXIT_CLASSIFIED = 0
EXIT_HARNESS_ERROR = 1
EXIT_USAGE = 2

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
    kept_at: Path | None = None  # where a crashed run's directory was copied


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
    from scalestudy.llama_configs import parameter_counts

    cfg = spec.model_config()
    flops = 6 * parameter_counts(cfg)["n_params"] * spec.tokens_per_step
    step_s = flops / (spec.world_size * _PLANNING_PEAK_FLOPS * _PLANNING_MFU) + 1.0
    trace_s = 120.0 if spec.profile_iters else 0.0
    return 300.0 + 5 * spec.nodes + 2 * steps * step_s + trace_s


def job_resources(spec: Spec, time_limit_s: float | None = None) -> dict:
    """Scheduler resources of one run: Snakemake's local scheduler reads threads, gpus and
    mem_mb; the SLURM executor plugin reads nodes, tasks, runtime (minutes), mem_mb (per node)
    and slurm_extra. One torchrun agent a node starts procs_per_node processes."""
    limit = time_limit_s or default_time_limit_s(spec)
    cuda = spec.device == "cuda"
    per_node = spec.procs_per_node
    extra = f"--ntasks-per-node=1 --gpus-per-node={per_node}" if cuda else "--ntasks-per-node=1"
    return {
        "threads": per_node,
        "nodes": spec.nodes,
        "tasks": spec.nodes,
        "gpus": spec.world_size if cuda else 0,
        "mem_mb": (16384 * per_node if cuda else 1024 + 768 * per_node),
        "runtime": int(math.ceil((limit + 2 * DEFAULT_GRACE_S) / 60)) + 2,
        "slurm_extra": extra,
        "time_limit_s": int(math.ceil(limit)),
    }


def torchrun_command(spec: Spec, spec_file: Path, run_dir: Path, python: str = sys.executable) -> list[str]:
    if isinstance(spec, CollectivesSpec):
        module = ["-m", "scalestudy.commands_collectives"]  # == `scalestudy collectives`
    else:
        module = ["-m", "scalestudy", "train"]
    return [python, "-m", "torch.distributed.run", f"--nproc_per_node={spec.procs_per_node}", "--nnodes=1",
            "--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", *module,
            "--spec", str(spec_file), "--run-dir", str(run_dir), "--quiet"]


# ---- launching ------------------------------------------------------------------------
def launch(spec: Spec, run_dir: Path | str, *, time_limit_s: float | None = None, log_path: Path | str | None = None,
           grace_s: float = DEFAULT_GRACE_S, env: dict | None = None, python: str = sys.executable,
           keep_crashed: bool = True) -> LaunchOutcome:
    """Run `spec` on this host and leave a finished raw log in run_dir (see the module doc)."""
    run_dir = Path(run_dir)
    if spec.nodes != 1:
        raise LaunchError(f"{spec.run_id} needs {spec.nodes} nodes; this launcher starts single-node runs only "
                          "(multi-node runs need the SLURM launcher)")
    if (run_dir / rawlog.STATUS_FILE).exists():
        raise LaunchError(f"{run_dir} already holds a finished run; remove it to run again")
    limit = float(time_limit_s or default_time_limit_s(spec))
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if env.get("OMP_NUM_THREADS", "").isdigit():  # Snakemake sets it to the job's threads: share them out
        env["OMP_NUM_THREADS"] = str(max(1, int(env["OMP_NUM_THREADS"]) // spec.procs_per_node))
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    log: IO[str]
    with tempfile.TemporaryDirectory(prefix="scalestudy-launch-") as tmp, \
            (open(log_path, "w") if log_path is not None else _Stdout()) as log:
        spec_file = Path(tmp) / "spec.json"
        spec_file.write_text(json.dumps(spec.to_dict(), indent=1, sort_keys=True) + "\n")
        cmd = torchrun_command(spec, spec_file, run_dir, python)
        _note(log, f"run {spec.run_id}: {' '.join(cmd)}")
        _note(log, f"wall-clock limit {limit:.0f} s, then SIGTERM and {grace_s:.0f} s grace")
        started = time.monotonic()
        returncode, timed_out, signalled = _supervise(cmd, env, log, limit, grace_s)
        _note(log, f"torchrun ended with exit code {returncode} after {time.monotonic() - started:.1f} s"
                   + (" (stopped at the time limit)" if timed_out else "")
                   + (f" (stopped: the launcher received {signal.Signals(signalled).name})" if signalled else ""))
        outcome = _conclude(spec, run_dir, returncode, timed_out, signalled, limit, keep_crashed)
        _note(log, outcome.message)
    return outcome


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
    """In the child before exec: SIGTERM to torchrun if the launcher dies (Linux), so that a
    launcher killed outright (SIGKILL) leaves no training processes behind in their own session."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


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


def _supervise(cmd: list[str], env: dict, log: IO[str], limit: float, grace_s: float) -> tuple[int, bool, int | None]:
    """Run torchrun in its own session; stop it at `limit` (SIGTERM to torchrun, which passes it
    on to its workers, then SIGKILL to the whole group after grace_s). A SIGTERM or SIGINT sent
    to the launcher (a scheduler's limit, Ctrl-C) is passed on the same way."""
    try:
        out = log.fileno()
    except (AttributeError, OSError, ValueError):  # e.g. a captured sys.stdout
        out = None
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT if out is not None else None, env=env,
                            start_new_session=True, preexec_fn=_die_with_parent)
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
    try:
        while True:
            try:
                proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
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


def _conclude(spec: Spec, run_dir: Path, returncode: int, timed_out: bool, signalled: int | None,
              limit: float, keep_crashed: bool) -> LaunchOutcome:
    world = spec.world_size
    stopped = timed_out or signalled is not None
    if signalled is not None:
        why = f"the launcher received {signal.Signals(signalled).name} (a scheduler's limit or an interrupt)"
    else:
        why = f"the launcher stopped the run at its wall-clock limit of {limit:.0f} s"
    status_path = run_dir / rawlog.STATUS_FILE
    finalized = False
    missing: list[int] = []
    if not status_path.exists():
        started = (run_dir / rawlog.RUN_FILE).exists() or any(run_dir.glob("rank-*.jsonl"))
        if not started and not stopped:
            return LaunchOutcome(spec.run_id, run_dir, None, EXIT_HARNESS_ERROR,
                                 f"{spec.run_id}: torchrun ended (exit code {returncode}) before the harness "
                                 "started a raw log; see the log above", timed_out, returncode, False)
        if not started:  # stopped before the harness got going (e.g. stuck in rendezvous)
            run_dir.mkdir(parents=True, exist_ok=True)
            _write_launcher_run_json(spec, run_dir, limit)
        missing = _missing_ranks(run_dir, world)
        (run_dir / rawlog.LOCK_FILE).unlink(missing_ok=True)  # a finaliser killed half-way
        if stopped:
            reason = f"no status from this rank: {why}"
        else:
            reason = f"the process ended without writing its status (torchrun exit code {returncode})"
        finalized = rawlog.try_finalize(run_dir, world, force=True,
                                        missing_status="timeout" if stopped else "crashed", missing_reason=reason)
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
        return LaunchOutcome(spec.run_id, run_dir, status, EXIT_CLASSIFIED, text, timed_out, returncode, finalized)
    kept = _keep_crashed(run_dir) if keep_crashed else None
    text = (f"{text}. The harness raised an error it could not classify: a bug, not a measurement"
            + (f"; the raw log is kept at {kept}" if kept else "") + _traceback_of(run_dir))
    return LaunchOutcome(spec.run_id, run_dir, status, EXIT_HARNESS_ERROR, text, timed_out, returncode, finalized, kept)


def _write_launcher_run_json(spec: Spec, run_dir: Path, limit: float) -> None:
    kind = "collectives" if isinstance(spec, CollectivesSpec) else "train"
    rawlog.atomic_write_json(run_dir / rawlog.RUN_FILE, {
        "schema": rawlog.SCHEMA, "kind": kind, "run_id": spec.run_id, "config_id": spec.config_id,
        "spec": spec.to_dict(), "launch": {"time_limit_s": limit, "world_size": spec.world_size},
        "provenance": {"written_by": "scalestudy.launch: the harness never started", "command": sys.argv},
        "start_time_unix": round(time.time(), 3),
    })


def _keep_crashed(run_dir: Path) -> Path | None:
    if not run_dir.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%S")
    if run_dir.parent.name == "raw":
        dest = run_dir.parent.parent / "crashed" / f"{run_dir.name}.{stamp}"
    else:
        dest = run_dir.with_name(f"{run_dir.name}.crashed-{stamp}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(run_dir, dest)
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
