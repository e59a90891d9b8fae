"""SLURM: the job resources of a run (with the site settings of scalestudy.spec.site), its multi-node launch line, and why a
run that SLURM stopped was stopped.

A run of N nodes x G processes is one SLURM job: `--nodes N`, one task a node, G GPUs a node.
The launcher (scalestudy.launch.launcher), running inside that job, starts on every node one torchrun
agent, which starts G processes; the agents meet in a c10d rendezvous on the first host of the
allocation:

    srun --nodes=N --ntasks=N --ntasks-per-node=1 --cpus-per-task=C [--gpus-per-node=G] \\
        --kill-on-bad-exit=0 PYTHON -m torch.distributed.run --nnodes=N --nproc_per_node=G \\
        --rdzv-backend=c10d --rdzv-endpoint=FIRST_HOST:PORT --rdzv-id=JOB_ID --max-restarts=0 \\
        -m scalestudy train --spec SPEC --run-dir DIR --quiet

FIRST_HOST is the first name of `scontrol show hostnames $SLURM_JOB_NODELIST`. PORT is the
site's `rdzv_port` plus the job id modulo 1000, so that two jobs sharing a host do not collide.

A run that SLURM stops (its time limit, a preemption, scancel, a node failure) gets SIGTERM on
every process; the launcher asks SLURM why (`scontrol show job`) and the run's raw log says
`timeout` (the job reached its time limit) or `preempted` (it was taken away from outside).

Site settings (partition, account, GPUs per node, time limits, constraint, ...) live in one
file, slurm/site.yaml next to the Snakemake profile slurm/config.yaml; SCALESTUDY_SLURM_SITE
names another.

Pure Python (no torch); `scontrol` is called only by the functions that say so.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

from scalestudy.spec.site import DEFAULT_RDZV_PORT, Site, SiteError

RDZV_PORT_SPAN = 1000


def job_resources(
    *, nodes: int, procs_per_node: int, cuda: bool, runtime_min: int, mem_mb: int, site: Site, what: str = "the run"
) -> dict:
    """The SLURM executor plugin's resources of one run's job (None: not set). A run of more
    than one node is an `mpi` job for the plugin: its job step does not wrap the command in
    `srun -n1`, and the launcher's own srun starts one torchrun agent a node."""
    if cuda and site.gpus_per_node is not None and procs_per_node > site.gpus_per_node:
        raise SiteError(
            f"{what} needs {procs_per_node} GPUs a node; the site's nodes have {site.gpus_per_node} "
            f"(gpus_per_node in {site.source})"
        )
    runtime = max(int(runtime_min), site.min_runtime_min)
    if site.max_runtime_min is not None and runtime > site.max_runtime_min:
        raise SiteError(
            f"{what} needs a time limit of {runtime} min; the site allows {site.max_runtime_min} "
            f"(max_runtime_min in {site.source}): shorten the run or raise the limit"
        )
    extra = ["--ntasks-per-node=1"]
    if cuda:
        extra.append(f"--gpus-per-node={procs_per_node}")
    if site.exclusive:
        extra.append("--exclusive")
    if site.slurm_extra:
        extra.append(site.slurm_extra)
    cpus = procs_per_node * (site.cpus_per_gpu or 1) if cuda else procs_per_node
    return {
        "nodes": nodes,
        "tasks": nodes,
        "cpus_per_task": cpus,
        "mpi": "srun" if nodes > 1 else None,
        "mem_mb": site.mem_mb_per_node if site.mem_mb_per_node is not None else mem_mb,
        "runtime": runtime,
        "slurm_partition": site.partition,
        "slurm_account": site.account,
        "qos": site.qos,
        "constraint": site.constraint,
        "slurm_extra": " ".join(extra),
    }


def submit_problem(site: Site, *, which=shutil.which) -> str | None:
    """What stops `snakemake --profile slurm` from submitting from this host, in one sentence with
    the fix; None when nothing does. The SLURM executor plugin runs sbatch and squeue, guesses a
    job account with sacct when the site names none, and checks an account with sacctmgr: a
    missing tool fails every submission (FileNotFoundError, retried) instead of saying so."""
    if which("sbatch") is None:
        return (
            "SLURM's sbatch is not on this host's PATH: run the workflow on the cluster's login node, "
            "or without --profile slurm to run locally"
        )
    where = site.source if site.source != "defaults" else "slurm/site.yaml"
    need = ["sacct"] if site.account is None else []
    need += ["sacctmgr"]
    missing = [t for t in need if which(t) is None]
    if missing:
        why = (
            "guesses the job account with sacct (no account in " + where + ") and checks it with sacctmgr"
            if site.account is None
            else f"checks the account {site.account!r} (from {where}) with sacctmgr"
        )
        return (
            f"SLURM's accounting commands ({', '.join(missing)}) are not on this host's PATH, and the SLURM "
            f"executor plugin {why}: install SLURM's client tools here (e.g. Debian's slurm-client; they work "
            "without an accounting database, asking slurmctld), or submit from a host that has them"
        )
    return None


# ---- the allocation -------------------------------------------------------------------
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _split_top(expr: str) -> list[str]:
    """Split a hostlist at the commas outside brackets."""
    out, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {expr!r}")
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in hostlist {expr!r}")
    out.append("".join(cur))
    return [s for s in (s.strip() for s in out) if s]


def _expand_one(name: str) -> list[str]:
    m = re.search(r"\[([^\[\]]*)\]", name)
    if not m:
        return [name]
    head, tail = name[: m.start()], name[m.end() :]
    items = []
    for part in m.group(1).split(","):
        r = _RANGE.match(part.strip())
        if not r:
            raise ValueError(f"bad range {part!r} in hostlist {name!r}")
        lo, hi = r.group(1), r.group(2) or r.group(1)
        if int(hi) < int(lo):
            raise ValueError(f"descending range {part!r} in hostlist {name!r}")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        items.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return [h for i in items for h in _expand_one(head + i + tail)]


def expand_hostlist(expr: str) -> list[str]:
    """A SLURM hostlist expression as host names, in order, as `scontrol show hostnames` gives
    them: "gpu[001-003,010],login1" -> gpu001 gpu002 gpu003 gpu010 login1. Brackets may appear
    more than once in a name (rack[1-2]-n[1-2])."""
    return [h for part in _split_top(expr) for h in _expand_one(part)]


def hostnames(nodelist: str, *, use_scontrol: bool = True) -> list[str]:
    """`scontrol show hostnames NODELIST`, or the same expansion in Python where scontrol is missing."""
    if use_scontrol and shutil.which("scontrol"):
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.split():
            return out.stdout.split()
    return expand_hostlist(nodelist)


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodelist: str  # as SLURM writes it: gpu[001-004]
    hosts: tuple[str, ...]
    in_step: bool  # this process runs inside a job step (srun), not in the batch script itself

    @property
    def first_host(self) -> str:
        return self.hosts[0]

    def to_dict(self) -> dict:
        return {
            "job_id": self.job_id,
            "nodelist": self.nodelist,
            "hosts": list(self.hosts),
            "nnodes": len(self.hosts),
            "in_step": self.in_step,
        }


def job_id_of(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or None


def current_allocation(env: Mapping[str, str] | None = None, *, use_scontrol: bool = True) -> Allocation | None:
    """The SLURM job this process runs in, or None outside SLURM. The node list comes from
    SLURM_JOB_NODELIST, or from `scontrol show job` where the environment lost it (Snakemake's
    job step keeps only SLURM_JOB_ID)."""
    env = os.environ if env is None else env
    job_id = job_id_of(env)
    if not job_id:
        return None
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist and use_scontrol:
        nodelist = show_job(job_id).get("NodeList")
    if not nodelist or nodelist in ("(null)", "None"):
        raise RuntimeError(f"SLURM job {job_id}: no node list in the environment or from scontrol")
    return Allocation(
        job_id=job_id,
        nodelist=nodelist,
        hosts=tuple(hostnames(nodelist, use_scontrol=use_scontrol)),
        in_step="SLURM_STEP_ID" in env or "SLURM_STEPID" in env,
    )


# ---- the launch line ------------------------------------------------------------------
def rdzv_port(job_id: str | int, base: int = DEFAULT_RDZV_PORT) -> int:
    """The rendezvous port of a job: base + job id mod 1000 (two jobs on one host differ)."""
    digits = re.match(r"\d+", str(job_id))
    return base + (int(digits.group()) % RDZV_PORT_SPAN if digits else 0)


def srun_torchrun_command(
    *,
    nodes: int,
    procs_per_node: int,
    first_host: str,
    job_id: str | int,
    module_args: Sequence[str],
    python: str = "python",
    cpus_per_task: int | None = None,
    gpus_per_node: int | None = None,
    port: int | None = None,
    overlap: bool = False,
    srun_extra: str | Sequence[str] = (),
) -> list[str]:
    """The command that starts one run of `nodes` x `procs_per_node` processes inside its SLURM job
    (see the module doc). module_args follow torchrun's `-m`, e.g. ["scalestudy", "train", ...]."""
    if nodes < 1 or procs_per_node < 1:
        raise ValueError(f"nodes ({nodes}) and procs_per_node ({procs_per_node}) must be >= 1")
    port = rdzv_port(job_id) if port is None else port
    srun = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1"]
    if cpus_per_task:
        srun.append(f"--cpus-per-task={cpus_per_task}")
    if gpus_per_node:
        srun.append(f"--gpus-per-node={gpus_per_node}")
    # a rank that fails writes its status and its peers record what they saw: srun must not
    # kill the other nodes first (a site's KillOnBadExit=1 would hide the culprit)
    srun.append("--kill-on-bad-exit=0")
    if overlap:  # already inside a step that holds the resources
        srun.append("--overlap")
    srun.extend(shlex.split(srun_extra) if isinstance(srun_extra, str) else list(srun_extra))
    torchrun = [
        python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nodes}",
        f"--nproc_per_node={procs_per_node}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={first_host}:{port}",
        f"--rdzv-id={job_id}",
        "--max-restarts=0",
    ]
    return [*srun, *torchrun, "-m", *module_args]


# ---- why SLURM stopped a job ----------------------------------------------------------
# Final job states (squeue %T, sacct State, scontrol JobState) and the raw-log status they mean
# for a run that SLURM stopped. Other states (COMPLETED, FAILED, OUT_OF_MEMORY, ...) say nothing
# about an outside stop: the run's own record decides.
TIMEOUT_STATES = frozenset({"TIMEOUT", "DEADLINE"})
PREEMPTED_STATES = frozenset(
    {
        "PREEMPTED",
        "CANCELLED",
        "NODE_FAIL",
        "BOOT_FAIL",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "REVOKED",
        "SUSPENDED",
    }
)
# signals a job's processes get when SLURM stops it (SIGTERM, then SIGKILL after KillWait)
STOP_SIGNALS = {15: "SIGTERM", 9: "SIGKILL", 18: "SIGCONT"}


def _base_state(state: str | None) -> str:
    s = (state or "").strip().upper()
    return re.split(r"[\s+]", s)[0] if s else ""  # "CANCELLED by 0" (sacct), "COMPLETING+..."


def classify_job_state(state: str | None) -> str | None:
    """`timeout` or `preempted` for a job state that means SLURM stopped the job; else None."""
    s = _base_state(state)
    if s in TIMEOUT_STATES:
        return "timeout"
    if s in PREEMPTED_STATES:
        return "preempted"
    return None


def parse_duration_s(text: str | None) -> float | None:
    """SLURM's [D-]HH:MM:SS, MM:SS or minutes; None for UNLIMITED, N/A, empty."""
    if not text or text.strip().upper() in ("UNLIMITED", "INFINITE", "N/A", "NONE", "INVALID"):
        return None
    t = text.strip()
    days = 0
    if "-" in t:
        d, t = t.split("-", 1)
        days = int(d)
    parts = [float(p) for p in t.split(":")]
    if len(parts) == 1:  # minutes
        return days * 86400 + parts[0] * 60
    while len(parts) < 3:
        parts.insert(0, 0.0)
    h, m, s = parts
    return days * 86400 + h * 3600 + m * 60 + s


def exit_signal(returncode: int | None, exit_code_field: str | None = None) -> int | None:
    """The signal that ended a process: from a Popen returncode (-15), a shell's 128+15, or
    sacct/scontrol's ExitCode "0:15"."""
    if exit_code_field and ":" in exit_code_field:
        sig = int(exit_code_field.split(":")[1] or 0)
        if sig:
            return sig
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if 128 < returncode < 128 + 65:
        return returncode - 128
    return None


def classify_stop(
    *,
    state: str | None = None,
    reason: str | None = None,
    run_time_s: float | None = None,
    time_limit_s: float | None = None,
    preempt_time: str | None = None,
    signal: int | None = None,
    slack_s: float = 5.0,
) -> str | None:
    """Why SLURM stopped a job: `timeout`, `preempted`, or None when nothing says it did.

    At the moment of the stop the job's state is usually COMPLETING, which hides the final
    state; the reason (TimeLimit), the run time against the limit, and the preemption time
    tell. A job stopped from outside before its limit (scancel, preemption, a failed node) is
    `preempted`: the run was taken away, not at fault. A job still RUNNING was not stopped by
    SLURM (a SIGTERM from someone else): None."""
    by_state = classify_job_state(state)
    if by_state == "timeout":
        return "timeout"
    r = (reason or "").strip().lower()
    if r in ("timelimit", "deadline") or r.startswith("timelimit"):
        return "timeout"
    if run_time_s is not None and time_limit_s is not None and run_time_s + slack_s >= time_limit_s:
        return "timeout"
    if by_state == "preempted":
        return "preempted"
    if "preempt" in r or (preempt_time and preempt_time.strip().lower() not in ("none", "unknown", "n/a", "")):
        return "preempted"
    if _base_state(state) == "COMPLETING" and (signal is None or signal in STOP_SIGNALS):
        return "preempted"
    return None  # a running job, or one that ended by itself: the run's own record decides


_KV = re.compile(r"(\w+)=(\S*)")


def parse_show_job(text: str) -> dict:
    """`scontrol show job -o ID` (one line of KEY=VALUE) as a dict."""
    return {k: v for k, v in _KV.findall(text)}


def show_job(job_id: str | int) -> dict:
    """`scontrol show job -o JOB` as a dict; {} when scontrol is missing or does not know the job."""
    if not shutil.which("scontrol"):
        return {}
    try:
        out = subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_show_job(out.stdout) if out.returncode == 0 else {}


def classify_job(job: Mapping[str, str], *, signal: int | None = None) -> str | None:
    """classify_stop() from a parsed `scontrol show job`."""
    return classify_stop(
        state=job.get("JobState"),
        reason=job.get("Reason"),
        run_time_s=parse_duration_s(job.get("RunTime")),
        time_limit_s=parse_duration_s(job.get("TimeLimit")),
        preempt_time=job.get("PreemptTime"),
        signal=signal,
    )


def why_stopped(job_id: str | int, *, signal: int | None = None) -> tuple[str | None, dict]:
    """Ask SLURM why it stopped job_id: (status or None, the facts it gave)."""
    job = show_job(job_id)
    facts = {
        k: job[k]
        for k in ("JobState", "Reason", "RunTime", "TimeLimit", "PreemptTime", "NodeList", "Restarts", "ExitCode")
        if k in job
    }
    return (classify_job(job, signal=signal) if job else None), facts
