"""A study's jobs in SLURM's queue, asked of `squeue` (`scalestudy status`).

Kept apart from scalestudy.launch.slurm, which the analysis code imports (its version would change with
this module). Pure Python; runs only `squeue`.
"""

from __future__ import annotations

import getpass
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from typing import Sequence

# snakemake-executor-plugin-slurm names every job of one workflow invocation by its run id (a
# uuid: --job-name) and comments it `rule_RULE_wildcards_W1_W2...` (its wildcards' values, in the
# order of the rule's output path): a run job of study S is `rule_run_wildcards_S_RUNID`.
QUEUE_RULES = ("run", "collectives")  # the workflow rules whose jobs are a study's planned runs
PENDING_STATES = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING"})
SQUEUE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class QueuedRuns:
    """A study's planned runs with a job in SLURM's queue (squeue), by state."""

    pending: list[str]  # run ids
    running: list[str]
    other: dict[str, list[str]]  # another state (SUSPENDED, STOPPED, ...) -> run ids
    error: str | None = None  # squeue could not say: why


def job_comment(rule: str, study_name: str, run_id: str) -> str:
    """The comment the executor plugin gives the job of `rule` for (study, run_id)."""
    return f"rule_{rule}_wildcards_{study_name}_{run_id}"


def queued_runs(
    study_name: str, run_ids: Sequence[str], *, user: str | None = None, which=shutil.which
) -> QueuedRuns | None:
    """The jobs of the study's runs in SLURM's queue, asked of `squeue` (this user's jobs by
    default); None where squeue is not on PATH. Finished jobs have left the queue: the raw logs
    say how they ended."""
    exe = which("squeue")
    if exe is None:
        return None
    by_comment = {job_comment(rule, study_name, r): r for rule in QUEUE_RULES for r in run_ids}
    cmd = [exe, "--noheader", f"--user={user or getpass.getuser()}", "--format=%i|%T|%k"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=SQUEUE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return QueuedRuns([], [], {}, f"{shlex.join(cmd)}: {e}")
    if out.returncode != 0:
        why = (out.stderr.strip().splitlines() or [f"exit status {out.returncode}"])[-1]
        return QueuedRuns([], [], {}, f"{shlex.join(cmd)} failed: {why}")
    pending, running, other = set(), set(), {}
    for line in out.stdout.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) != 3 or parts[2] not in by_comment:
            continue
        run_id, state = by_comment[parts[2]], parts[1].strip().upper()
        if state in PENDING_STATES:
            pending.add(run_id)
        elif state in RUNNING_STATES:
            running.add(run_id)
        else:
            other.setdefault(state, set()).add(run_id)
    return QueuedRuns(sorted(pending), sorted(running), {s: sorted(v) for s, v in sorted(other.items())})
