"""SLURM without a cluster: the launch line of a run of 1, 2 and 256 nodes, hostlist expansion,
the classification of a stopped job (timeout, preempted), the site file, the job resources, and
the profile that `snakemake --profile slurm` finds from the repository root."""

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import snakemake_cmd

from scalestudy.launch import slurm
from scalestudy.launch.slurm import (
    classify_job,
    classify_job_state,
    classify_stop,
    current_allocation,
    exit_signal,
    expand_hostlist,
    job_resources,
    parse_duration_s,
    parse_show_job,
    rdzv_port,
    srun_torchrun_command,
)
from scalestudy.spec.site import SITE_ENV, Site, SiteError, load_site

REPO = Path(__file__).resolve().parents[2]
TRAIN = ["scalestudy", "train", "--spec", "spec.json", "--run-dir", "runs/x", "--quiet"]


# ---- the launch line ------------------------------------------------------------------
def test_launch_line_one_node():
    cmd = srun_torchrun_command(
        nodes=1,
        procs_per_node=8,
        first_host="gpu017",
        job_id="4242",
        module_args=TRAIN,
        python="python",
        cpus_per_task=8,
        gpus_per_node=8,
    )
    assert cmd == [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        "--ntasks-per-node=1",
        "--cpus-per-task=8",
        "--gpus-per-node=8",
        "--kill-on-bad-exit=0",
        "python",
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=8",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=gpu017:29742",
        "--rdzv-id=4242",
        "--max-restarts=0",
        "-m",
        "scalestudy",
        "train",
        "--spec",
        "spec.json",
        "--run-dir",
        "runs/x",
        "--quiet",
    ]


def test_launch_line_two_nodes_rendezvous_on_the_first_host():
    alloc_hosts = expand_hostlist("node[07-08]")
    cmd = srun_torchrun_command(
        nodes=2,
        procs_per_node=4,
        first_host=alloc_hosts[0],
        job_id=123456,
        module_args=TRAIN,
        python="/opt/env/bin/python",
        cpus_per_task=4,
        gpus_per_node=4,
    )
    assert cmd[: cmd.index("/opt/env/bin/python")] == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=4",
        "--gpus-per-node=4",
        "--kill-on-bad-exit=0",
    ]
    torchrun = cmd[cmd.index("/opt/env/bin/python") :]
    assert torchrun[:3] == ["/opt/env/bin/python", "-m", "torch.distributed.run"]
    assert "--nnodes=2" in torchrun and "--nproc_per_node=4" in torchrun
    assert "--rdzv-backend=c10d" in torchrun and "--rdzv-endpoint=node07:29956" in torchrun
    assert "--rdzv-id=123456" in torchrun
    assert torchrun[torchrun.index("-m", 3) :] == ["-m", *TRAIN]


def test_launch_line_256_nodes_of_8_gpus():
    hosts = expand_hostlist("h100-[0001-0256]")
    assert len(hosts) == 256 and hosts[0] == "h100-0001" and hosts[-1] == "h100-0256"
    cmd = srun_torchrun_command(
        nodes=256,
        procs_per_node=8,
        first_host=hosts[0],
        job_id="9000001",
        module_args=TRAIN,
        cpus_per_task=64,
        gpus_per_node=8,
        srun_extra="--cpu-bind=none",
    )
    text = " ".join(cmd)
    assert text.startswith(
        "srun --nodes=256 --ntasks=256 --ntasks-per-node=1 --cpus-per-task=64 "
        "--gpus-per-node=8 --kill-on-bad-exit=0 --cpu-bind=none python -m torch.distributed.run "
    )
    assert (
        "--nnodes=256 --nproc_per_node=8 --rdzv-backend=c10d --rdzv-endpoint=h100-0001:29501 "
        "--rdzv-id=9000001 --max-restarts=0 -m scalestudy train" in text
    )


def test_launch_line_on_cpu_asks_no_gpus_and_can_overlap_a_step():
    cmd = srun_torchrun_command(nodes=2, procs_per_node=2, first_host="a", job_id=7, module_args=TRAIN, overlap=True)
    assert not any(c.startswith("--gpus") for c in cmd)
    assert "--overlap" in cmd and cmd.index("--overlap") < cmd.index("python")
    with pytest.raises(ValueError):
        srun_torchrun_command(nodes=0, procs_per_node=1, first_host="a", job_id=1, module_args=TRAIN)


def test_rdzv_port_differs_between_jobs_and_stays_in_range():
    assert rdzv_port(1) == 29501 and rdzv_port("1000") == 29500 and rdzv_port(1999, base=40000) == 40999
    assert rdzv_port("123_4") == 29623  # an array task: the job id's digits
    assert len({rdzv_port(j) for j in range(5000, 5100)}) == 100


# ---- hostlists and the allocation -----------------------------------------------------
@pytest.mark.parametrize(
    "expr,hosts",
    [
        ("vm", ["vm"]),
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("gpu[001-003,010],login1", ["gpu001", "gpu002", "gpu003", "gpu010", "login1"]),
        ("a[9-11]", ["a9", "a10", "a11"]),
        ("b[08-10]", ["b08", "b09", "b10"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("x[1],y[2-3]z", ["x1", "y2z", "y3z"]),
    ],
)
def test_expand_hostlist(expr, hosts):
    assert expand_hostlist(expr) == hosts


def test_expand_hostlist_refuses_garbage():
    for bad in ("n[1-", "n]1[", "n[3-1]", "n[a-b]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)


@pytest.mark.skipif(shutil.which("scontrol") is None, reason="scontrol is not installed")
def test_expand_hostlist_agrees_with_scontrol(tmp_path):
    # scontrol reads a configuration even to expand names: a minimal one of its own
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\n")
    expr = "gpu[001-003,010],login1,rack[1-2]-n[1-2],a[9-11],b[08-10]"
    out = subprocess.run(
        ["scontrol", "show", "hostnames", expr],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "SLURM_CONF": str(conf)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == expand_hostlist(expr)


def test_current_allocation_from_the_environment():
    assert current_allocation({}) is None
    a = current_allocation({"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "n[3-4]"}, use_scontrol=False)
    assert a.job_id == "77" and a.hosts == ("n3", "n4") and a.first_host == "n3" and not a.in_step
    assert a.to_dict() == {"job_id": "77", "nodelist": "n[3-4]", "hosts": ["n3", "n4"], "nnodes": 2, "in_step": False}
    b = current_allocation({"SLURM_JOBID": "78", "SLURM_NODELIST": "n9", "SLURM_STEP_ID": "0"}, use_scontrol=False)
    assert b.job_id == "78" and b.hosts == ("n9",) and b.in_step
    with pytest.raises(RuntimeError, match="no node list"):
        current_allocation({"SLURM_JOB_ID": "79"}, use_scontrol=False)


# ---- why SLURM stopped a job ----------------------------------------------------------
@pytest.mark.parametrize(
    "state,status",
    [
        ("TIMEOUT", "timeout"),
        ("DEADLINE", "timeout"),
        ("PREEMPTED", "preempted"),
        ("CANCELLED", "preempted"),
        ("CANCELLED by 0", "preempted"),
        ("NODE_FAIL", "preempted"),
        ("REQUEUED", "preempted"),
        ("COMPLETED", None),
        ("FAILED", None),
        ("OUT_OF_MEMORY", None),
        ("RUNNING", None),
        ("", None),
        (None, None),
    ],
)
def test_classify_job_state(state, status):
    assert classify_job_state(state) == status


# what `scontrol show job -o` said inside a job at the moment SLURM sent SIGTERM (slurm 22.05):
AT_TIME_LIMIT = (
    "JobId=3 JobName=sig.sh UserId=root(0) JobState=COMPLETING Reason=TimeLimit Dependency=(null) "
    "RunTime=00:01:09 TimeLimit=00:01:00 TimeMin=N/A StartTime=2026-12-02T14:26:44 "
    "EndTime=2026-12-02T14:27:53 NodeList=vm"
)
AT_SCANCEL = (
    "JobId=4 JobName=sig.sh UserId=root(0) JobState=COMPLETING Reason=None Dependency=(null) "
    "RunTime=00:00:04 TimeLimit=00:10:00 TimeMin=N/A NodeList=vm"
)


def test_classify_a_stop_from_scontrol():
    assert classify_job(parse_show_job(AT_TIME_LIMIT)) == "timeout"
    assert classify_job(parse_show_job(AT_SCANCEL)) == "preempted"
    assert parse_show_job(AT_SCANCEL)["NodeList"] == "vm"
    running = AT_SCANCEL.replace("COMPLETING", "RUNNING")
    assert classify_job(parse_show_job(running)) is None  # not stopped by SLURM: the run's record decides
    preempted = AT_SCANCEL.replace("Reason=None", "Reason=Preempted")
    assert classify_job(parse_show_job(preempted)) == "preempted"


def test_classify_stop_evidence():
    assert classify_stop(state="COMPLETING", run_time_s=3598, time_limit_s=3600) == "timeout"
    assert classify_stop(state="COMPLETING", run_time_s=100, time_limit_s=3600) == "preempted"
    assert classify_stop(state="COMPLETING", preempt_time="2026-01-01T00:00:00") == "preempted"
    assert classify_stop(state="TIMEOUT", reason="None") == "timeout"
    assert classify_stop(state="COMPLETED") is None
    assert classify_stop(state="COMPLETING", signal=11) is None  # a segfault is no stop from outside


def test_exit_signals_and_durations():
    assert exit_signal(-15) == 15 and exit_signal(143) == 15 and exit_signal(137) == 9
    assert exit_signal(1) is None and exit_signal(0) is None and exit_signal(None) is None
    assert exit_signal(0, "0:15") == 15 and exit_signal(None, "1:0") is None
    assert parse_duration_s("00:01:09") == 69 and parse_duration_s("1-02:00:00") == 93600
    assert parse_duration_s("10:00") == 600 and parse_duration_s("30") == 1800
    assert parse_duration_s("UNLIMITED") is None and parse_duration_s("N/A") is None and parse_duration_s(None) is None


# ---- site and job resources ------------------------------------------------------------
def test_the_repository_site_file_loads_and_names_every_setting():
    site = load_site(REPO / "slurm" / "site.yaml")
    assert site.gpus_per_node == 8 and site.partition is None and site.retries >= 1
    text = (REPO / "slurm" / "site.yaml").read_text()
    for key in ("partition", "account", "constraint", "gpus_per_node", "max_runtime_min", "min_runtime_min"):
        assert f"\n{key}:" in text


def test_site_defaults_and_refusals(tmp_path, monkeypatch):
    assert load_site(tmp_path / "none.yaml") == Site()
    p = tmp_path / "site.yaml"
    p.write_text("partition: gpu\nacount: typo\n")
    with pytest.raises(SiteError, match="unknown setting 'acount'"):
        load_site(p)
    p.write_text("gpus_per_node: eight\n")
    with pytest.raises(SiteError, match="gpus_per_node must be a whole number"):
        load_site(p)
    p.write_text("partition: gpu\naccount: 123456\nexclusive: true\n")
    site = load_site(p)
    assert site.partition == "gpu" and site.account == "123456" and site.exclusive
    monkeypatch.setenv(SITE_ENV, str(p))
    assert load_site().partition == "gpu"


def test_job_resources_one_node_and_many():
    site = Site(partition="gpu", account="proj", constraint="h100", gpus_per_node=8, cpus_per_gpu=8)
    one = job_resources(nodes=1, procs_per_node=8, cuda=True, runtime_min=30, mem_mb=131072, site=site)
    assert one == {
        "nodes": 1,
        "tasks": 1,
        "cpus_per_task": 64,
        "mpi": None,
        "mem_mb": 131072,
        "runtime": 30,
        "slurm_partition": "gpu",
        "slurm_account": "proj",
        "qos": None,
        "constraint": "h100",
        "slurm_extra": "--ntasks-per-node=1 --gpus-per-node=8 --exclusive",
    }  # whole nodes by default
    many = job_resources(nodes=256, procs_per_node=8, cuda=True, runtime_min=3, mem_mb=1, site=site)
    assert many["nodes"] == many["tasks"] == 256 and many["mpi"] == "srun"
    assert many["runtime"] == site.min_runtime_min
    cpu = job_resources(nodes=2, procs_per_node=2, cuda=False, runtime_min=12, mem_mb=2560, site=Site(exclusive=True))
    assert cpu["cpus_per_task"] == 2 and cpu["slurm_extra"] == "--ntasks-per-node=1 --exclusive"
    assert cpu["slurm_partition"] is None and cpu["mpi"] == "srun"


def test_job_resources_refuse_what_the_site_cannot_hold():
    with pytest.raises(SiteError, match="needs 8 GPUs a node; the site's nodes have 4"):
        job_resources(nodes=1, procs_per_node=8, cuda=True, runtime_min=30, mem_mb=1, site=Site(gpus_per_node=4))
    with pytest.raises(SiteError, match="time limit of 600 min; the site allows 240"):
        job_resources(nodes=1, procs_per_node=1, cuda=False, runtime_min=600, mem_mb=1, site=Site(max_runtime_min=240))


def test_slurm_extra_passes_the_plugins_check():
    """The executor plugin refuses sbatch options it sets itself in slurm_extra."""
    validation = pytest.importorskip("snakemake_executor_plugin_slurm.validation")
    import re

    res = job_resources(nodes=4, procs_per_node=8, cuda=True, runtime_min=60, mem_mb=1, site=Site(exclusive=True))
    for pattern in validation.get_forbidden_slurm_options():
        assert not re.search(pattern, res["slurm_extra"]), pattern


# ---- the profile -----------------------------------------------------------------------
def test_snakemake_finds_the_profile_named_slurm_from_the_repository_root(monkeypatch):
    cli = pytest.importorskip("snakemake.cli")
    monkeypatch.chdir(REPO)
    found = cli.get_profile_dir("slurm")
    assert found is not None, "snakemake --profile slurm finds no profile from the repository root"
    profile_dir, config = found
    assert Path(profile_dir).resolve() == REPO / "slurm" and config.name == "config.yaml"


def test_the_profile_names_options_that_snakemake_and_the_plugin_know():
    yaml = pytest.importorskip("yaml")
    pytest.importorskip("snakemake_executor_plugin_slurm")
    profile = yaml.safe_load((REPO / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm" and profile["slurm-status-command"] == "squeue"
    pytest.importorskip("snakemake")
    helptext = subprocess.run([*snakemake_cmd(), "--help"], capture_output=True, text=True, timeout=120).stdout
    for key in profile:
        assert f"--{key}" in helptext, f"slurm/config.yaml: snakemake knows no option --{key}"


# ---- the launcher under SLURM, without a cluster -----------------------------------------
from scalestudy.launch import launcher  # noqa: E402
from scalestudy.spec.run import RunSpec  # noqa: E402

TINY = {
    "model": "tiny",
    "device": "cpu",
    "precision": "fp32",
    "procs_per_node": 2,
    "seq_len": 32,
    "warmup_iters": 1,
    "measured_iters": 2,
}


def test_the_launcher_picks_torchrun_or_srun():
    one, two = RunSpec.from_dict(TINY), RunSpec.from_dict({**TINY, "nodes": 2})
    spec_file, run_dir = Path("s.json"), Path("raw/r")
    # a CPU run on this host: scalestudy.launch.local_workers (tests/launch/test_launch.py), torchrun when asked
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCALESTUDY_LOCAL_LAUNCHER", "torchrun")
        local = launcher.launch_command(one, spec_file, run_dir, "py")
    assert local[:3] == ["py", "-m", "torch.distributed.run"] and "--rdzv-endpoint=localhost:0" in local
    # a one-node run inside Snakemake's job step: the step holds the node, torchrun directly
    in_step = slurm.Allocation("5", "n1", ("n1",), in_step=True)
    assert launcher.launch_command(one, spec_file, run_dir, "py", in_step) == local
    # the batch script of a job (Snakemake's job step of an mpi job): srun on the job's nodes
    batch = slurm.Allocation("6", "n[1-2]", ("n1", "n2"), in_step=False)
    cmd = launcher.launch_command(two, spec_file, run_dir, "py", batch, Site(rdzv_port=40000, srun_extra="--mpi=none"))
    assert cmd[:6] == [
        "srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--cpus-per-task=2",
        "--kill-on-bad-exit=0",
    ]
    assert "--mpi=none" in cmd and "--rdzv-endpoint=n1:40006" in cmd and "--rdzv-id=6" in cmd
    assert cmd[-7:] == ["scalestudy", "train", "--spec", "s.json", "--run-dir", "raw/r", "--quiet"]
    # a multi-node run from inside a step shares the step's resources
    assert "--overlap" in launcher.launch_command(
        two, spec_file, run_dir, "py", slurm.Allocation("7", "n[1-2]", ("n1", "n2"), in_step=True)
    )
    with pytest.raises(launcher.LaunchError, match="outside a SLURM job"):
        launcher.launch_command(two, spec_file, run_dir, "py")
    with pytest.raises(launcher.LaunchError, match="SLURM job 5 has 1"):
        launcher.launch_command(two, spec_file, run_dir, "py", slurm.Allocation("5", "n1", ("n1",), False))


def test_a_cuda_run_asks_its_gpus_a_node():
    spec = RunSpec.from_dict(
        {"model": "llama2-7b", "device": "cuda", "nodes": 256, "procs_per_node": 8, "seq_len": 4096, "micro_batch": 2}
    )
    hosts = tuple(expand_hostlist("gpu[0001-0256]"))
    cmd = launcher.launch_command(
        spec,
        Path("s.json"),
        Path("raw/r"),
        "python",
        slurm.Allocation("31337", "gpu[0001-0256]", hosts, False),
        Site(gpus_per_node=8, cpus_per_gpu=12),
    )
    assert " ".join(cmd).startswith(
        "srun --nodes=256 --ntasks=256 --ntasks-per-node=1 --cpus-per-task=96 "
        "--gpus-per-node=8 --kill-on-bad-exit=0 python -m torch.distributed.run "
        "--nnodes=256 --nproc_per_node=8 --rdzv-backend=c10d "
        "--rdzv-endpoint=gpu0001:29837 --rdzv-id=31337"
    )
    res = launcher.job_resources(spec, 3600, Site(gpus_per_node=8, partition="gpu"))
    assert (res["nodes"], res["tasks"], res["mpi"], res["slurm_partition"]) == (256, 256, "srun", "gpu")
    assert res["slurm_extra"] == "--ntasks-per-node=1 --gpus-per-node=8 --exclusive"
    shared = launcher.job_resources(spec, 3600, Site(gpus_per_node=8, partition="gpu", exclusive=False))
    assert shared["slurm_extra"] == "--ntasks-per-node=1 --gpus-per-node=8"


def _fake_python(tmp_path: Path) -> Path:
    """A stand-in for torchrun that ignores SIGTERM and never starts the harness (no torch)."""
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\ntrap '' TERM\nsleep 120\n")
    fake.chmod(0o755)
    return fake


def test_a_stopped_run_is_kept_aside_and_retried_then_recorded(tmp_path):
    spec, fake = RunSpec.from_dict(TINY), _fake_python(tmp_path)
    run_dir = tmp_path / "data" / "s" / "raw" / spec.run_id
    first = launcher.launch(
        spec, run_dir, time_limit_s=1, grace_s=1, python=str(fake), attempt=1, max_attempts=2, log_path=tmp_path / "log"
    )
    assert (first.status, first.exit_code) == ("timeout", launcher.EXIT_RETRY)
    assert not run_dir.exists()  # never counted
    kept = sorted((tmp_path / "data" / "s" / "interrupted").iterdir())
    assert [p.name.split(".")[:2] for p in kept] == [[spec.run_id, "attempt1"]]
    assert json.loads((kept[0] / "status.json").read_text())["status"] == "timeout"
    last = launcher.launch(
        spec, run_dir, time_limit_s=1, grace_s=1, python=str(fake), attempt=2, max_attempts=2, log_path=tmp_path / "log"
    )
    assert (last.status, last.exit_code) == ("timeout", launcher.EXIT_CLASSIFIED)  # the last attempt: data
    assert json.loads((run_dir / "status.json").read_text())["status"] == "timeout"
    assert not (tmp_path / "data" / "s" / "attempts").exists()
    log = (tmp_path / "log").read_text()
    assert "attempt 1 of 2: the workflow runs it again" in log  # both attempts' notes are kept


def test_an_interrupted_run_left_in_place_is_moved_aside(tmp_path):
    spec, fake = RunSpec.from_dict(TINY), _fake_python(tmp_path)
    run_dir = tmp_path / "raw" / spec.run_id
    run_dir.mkdir(parents=True)
    (run_dir / "status.json").write_text(json.dumps({"status": "preempted"}))
    out = launcher.launch(spec, run_dir, time_limit_s=1, grace_s=1, python=str(fake), log_path=tmp_path / "log")
    assert out.status == "timeout"
    assert [p.name.split(".")[1] for p in (tmp_path / "interrupted").iterdir()] == ["replaced"]


def test_slurm_stopping_the_job_makes_the_run_preempted(tmp_path, monkeypatch):
    """SIGTERM reaches the launcher inside a SLURM job; scontrol (a stand-in here) says the job is
    COMPLETING well before its limit: the run is `preempted`, and status.json says what SLURM said."""
    import signal
    import threading

    bindir = tmp_path / "bin"
    bindir.mkdir()
    scontrol = bindir / "scontrol"
    scontrol.write_text(
        "#!/bin/sh\n"
        "if [ \"$1 $2\" = 'show job' ]; then echo '"
        + AT_SCANCEL.replace("JobId=4", "JobId=77")
        + "'; else echo vm; fi\n"
    )
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    env = {**os.environ, "SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "vm", "SLURM_STEP_ID": "0"}
    spec = RunSpec.from_dict(TINY)
    run_dir = tmp_path / "raw" / spec.run_id
    # SIGTERM once the launcher passes it on (its handler is in place), not after a fixed delay: a
    # launch still waiting for the host lock would die of it (the test's worker with it)
    unhandled, done = signal.getsignal(signal.SIGTERM), threading.Event()

    def stop_when_handled():
        while not done.is_set():
            if signal.getsignal(signal.SIGTERM) is not unhandled:
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    stopper = threading.Thread(target=stop_when_handled, daemon=True)
    stopper.start()
    try:
        out = launcher.launch(
            spec,
            run_dir,
            time_limit_s=60,
            grace_s=1,
            python=str(_fake_python(tmp_path)),
            env=env,
            log_path=tmp_path / "log",
            attempt=1,
            max_attempts=1,
        )
    finally:
        done.set()
        stopper.join()
    assert (out.status, out.exit_code) == ("preempted", launcher.EXIT_CLASSIFIED)
    assert out.stopped_by["status"] == "preempted" and out.stopped_by["JobState"] == "COMPLETING"
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "preempted" and status["stopped_by"]["job_id"] == "77"
    assert "before its time limit" in status["ranks"][0]["error"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["provenance"]["slurm"]["job_id"] == "77"
    # the job goes away: a copy waits in interrupted/ even on the last attempt
    assert len(list((tmp_path / "interrupted").iterdir())) == 1
    assert "SLURM says: JobState=COMPLETING" in (tmp_path / "log").read_text()


def test_record_scheduler_stop_turns_the_ranks_timeout_into_preempted(tmp_path):
    status = tmp_path / "status.json"
    status.write_text(
        json.dumps(
            {"status": "timeout", "error": "RunTimeout: received signal SIGTERM", "culprit_ranks": [0, 1], "ranks": []}
        )
    )
    launcher._record_scheduler_stop(status, {"scheduler": "slurm", "job_id": "9", "status": "preempted"}, "scancel")
    got = json.loads(status.read_text())
    assert got["status"] == "preempted" and got["culprit_ranks"] == [] and got["error"].startswith("scancel")
    status.write_text(json.dumps({"status": "oom", "error": "x", "culprit_ranks": [1], "ranks": []}))
    launcher._record_scheduler_stop(status, {"scheduler": "slurm", "job_id": "9", "status": "preempted"}, "scancel")
    assert json.loads(status.read_text())["status"] == "oom"  # the run's own failure came first


def test_snakemake_profile_slurm_plans_the_paper_study_as_typed():
    """`snakemake --profile slurm -n` from the repository root (no cluster needed for a dry run):
    every run a job of its nodes, one task a node, 8 GPUs a node; multi-node runs are mpi jobs."""
    pytest.importorskip("snakemake")
    pytest.importorskip("snakemake_executor_plugin_slurm")
    env = {k: v for k, v in os.environ.items() if k != SITE_ENV}
    out = subprocess.run(
        [*snakemake_cmd(), "--profile", "slurm", "-n", "--config", "study=paper"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    assert "Using profiles slurm and workflow specific profile profiles/default" in out.stderr + out.stdout
    text = out.stdout
    assert "nodes=256, tasks=256, gpus=2048, runtime=" in text
    # slurm/site.yaml asks for whole nodes (exclusive: true): a measured run shares no node
    assert "slurm_extra=--ntasks-per-node=1 --gpus-per-node=8 --exclusive, cpus_per_task=8, mpi=srun" in text
    one_node = [ln for ln in text.splitlines() if "resources:" in ln and "nodes=1," in ln]
    assert one_node and not any("mpi=" in ln for ln in one_node)
    assert "exec scalestudy launch --study paper" in text and "--attempt 1 --max-attempts 3" in text
    # the README's job count of this dry run is snakemake's
    total = re.search(r"^total\s+(\d+)$", text, re.M)
    stated = re.search(r"plan the paper's whole grid \((\d+) jobs\)", (REPO / "README.md").read_text())
    assert total and stated and stated.group(1) == total.group(1), (
        f"README.md says {stated and stated.group(1)} jobs; snakemake -n plans {total and total.group(1)}"
    )


def test_a_host_that_cannot_submit_is_told_why_in_one_sentence():
    from scalestudy.launch.slurm import submit_problem

    have = lambda *tools: lambda name: f"/usr/bin/{name}" if name in tools else None  # noqa: E731
    assert submit_problem(Site(), which=have("sbatch", "squeue", "sacct", "sacctmgr")) is None
    assert "sbatch is not on this host's PATH" in submit_problem(Site(), which=have())
    msg = submit_problem(Site(), which=have("sbatch", "squeue"))
    assert msg.startswith("SLURM's accounting commands (sacct, sacctmgr) are not on this host's PATH")
    assert "install SLURM's client tools" in msg and "\n" not in msg
    msg = submit_problem(Site(account="proj"), which=have("sbatch", "squeue", "sacct"))
    assert "(sacctmgr)" in msg and "'proj'" in msg
