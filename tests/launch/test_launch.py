"""`scalestudy launch`: a planned run under torchrun with a wall-clock limit, ending with a
finished raw log and an exit code that says whether the outcome is data (0) or a harness bug (1)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, child_env

from scalestudy.launch.launcher import LaunchError, default_time_limit_s, job_resources, launch, share_threads
from scalestudy.measure import rawlog
from scalestudy.spec.run import RunSpec
from scalestudy.spec.studies import load_study

TINY = {
    "model": "tiny",
    "device": "cpu",
    "precision": "fp32",
    "procs_per_node": 2,
    "seq_len": 32,
    "warmup_iters": 1,
    "measured_iters": 2,
}


def run_launch(args: list[str], *, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "scalestudy", "launch", *args]
    return subprocess.run(cmd, cwd=REPO, env=env or child_env(), capture_output=True, text=True, timeout=timeout)


def spec_file(tmp_path: Path, **changes) -> Path:
    p = tmp_path / "spec.json"
    p.write_text(json.dumps({**TINY, **changes}))
    return p


def test_cli_registers_launch():
    out = subprocess.run(
        [sys.executable, "-m", "scalestudy", "launch", "--help"],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "--run-id" in out.stdout and "--time-limit-s" in out.stdout


@pytest.mark.multiproc
def test_every_thread_variable_is_shared_out_among_a_nodes_processes():
    env = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "8", "NUMEXPR_NUM_THREADS": "x"}
    share_threads(env, 4)
    assert env == {
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "2",
        "NUMEXPR_NUM_THREADS": "x",
    }


def test_launch_a_planned_two_process_run(tmp_path):
    study = load_study("smoke", REPO)
    run = next(r for r in study.runs if r.spec.world_size == 2 and r.label == "FSDP" and r.spec.seed == 0)
    run_dir, log = tmp_path / "raw" / run.run_id, tmp_path / "logs" / "run.log"
    out = run_launch(["--study", "smoke", "--run-id", run.run_id, "--run-dir", str(run_dir), "--log", str(log)])
    assert out.returncode == 0, out.stderr + log.read_text()
    assert f"{run.run_id}: ok" in out.stdout
    got = rawlog.read_run(run_dir)
    assert got.status["status"] == "ok" and got.run_id == run.run_id
    assert got.spec == run.spec.to_dict()
    assert len(list(got.iterations("measured"))) == 2 * run.spec.measured_iters
    # the CPU peak: calibrated once, by rank 0, for both processes of the host
    peaks = [r for r in got.records if r["key"] == "device_peak"]
    assert sorted(r["metadata"]["rank"] for r in peaks) == [0, 1] and peaks[0]["value"] == peaks[1]["value"]
    assert peaks[0]["value"]["detail"]["measured_by_rank"] == 0
    text = log.read_text()
    assert "-m scalestudy workers --nproc=2 -- train" in text and "scalestudy workers ended with exit code 0" in text
    # the worker's progress reaches the log although the launcher runs it --quiet; a summary ends it
    steps = run.spec.warmup_iters + run.spec.measured_iters
    assert f"[progress] step {steps}/{steps} measured | loss " in text and " tok/s per device | MFU " in text
    # one summary line (the launcher's, from the finished raw log; the workers leave it to it), in
    # the log and on the terminal, its tokens/s said global and per device
    summaries = [ln for ln in text.splitlines() if ln.startswith("[summary]")]
    assert len(summaries) == 1 and summaries[0].startswith(f"[summary] run {run.run_id}: ok | "), summaries
    assert " tok/s global | " in summaries[0] and " tok/s per device | MFU " in summaries[0]
    assert [ln for ln in out.stdout.splitlines() if ln.startswith("[summary]")] == summaries
    assert f"raw log {run_dir}" in summaries[0]
    # both ranks traced the profiled step; Kineto's start and stop lines come from rank 0 alone
    assert run.spec.profile_iters and sorted(p.name for p in (run_dir / "traces").iterdir()) == [
        "rank-00000.json.gz",
        "rank-00001.json.gz",
    ]
    # (at most once: Kineto's C++ log line can be lost on a loaded host, never printed twice)
    assert text.count("profiler_start") <= 1 and text.count("profiler_stop") <= 1, text


@pytest.mark.multiproc
def test_a_run_stopped_at_its_time_limit_is_timeout(tmp_path):
    run_dir, log = tmp_path / "run", tmp_path / "run.log"
    spec = spec_file(tmp_path, measured_iters=100000)
    t0 = time.monotonic()
    out = run_launch(
        [
            "--spec-json",
            str(spec),
            "--run-dir",
            str(run_dir),
            "--log",
            str(log),
            "--time-limit-s",
            "5",
            "--grace-s",
            "20",
        ]
    )  # stopped in training, or before it on a loaded machine
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - t0 < 90
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "timeout"
    assert "stopped at the time limit" in log.read_text()
    assert rawlog.read_run(run_dir).status["status"] == "timeout"


def test_a_run_that_ignores_sigterm_is_killed_and_classified_timeout(tmp_path):
    # a stand-in for torchrun that ignores SIGTERM and never starts the harness
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\ntrap '' TERM\nsleep 120\n")
    fake.chmod(0o755)
    spec = RunSpec.from_dict(TINY)
    run_dir = tmp_path / "run"
    t0 = time.monotonic()
    outcome = launch(spec, run_dir, time_limit_s=1, grace_s=1, log_path=tmp_path / "log", python=str(fake))
    assert time.monotonic() - t0 < 30
    assert (outcome.status, outcome.exit_code, outcome.timed_out) == ("timeout", 0, True)
    assert outcome.finalized_by_launcher
    status = json.loads((run_dir / "status.json").read_text())
    assert status["culprit_ranks"] == [0, 1]
    assert all("wall-clock limit of 1 s" in r["error"] for r in status["ranks"])
    run = json.loads((run_dir / "run.json").read_text())
    assert run["run_id"] == spec.run_id and "never started" in run["provenance"]["written_by"]


@pytest.mark.multiproc
def test_a_rank_that_dies_without_status_makes_the_run_crashed(tmp_path):
    run_dir, log = tmp_path / "run", tmp_path / "run.log"
    env = child_env(SCALESTUDY_INJECT_FAULT="exit:rank=1:step=1")
    out = run_launch(["--spec-json", str(spec_file(tmp_path)), "--run-dir", str(run_dir), "--log", str(log)], env=env)
    assert out.returncode == 0, out.stderr  # classified by the launcher: data, the DAG goes on
    assert "status.json written by the launcher" in out.stdout
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "crashed" and status["culprit_ranks"] == [1]
    assert "without writing its status" in status["ranks"][1]["error"]
    assert rawlog.read_run(run_dir).status["status"] == "crashed"
    assert not list(run_dir.glob("rank-*"))


@pytest.mark.multiproc
def test_an_unclassified_harness_error_fails_loudly_and_keeps_the_log(tmp_path):
    run_dir = tmp_path / "raw" / "run"
    env = child_env(SCALESTUDY_INJECT_FAULT="crash:rank=1:step=1")
    out = run_launch(
        ["--spec-json", str(spec_file(tmp_path)), "--run-dir", str(run_dir), "--log", str(tmp_path / "run.log")],
        env=env,
    )
    assert out.returncode == 1
    assert "could not classify" in out.stderr and "ZeroDivisionError: injected fault" in out.stderr
    kept = list((tmp_path / "crashed").glob("run.*"))
    assert len(kept) == 1 and (kept[0] / "status.json").exists()


@pytest.mark.multiproc
def test_launch_a_collectives_benchmark(tmp_path):
    study = load_study("smoke", REPO)
    bench = next(c for c in study.collectives if c.world_size == 2)
    run_dir = tmp_path / bench.run_id
    out = run_launch(
        ["--study", "smoke", "--run-id", bench.run_id, "--run-dir", str(run_dir), "--log", str(tmp_path / "c.log")]
    )
    assert out.returncode == 0, out.stderr + (tmp_path / "c.log").read_text()
    got = rawlog.read_run(run_dir)
    assert got.run["kind"] == "collectives" and got.status["status"] == "ok"
    assert any(r["key"] == "collective" for r in got.records)


def test_what_the_launcher_refuses(tmp_path):
    out = run_launch(["--study", "smoke", "--run-id", "no-such-run", "--run-dir", str(tmp_path / "x")])
    assert out.returncode == 2 and "plans no run 'no-such-run'" in out.stderr
    out = run_launch(["--study", "mlperf", "--run-id", "x"])
    assert out.returncode == 2 and "launch: false" in out.stderr
    with pytest.raises(LaunchError, match="single-node"):
        launch(RunSpec.from_dict({**TINY, "nodes": 2}), tmp_path / "y")
    # a finished run found in the run directory is moved aside, not refused nor deleted:
    # tests/launch/test_integrity_launch.py


def test_job_resources_follow_the_spec():
    cpu = RunSpec.from_dict({**TINY, "procs_per_node": 4})
    r = job_resources(cpu)
    assert (r["threads"], r["nodes"], r["tasks"], r["gpus"]) == (4, 1, 1, 0)
    assert r["runtime"] * 60 > r["time_limit_s"] >= default_time_limit_s(cpu)
    gpu = RunSpec.from_dict(
        {"model": "llama2-7b", "device": "cuda", "nodes": 4, "procs_per_node": 8, "seq_len": 4096, "micro_batch": 2}
    )
    r = job_resources(gpu, time_limit_s=3600)
    assert (r["nodes"], r["tasks"], r["gpus"], r["time_limit_s"]) == (4, 4, 32, 3600)
    assert "--gpus-per-node=8" in r["slurm_extra"] and r["runtime"] >= 60
    assert default_time_limit_s(gpu.replace(measured_iters=500)) > default_time_limit_s(gpu)


def test_cpu_runs_on_one_host_start_without_torchrun(monkeypatch, tmp_path):
    from scalestudy.launch.launcher import launch_command
    from scalestudy.launch.local_workers import LAUNCHER_ENV

    spec = RunSpec(**TINY)
    monkeypatch.delenv(LAUNCHER_ENV, raising=False)
    cmd = launch_command(spec, tmp_path / "s.json", tmp_path / "r")
    assert cmd[1:6] == ["-m", "scalestudy", "workers", "--nproc=2", "--"] and cmd[6] == "train"
    monkeypatch.setenv(LAUNCHER_ENV, "warm")  # the workflow's choice: forked by a warm server
    assert launch_command(spec, tmp_path / "s.json", tmp_path / "r")[1:4] == [
        "-m",
        "scalestudy.launch.warm_workers",
        "--nproc=2",
    ]
    assert (
        launch_command(spec.replace(device="cuda"), tmp_path / "s.json", tmp_path / "r")[2] == "torch.distributed.run"
    )
    monkeypatch.setenv(LAUNCHER_ENV, "torchrun")
    assert launch_command(spec, tmp_path / "s.json", tmp_path / "r")[1:3] == ["-m", "torch.distributed.run"]
    monkeypatch.setenv(LAUNCHER_ENV, "mpirun")
    with pytest.raises(ValueError, match="expected local, warm or torchrun"):
        launch_command(spec, tmp_path / "s.json", tmp_path / "r")
