"""Warm workers (scalestudy.launch.warm_workers): a run forked from a server that imported torch once keeps
the rules of run_guard - its processes carry the run's token in /proc/PID/environ, the server's
own token is no run's, a finished workflow retires the server."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, child_env

from scalestudy.launch import run_guard
from scalestudy.launch.local_workers import LAUNCHER_ENV
from scalestudy.launch.warm_workers import IDLE_ENV, placeholders, server_key, stop_servers
from scalestudy.measure import rawlog

# a process started with the placeholder token stamps a run's token, then forks a child; both sleep
STAMP = """
import os, sys, time
from scalestudy.launch.warm_workers import stamp_run
stamp_run({"SCALESTUDY_RUN_TOKEN": sys.argv[1], "SCALESTUDY_LAUNCHER_PID": "4242"})
if os.fork() == 0:
    time.sleep(30)
    os._exit(0)
print("stamped", flush=True)
time.sleep(30)
"""


def test_a_stamped_identity_is_what_run_guard_sees_and_the_placeholder_is_no_run():
    token = run_guard.new_token()
    env = child_env(**placeholders())
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    stamped = subprocess.Popen([sys.executable, "-c", STAMP, token], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert stamped.stdout.readline().strip() == "stamped"
        pids = run_guard.processes_with_token(token)
        assert stamped.pid in pids and len(pids) == 2  # the process and its forked child
        environ = Path(f"/proc/{pids[1]}/environ").read_bytes().split(b"\0")
        assert b"SCALESTUDY_LAUNCHER_PID=4242" in environ and b"SCALESTUDY_LAUNCHER_START=" in environ
        assert idle.pid not in run_guard.foreign_run_processes(None)  # the placeholder belongs to no run
        assert set(run_guard.end_processes(token)) == set(pids)
        assert run_guard.processes_with_token(token) == []
    finally:
        for p in (idle, stamped):
            p.kill()
            p.wait()


def test_the_server_key_ignores_the_run_identity_but_not_the_environment():
    env = {"PATH": "/usr/bin", "OMP_NUM_THREADS": "1"}
    run_a = {**env, run_guard.TOKEN_ENV: "a" * 32, run_guard.LAUNCHER_PID_ENV: "1", "OLDPWD": "/x"}
    run_b = {**env, run_guard.TOKEN_ENV: "b" * 32, run_guard.LAUNCHER_PID_ENV: "2", "OLDPWD": "/y"}
    assert server_key(run_a) == server_key(run_b)
    assert server_key({**run_a, "MKL_NUM_THREADS": "4"}) != server_key(run_a)
    # the fault switch is read when a run starts (FaultInjector), not by an import
    from scalestudy.harness.faults import INJECT_ENV

    assert server_key({**run_a, INJECT_ENV: "oom:rank=1"}) == server_key(run_a)


def _server_pids(lock_dir: Path) -> list[int]:
    return [
        int(line.split()[3])
        for log in lock_dir.glob("warm-*.log")
        for line in log.read_text().splitlines()
        if line.startswith("[scalestudy warm_workers] pid ")
    ]


@pytest.mark.multiproc
@pytest.mark.parametrize("wing", ["harness/train.py", "analysis/aggregate.py", "spec/run.py", "cli/train.py"])
def test_a_changed_source_in_any_wing_changes_the_server_key(wing):
    # a server imported the whole package: a change to any of its files must start a new one
    import scalestudy

    f = Path(scalestudy.__file__).resolve().parent / wing
    before, st = server_key({}), f.stat()
    try:
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        assert server_key({}) != before
    finally:
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert server_key({}) == before


def test_two_launches_fork_from_one_server_which_the_workflow_retires(tmp_path):
    # the server's socket lives in the lock directory; this one's path is longer than a unix
    # socket's address can hold, so the server binds and the launchers connect through /proc/self/fd
    lock_dir = tmp_path / "locks" / ("long-" * 20)
    lock_dir.mkdir(parents=True)
    assert len(str(lock_dir / f"warm-{'0' * 16}.sock")) > 108
    env = child_env(**{LAUNCHER_ENV: "warm", IDLE_ENV: "60", run_guard.LOCK_DIR_ENV: str(lock_dir)})
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps(
            {
                "model": "tiny",
                "device": "cpu",
                "precision": "fp32",
                "procs_per_node": 2,
                "seq_len": 32,
                "n_layers": 2,
                "warmup_iters": 1,
                "measured_iters": 1,
            }
        )
    )
    for n in (1, 2):
        run_dir, log = tmp_path / f"run{n}", tmp_path / f"run{n}.log"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "scalestudy",
                "launch",
                "--spec-json",
                str(spec),
                "--run-dir",
                str(run_dir),
                "--log",
                str(log),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        text = log.read_text()
        assert out.returncode == 0, out.stderr + text
        assert (
            "-m scalestudy.launch.warm_workers --nproc=2 -- train" in text and "starting the workers here" not in text
        )
        got = rawlog.read_run(run_dir)
        assert got.status["status"] == "ok", got.status
        assert not (set(got.status["load"]["other_run_processes"]) & set(_server_pids(lock_dir))), got.status["load"]
    servers = _server_pids(lock_dir)
    assert len(servers) == 1  # the second run reused the first one's server
    os.kill(servers[0], 0)  # idle, alive, and no run's process:
    assert servers[0] not in run_guard.foreign_run_processes(None)
    assert stop_servers({run_guard.LOCK_DIR_ENV: str(lock_dir)})
    deadline = time.monotonic() + 20
    while (
        time.monotonic() < deadline
        and run_guard.start_ticks(servers[0]) is not None
        and "Z" not in Path(f"/proc/{servers[0]}/stat").read_text().rsplit(")", 1)[1].split()[0]
    ):
        time.sleep(0.2)
    alive = (
        run_guard.start_ticks(servers[0]) is not None
        and "Z" not in Path(f"/proc/{servers[0]}/stat").read_text().rsplit(")", 1)[1].split()[0]
    )
    if alive:
        os.kill(servers[0], signal.SIGKILL)
    assert not alive, "the retired server did not end"
