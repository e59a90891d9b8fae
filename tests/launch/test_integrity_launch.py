"""Fault injection, issue 26 (launch side): run.json records the study, its hardware line and the
config id, and a run copied from another study is refused by the aggregation, naming it; a finished
run found where a launch was about to measure is moved aside, never deleted; the host's locks live
at one fixed place whatever TMPDIR says (or the site file's lock_dir); a process outside the run
guard that uses the CPU while a run measures makes the run `contaminated`."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from analysis_fixtures import make_study, planned
from conftest import child_env, snakemake_cmd

from scalestudy.analysis import aggregate as agg
from scalestudy.launch import run_guard
from scalestudy.launch.launcher import launch
from scalestudy.measure import rawlog
from scalestudy.spec.run import RunSpec
from scalestudy.spec.site import Site, SiteError, load_site

pytestmark = pytest.mark.multiproc

SPEC = RunSpec(
    model="tiny",
    n_layers=2,
    device="cpu",
    precision="fp32",
    procs_per_node=1,
    seq_len=32,
    warmup_iters=1,
    measured_iters=2,
)


def launch_env(**extra) -> dict:
    env = child_env(SCALESTUDY_LOCAL_LAUNCHER="local", **extra)
    return env


# ---- identity, a run found in place, the site's lock directory ------------------------------
def test_identity_is_recorded_and_a_run_of_another_study_is_refused(tmp_path):
    raw_a = tmp_path / "data" / "a" / "raw"
    run_dir = raw_a / SPEC.run_id
    env = launch_env()
    env.pop(run_guard.LOCK_DIR_ENV, None)  # the site file's lock_dir decides
    site = Site(lock_dir=str(tmp_path / "site-locks"))
    out = launch(
        SPEC, run_dir, env=env, site=site, identity={"study": "a", "hardware": "CPU A"}, log_path=tmp_path / "a.log"
    )
    assert out.exit_code == 0 and out.status == "ok", out.message + (tmp_path / "a.log").read_text()
    run = json.loads((run_dir / "run.json").read_text())
    assert (run["study"], run["hardware"], run["config_id"]) == ("a", "CPU A", SPEC.config_id)
    assert (tmp_path / "site-locks" / "host-cpu.lock").exists()  # the host lock where the site file says

    # read for its own study: accepted
    agg.aggregate(make_study(tmp_path, [planned(SPEC, ("weak_scaling",), "FSDP")], name="a", hardware="CPU A"))
    # copied into study b of the same grid on other hardware: refused, naming the run and the field
    raw_b = tmp_path / "data" / "b" / "raw"
    shutil.copytree(run_dir, raw_b / SPEC.run_id)
    with pytest.raises(agg.StudyDataError) as e:
        agg.aggregate(make_study(tmp_path, [planned(SPEC, ("weak_scaling",), "FSDP")], name="b", hardware="CPU B"))
    assert SPEC.run_id in str(e.value) and "run.json" in str(e.value) and "holds study 'a'" in str(e.value)
    # the same study name with another hardware line: refused too
    with pytest.raises(agg.StudyDataError, match="holds hardware 'CPU A', but study 'a' planned 'CPU B'"):
        agg.aggregate(make_study(tmp_path, [planned(SPEC, ("weak_scaling",), "FSDP")], name="a", hardware="CPU B"))

    # launched again where a finished run already lies: moved aside, named, never deleted
    first = rawlog.read_run(run_dir).status["seal"]
    out = launch(
        SPEC, run_dir, env=env, site=site, identity={"study": "a", "hardware": "CPU A"}, log_path=tmp_path / "again.log"
    )
    assert out.exit_code == 0 and out.status == "ok", out.message
    (found,) = raw_a.glob(f"{SPEC.run_id}.found-*")
    assert rawlog.read_run(found).status["seal"] == first  # the first measurement, whole
    assert rawlog.read_run(run_dir).status["seal"] != first
    log = (tmp_path / "again.log").read_text()
    assert "already held a finished run (status ok)" in log and f"moved aside to {found}" in log
    # the aggregation lists the found copy as unplanned (the audit counts it), never reads it instead
    unplanned = agg.unplanned_runs(
        make_study(tmp_path, [planned(SPEC, ("weak_scaling",), "FSDP")], name="a", hardware="CPU A")
    )
    assert any(found.name in json.dumps(u, default=str) for u in unplanned), unplanned


def test_the_lock_directory_does_not_follow_tmpdir(tmp_path):
    code = "from scalestudy.launch import run_guard; print(run_guard.lock_dir({}))"
    seen = []
    for name in ("tmp-one", "tmp-two"):
        (tmp_path / name).mkdir()
        env = child_env(TMPDIR=str(tmp_path / name))
        env.pop(run_guard.LOCK_DIR_ENV, None)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        seen.append(out.stdout.strip())
    assert seen[0] == seen[1] == str(run_guard.default_lock_dir()) and str(tmp_path) not in seen[0]
    # the override the tests use, and the site file's setting
    assert run_guard.lock_dir({run_guard.LOCK_DIR_ENV: str(tmp_path / "x")}, tmp_path / "y") == tmp_path / "x"
    assert run_guard.lock_dir({}, tmp_path / "y") == tmp_path / "y"
    site = tmp_path / "site.yaml"
    site.write_text(f"lock_dir: {tmp_path / 'locks'}\n")
    assert load_site(site).lock_dir == str(tmp_path / "locks")
    site.write_text("lock_dir: relative/locks\n")
    with pytest.raises(SiteError, match="lock_dir must be an absolute path"):
        load_site(site)


# ---- contamination from the machine ------------------------------------------------------
def test_a_busy_process_outside_the_run_guard_makes_the_run_contaminated(tmp_path):
    # a neighbour nobody launched through the guard: no token, and not a descendant of the launcher
    # (here the test process itself, whose children the watch counts as the run's), so started detached
    out = subprocess.run(
        ["sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    busy_pid = int(out.stdout.strip())
    try:
        time.sleep(0.5)
        run_dir = tmp_path / "raw" / SPEC.run_id
        out = launch(SPEC, run_dir, env=launch_env(SCALESTUDY_FOREIGN_CPU_MAX="0.10"), log_path=tmp_path / "run.log")
    finally:
        os.kill(busy_pid, signal.SIGKILL)
    assert out.exit_code == 0 and out.status == "ok", out.message
    load = rawlog.read_run(run_dir).status["load"]
    assert load["contaminated"], load
    assert load["foreign_cpu"]["window"] == "measured steps" and load["foreign_cpu"]["foreign_cpu_share"] > 0.10
    # named among the ten busiest other processes (on a host shared with other work, not always the first)
    assert busy_pid in [p["pid"] for p in load["foreign_cpu"]["top_processes"]], load["foreign_cpu"]
    assert "other processes used" in load["reason"] and "of the host's" in load["reason"]
    assert "CONTAMINATED" in (tmp_path / "run.log").read_text()


class Procs:
    """host_processes() of a host whose processes used these CPU seconds, one snapshot a sample."""

    def __init__(self, snapshots):
        self.snapshots = list(snapshots)

    def __call__(self):
        return self.snapshots.pop(0)


def test_the_foreign_cpu_share_counts_only_other_processes():
    me = os.getpid()
    # pid 101: a worker of the run (the launcher's child), pid 202: someone else's process
    quiet = Procs(
        [
            {me: (1.0, 1, "launcher"), 101: (0.0, me, "python"), 202: (5.0, 1, "sshd")},
            {me: (1.1, 1, "launcher"), 101: (2.0, me, "python"), 202: (5.01, 1, "sshd")},
        ]
    )
    w = run_guard.LoadWatch(token="t", processes=quiet)
    w.sample()
    time.sleep(0.2)
    w.sample()
    rec = w.record(0.0, cpus=2)
    # (the reason may also name processes of other runs of the package that this host runs now)
    assert "other processes used" not in (rec["reason"] or "")
    assert rec["foreign_cpu"]["foreign_cpu_s"] == pytest.approx(0.01) and rec["foreign_cpu"]["foreign_cpu_share"] < 0.1
    busy = Procs(
        [
            {me: (1.0, 1, "launcher"), 101: (0.0, me, "python"), 202: (5.0, 1, "burn")},
            {me: (1.1, 1, "launcher"), 101: (0.1, me, "python"), 202: (5.2, 1, "burn"), 303: (0.1, 1, "new")},
        ]
    )
    w = run_guard.LoadWatch(token="t", processes=busy)
    w.sample()
    time.sleep(0.2)
    w.sample()
    rec = w.record(0.0, cpus=2)
    assert rec["contaminated"] and "other processes used" in rec["reason"] and "burn (pid 202" in rec["reason"]
    assert rec["foreign_cpu"]["foreign_cpu_s"] == pytest.approx(0.3)  # a process new since: all its time
    # a threshold of None (SCALESTUDY_FOREIGN_CPU_MAX=off): recorded, never flagged
    w = run_guard.LoadWatch(
        token="t", processes=Procs([{202: (1.0, 1, "b")}, {202: (9.0, 1, "b")}]), cpu_share_max=None
    )
    w.sample()
    time.sleep(0.1)
    w.sample()
    rec = w.record(0.0, cpus=2)
    assert "other processes used" not in (rec["reason"] or "") and rec["foreign_cpu"]["foreign_cpu_s"] == 8.0
    assert run_guard.foreign_cpu_threshold({}) == run_guard.FOREIGN_CPU_SHARE_MAX
    assert run_guard.foreign_cpu_threshold({run_guard.FOREIGN_CPU_ENV: "off"}) is None


def test_a_run_process_stays_the_runs_while_it_exits(monkeypatch):
    """A warm worker (the server's grandchild, not the launcher's descendant) is the run's by its
    token; while it exits its environment reads empty before it is a zombie, and its last CPU time
    is still the run's. A new process under the same pid (its CPU time lower) is not."""
    me = os.getpid()
    snapshots = [
        {me: (1.0, 1, "launcher"), 50: (3.0, 1, "server"), 101: (0.0, 50, "python")},
        {me: (1.0, 1, "launcher"), 50: (3.0, 1, "server"), 101: (0.5, 50, "python")},
        {me: (1.0, 1, "launcher"), 50: (3.0, 1, "server"), 101: (1.4, 50, "python")},
        {me: (1.0, 1, "launcher"), 50: (3.0, 1, "server"), 101: (0.3, 1, "other")},
    ]
    tokens = [{101: "t"}, {101: "t"}, {}, {}]  # the third: 101 is exiting, its environment empty
    monkeypatch.setattr(run_guard, "run_tokens", lambda: tokens.pop(0))
    w = run_guard.LoadWatch(token="t", processes=Procs(snapshots))
    for _ in range(3):
        w.sample()
    assert w.cpu_series[-1][1] == 0.0 and not w.cpu_by_pid
    w.sample()
    assert w.cpu_series[-1][1] == pytest.approx(0.3) and list(w.cpu_by_pid) == [101]


# ---- a run found after the DAG was built, under the workflow ---------------------------------
STUDY_YAML = """description: a run found where the workflow was about to measure
hardware: CPU test
seeds: [0]
defaults: {model: tiny, n_layers: 2, device: cpu, precision: fp32, seq_len: 32, micro_batch: 1, warmup_iters: 1,
           measured_iters: 2}
experiments:
  - name: weak_scaling
    grid: {procs_per_node: [1]}
"""


def test_the_workflow_keeps_a_run_found_in_place(tmp_path):
    """Snakemake deletes a job's existing outputs before it runs (Job.remove_existing_output) unless
    they are flagged update(): the run rule's are, so a run that appeared after the DAG was built
    (here: --forcerun of a finished run) reaches the launcher, which moves it aside."""
    from conftest import REPO

    for name in ("Snakefile", "workflow", "profiles", "slurm"):
        src = REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / name)
    study = tmp_path / "found.yaml"
    study.write_text(STUDY_YAML)

    def snakemake(*args):
        out = subprocess.run(
            [*snakemake_cmd(), "--cores", "1", "--config", f"study={study}", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=400,
            env=child_env(),
        )
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
        return out.stdout + out.stderr

    from scalestudy.spec.studies import load_study

    (run_id,) = load_study(str(study), tmp_path).run_ids
    target = f"data/found/raw/{run_id}"
    snakemake("--", target)
    first = rawlog.read_run(tmp_path / target).status["seal"]
    text = snakemake("--forcerun", "run", "--", target)
    (found,) = (tmp_path / "data" / "found" / "raw").glob(f"{run_id}.found-*")
    assert rawlog.read_run(found).status["seal"] == first  # the first measurement, kept whole
    assert rawlog.read_run(tmp_path / target).status["seal"] != first  # measured again
    assert f"moved aside to data/found/raw/{found.name}" in text
