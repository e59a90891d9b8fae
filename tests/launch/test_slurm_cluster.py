"""On a real SLURM cluster brought up on this machine (tests/launch/slurm_cluster.py): sbatch and srun
work on every node; `snakemake --profile slurm` runs a reduced smoke study
(tests/studies/slurm-mini.yaml) from the root of a copy of the workflow, every run an sbatch job
whose id its provenance records, and its run of two nodes meets in a c10d rendezvous across them. One
run is cancelled while it trains: its raw log says `preempted`, is kept under interrupted/ and
never counted, and the workflow runs it again. `scalestudy status` counts the study's jobs that
squeue lists (held: pending; sleeping: running) by the comment the executor plugin gives them.

Two nodes: each slurmd runs in a network namespace of its own (own address and hostname). Where
namespaces cannot be made, the cluster has one node and the two-node tests skip, saying why.
Without SLURM the module skips, except when CI is set: then it fails (ci/install-slurm.sh).
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_cluster as sc
import yaml
from conftest import child_env, snakemake_cmd

REPO = Path(__file__).resolve().parents[2]
STUDY = "slurm-mini"


def env_for_jobs() -> dict:
    """The environment jobs inherit (sbatch --export=ALL): the tests' child environment (this Python's
    scripts first), without a SLURM configuration of the caller's."""
    env = child_env()
    for k in ("SLURM_CONF", "SCALESTUDY_SLURM_SITE"):
        env.pop(k, None)
    return env


def sh(cmd, cwd=None, timeout=120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env_for_jobs(), capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    sc.require_cluster_tools()
    why_one = sc.can_make_two_nodes()
    t0 = time.monotonic()
    c = sc.LocalSlurm(tmp_path_factory.mktemp("slurm"), nodes=1 if why_one else 2)
    try:
        c.start()
    except sc.TwoNodesUnusable as e:  # start() cleaned up after itself
        why_one = str(e)
        c = sc.LocalSlurm(tmp_path_factory.mktemp("slurm"), nodes=1)
        c.start()
    c.why_one_node = why_one
    print(
        f"\n[slurm] {c.nodes} node(s) {' '.join(c.node_names)} up in {time.monotonic() - t0:.1f} s"
        + (f" (one node: {why_one})" if why_one else "")
    )
    yield c
    c.stop()


def need_two_nodes(cluster):
    if cluster.nodes < 2:
        pytest.skip(f"a one-node cluster here: {cluster.why_one_node}")


def sbatch(args: list[str], cwd: Path) -> str:
    out = sh(["sbatch", "--parsable", *args], cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def test_srun_and_sbatch_on_every_node(cluster, tmp_path):
    out = sh(["srun", f"--nodes={cluster.nodes}", "--ntasks-per-node=1", "hostname"], timeout=60)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(cluster.node_names)
    jid = sbatch(
        ["--output", str(tmp_path / "%j.out"), "--wrap", "echo job $SLURM_JOB_ID on $SLURM_JOB_NODELIST"], tmp_path
    )
    assert cluster.wait_job(jid, 60) == "COMPLETED"
    assert (tmp_path / f"{jid}.out").read_text().startswith(f"job {jid} on ")


# ---- scalestudy status: the study's jobs in SLURM's queue --------------------------------
def test_status_counts_the_jobs_squeue_lists_for_the_study(cluster, tmp_path, capsys):
    """Jobs sbatch'd with the comment snakemake-executor-plugin-slurm gives a run's job
    (slurm_queue.job_comment): `scalestudy status` counts a held one pending and a sleeping one
    running, for their study only; a job without a comment (squeue prints '(null)') and another
    study's job are not counted, and neither is an error."""
    from scalestudy.cli import main
    from scalestudy.launch.slurm_queue import QueuedRuns, job_comment, queued_runs
    from scalestudy.spec.studies import load_study

    (tmp_path / "workflow" / "studies").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "studies" / f"{STUDY}.yaml", tmp_path / "workflow" / "studies")
    study = load_study(STUDY, tmp_path)
    runs, coll = study.run_ids, study.collectives_ids[0]
    jobs = []

    def submit(comment: str | None, *args: str) -> str:
        jobs.append(
            sbatch(
                [*([f"--comment={comment}"] if comment else []), *args, "--output=/dev/null", "--wrap", "sleep 60"],
                tmp_path,
            )
        )
        return jobs[-1]

    try:
        submit(job_comment("run", STUDY, runs[0]), "--hold")
        sleeping = submit(job_comment("collectives", STUDY, coll))
        submit(None, "--hold")
        submit(job_comment("run", "other-study", runs[1]), "--hold")
        end = time.monotonic() + 15
        while cluster.job_state(sleeping) != "RUNNING" and time.monotonic() < end:
            time.sleep(0.2)
        assert cluster.job_state(sleeping) == "RUNNING"
        listed = sh(["squeue", "--noheader", "--format=%i|%T|%k"]).stdout
        assert "|(null)" in listed, listed  # what the parser must pass over
        out = sh([sys.executable, "-m", "scalestudy", "status", "--study", STUDY, "--root", str(tmp_path), "--json"])
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["queue"] == {
            "pending": [runs[0]],
            "running": [coll],
            "other": {},
            "error": None,
        }, listed
        assert main(["status", "--study", STUDY, "--root", str(tmp_path)]) == 0
        assert "squeue       1 pending, 1 running  (SLURM jobs of its runs)" in capsys.readouterr().out
        assert queued_runs("other-study", [*runs, coll]) == QueuedRuns([runs[1]], [], {})
    finally:
        for jid in jobs:
            sh(["scancel", jid])


# ---- the workflow -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def workflow_run(cluster, tmp_path_factory):
    """`snakemake --profile slurm --config study=slurm-mini` from the root of a copy of the
    workflow; the long run is cancelled (scancel) once it trains. Returns what happened."""
    root = tmp_path_factory.mktemp("wf")
    shutil.copy(REPO / "Snakefile", root)
    for d in ("workflow", "profiles", "slurm"):
        shutil.copytree(REPO / d, root / d)
    study = yaml.safe_load((REPO / "tests" / "studies" / f"{STUDY}.yaml").read_text())
    if cluster.nodes < 2:
        study["experiments"] = [e for e in study["experiments"] if e.get("set", {}).get("nodes", 1) == 1]
    (root / "workflow" / "studies" / f"{STUDY}.yaml").write_text(yaml.safe_dump(study, sort_keys=False))
    from scalestudy.spec.studies import load_study

    planned = load_study(STUDY, root)
    target = next(r.run_id for r in planned.runs if "strong_scaling" in r.experiments)
    # the launcher's ranks write into the attempt's own directory, moved to raw/ at the end
    attempts = root / "data" / STUDY / "attempts"

    cmd = [
        *snakemake_cmd(),
        "--profile",
        "slurm",
        "--config",
        f"study={STUDY}",
        # a small cluster answers at once: poll it often, do not wait for a slow file system
        "--slurm-init-seconds-before-status-checks",
        "2",
        "--latency-wait",
        "5",
    ]
    log = open(root / "snakemake.out", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=root, env=env_for_jobs(), stdout=log, stderr=subprocess.STDOUT)
    cancelled = None
    cancelled_at_iteration = None
    try:
        while proc.poll() is None and time.monotonic() - t0 < 1200:
            stage = next(iter(attempts.glob(f"{target}.attempt1.*/run.json")), None) if cancelled is None else None
            if stage is not None:
                rank0 = stage.parent / "rank-00000.jsonl"
                iters = rank0.read_text().count('"key": "iteration"') if rank0.exists() else 0
                if iters >= 3:  # it trains: the ranks have their SIGTERM handlers
                    run = json.loads(stage.read_text())
                    cancelled = run["provenance"]["slurm"]["job_id"]
                    cancelled_at_iteration = iters
                    assert sh(["scancel", cancelled]).returncode == 0
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail(f"snakemake --profile slurm did not finish in 1200 s; see {root / 'snakemake.out'}")
    finally:
        log.close()
    wall = time.monotonic() - t0
    print(
        f"\n[slurm] snakemake --profile slurm: {len(planned.runs)} runs + {len(planned.collectives)} "
        f"collectives, exit {proc.returncode}, {wall:.0f} s"
    )
    return {
        "root": root,
        "rc": proc.returncode,
        "study": planned,
        "target": target,
        "cancelled": cancelled,
        "cancelled_at_iteration": cancelled_at_iteration,
        "wall_s": wall,
        "output": (root / "snakemake.out").read_text(),
    }


def test_snakemake_profile_slurm_runs_the_reduced_study(workflow_run):
    w = workflow_run
    assert w["rc"] == 0, w["output"][-6000:]
    root, study = w["root"], w["study"]
    for name in study.figures:
        assert (root / "figures" / STUDY / f"{name}.pdf").stat().st_size > 0, name
    assert (root / "figures" / STUDY / "claims.md").exists()


def test_every_run_went_through_sbatch(workflow_run, cluster):
    from scalestudy.measure.rawlog import read_run

    w = workflow_run
    assert w["rc"] == 0, w["output"][-3000:]
    root, study = w["root"], w["study"]
    submitted = {p.stem for p in (root / ".snakemake" / "slurm_logs").rglob("*.log")}
    job_ids = {}
    for run_id in study.run_ids + study.collectives_ids:
        run = read_run(root / "data" / STUDY / "raw" / run_id)
        assert run.status["status"] == "ok", (run_id, run.status)
        job_id = run.run["provenance"]["slurm"]["job_id"]
        assert job_id in submitted, f"{run_id}: job {job_id} has no sbatch log (submitted: {sorted(submitted)})"
        assert cluster.job_state(job_id) == "COMPLETED"
        job_ids[run_id] = job_id
    assert len(set(job_ids.values())) == len(job_ids)
    # the comment the executor plugin gave each job is the one `scalestudy status` looks for
    from scalestudy.launch.slurm_queue import job_comment

    listed = sh(["squeue", "--noheader", "--states=all", "--format=%i|%k"]).stdout.splitlines()
    comments = dict(line.split("|", 1) for line in listed)
    assert {r: comments.get(j) for r, j in job_ids.items()} == {
        r: job_comment("collectives" if r in study.collectives_ids else "run", STUDY, r) for r in job_ids
    }


def test_a_two_node_run_meets_in_one_rendezvous(workflow_run, cluster):
    """The workflow's run of 2 nodes x 2 processes: scalestudy launch in its sbatch job has srun
    start one torchrun agent a node, the agents meet on the first host, 4 processes train, and
    the provenance names both hosts."""
    need_two_nodes(cluster)
    from scalestudy.measure.rawlog import read_run

    w = workflow_run
    assert w["rc"] == 0, w["output"][-3000:]
    (r,) = [r for r in w["study"].runs if r.spec.nodes == 2]
    run = read_run(w["root"] / "data" / STUDY / "raw" / r.run_id)
    assert run.status["status"] == "ok"
    prov = run.run["provenance"]
    jid = prov["slurm"]["job_id"]
    assert prov["slurm"]["nnodes"] == "2"
    assert prov["hosts"] == sorted(cluster.node_names)
    assert prov["devices"]["count"] == 4
    log = (w["root"] / "data" / STUDY / "logs" / "runs" / f"{r.run_id}.log").read_text()
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=2" in log
    assert f"--nnodes=2 --nproc_per_node=2 --rdzv-backend=c10d --rdzv-endpoint={cluster.node_names[0]}:" in log
    assert f"--rdzv-id={jid}" in log


def test_a_cancelled_run_is_preempted_kept_aside_and_run_again(workflow_run, cluster):
    from scalestudy.measure.rawlog import read_run

    w = workflow_run
    assert w["cancelled"], "the long run was never caught training; nothing was cancelled"
    assert w["rc"] == 0, w["output"][-3000:]
    root, target, cancelled = w["root"], w["target"], w["cancelled"]
    assert cluster.job_state(cancelled) == "CANCELLED"
    # the attempt that SLURM stopped: classified and kept where no table reads it
    kept = sorted((root / "data" / STUDY / "interrupted").glob(f"{target}.attempt1.*"))
    assert len(kept) == 1, sorted(p.name for p in (root / "data" / STUDY).iterdir())
    stopped = read_run(kept[0])
    assert stopped.status["status"] == "preempted", stopped.status
    assert stopped.status["stopped_by"]["job_id"] == cancelled
    assert stopped.status["stopped_by"]["status"] == "preempted"
    assert stopped.run["provenance"]["slurm"]["job_id"] == cancelled
    assert {r["status"] for r in stopped.status["ranks"]} <= {"timeout", "preempted"}
    # the workflow ran it again, as a new job, to the end
    assert "Trying to restart job" in w["output"]
    again = read_run(root / "data" / STUDY / "raw" / target)
    assert again.status["status"] == "ok"
    assert again.run["provenance"]["slurm"]["job_id"] != cancelled
    # and the study's table counts it once, from raw/
    import csv

    rows = list(csv.DictReader(open(root / "data" / STUDY / "tables" / "runs.csv")))
    assert sorted(r["run_id"] for r in rows) == sorted(w["study"].run_ids)
    assert all(r["status"] == "ok" for r in rows)


@pytest.mark.skipif(
    not os.environ.get("SCALESTUDY_SLURM_SLOW"),
    reason="SLURM's shortest time limit is a minute: set SCALESTUDY_SLURM_SLOW=1 to run (about 100 s)",
)
def test_a_run_at_slurms_time_limit_is_timeout_and_kept_aside(cluster, tmp_path):
    """sbatch -t 1 around a run that would train for hours: SLURM stops it at one minute, the
    launcher hears Reason=TimeLimit, the run is `timeout`, kept under interrupted/, exit 3."""
    from scalestudy.measure.rawlog import read_run

    (tmp_path / "long.json").write_text(
        json.dumps(
            {
                "model": "tiny",
                "n_layers": 2,
                "device": "cpu",
                "precision": "fp32",
                "seq_len": 128,
                "procs_per_node": 2,
                "warmup_iters": 1,
                "measured_iters": 100000,
            }
        )
    )
    launch = (
        f"exec {sys.executable} -m scalestudy launch --spec-json long.json --run-dir data/s/raw/long "
        "--log data/s/long.log --attempt 1 --max-attempts 2"
    )
    jid = sbatch(
        ["--time=1", "--nodes=1", "--cpus-per-task=2", "--output", str(tmp_path / "%j.out"), "--wrap", launch], tmp_path
    )
    assert cluster.wait_job(jid, 240) == "TIMEOUT"
    assert not (tmp_path / "data" / "s" / "raw" / "long").exists()
    kept = list((tmp_path / "data" / "s" / "interrupted").glob("long.attempt1.*"))
    assert len(kept) == 1
    run = read_run(kept[0])
    assert run.status["status"] == "timeout"
    assert run.status["stopped_by"]["Reason"] == "TimeLimit" and run.status["stopped_by"]["job_id"] == jid
    assert "the workflow runs it again" in (tmp_path / "data" / "s" / "long.log").read_text()
