"""Fault injection: no process of a run outlives its record, a run id is launched once at a time,
and a run that shares its host with another run of the package says so (scalestudy.launch.run_guard)."""

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
from scalestudy.measure import rawlog

TINY1 = {
    "model": "tiny",
    "device": "cpu",
    "precision": "fp32",
    "procs_per_node": 1,
    "seq_len": 32,
    "warmup_iters": 1,
    "measured_iters": 100000,
}  # runs until the test stops it


def _env_of(pid: int) -> dict:
    try:
        data = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(item.decode(errors="replace").partition("=")[::2] for item in data.split(b"\0") if b"=" in item)


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def run_processes(launcher_pid: int) -> list[int]:
    """Live processes started for the launch with this pid (torchrun and its workers)."""
    out = []
    for entry in os.listdir("/proc"):
        if (
            entry.isdigit()
            and _env_of(int(entry)).get(run_guard.LAUNCHER_PID_ENV) == str(launcher_pid)
            and _state(int(entry)) not in (None, "Z")
        ):
            out.append(int(entry))
    return out


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


def agent_pid(launcher_pid: int) -> int:
    """What the launcher started: torchrun, or the local-workers parent (CPU runs by default)."""
    pids = [p for p in run_processes(launcher_pid) if _ppid(p) == launcher_pid]
    assert len(pids) == 1, pids
    return pids[0]


def workers(launcher_pid: int) -> list[int]:
    """The training processes: the children of torchrun, of the local-workers parent or of the
    run's parent forked by a warm server (scalestudy.launch.warm_workers)."""
    pids = run_processes(launcher_pid)
    return [p for p in pids if _ppid(p) in pids]


def start_launch(
    tmp_path: Path, name: str, *, lock_dir: Path, env: dict | None = None, **launch_args: str
) -> tuple[subprocess.Popen, Path]:
    spec = tmp_path / f"{name}.json"
    spec.write_text(json.dumps(TINY1))
    run_dir = tmp_path / name
    args = [
        sys.executable,
        "-m",
        "scalestudy",
        "launch",
        "--spec-json",
        str(spec),
        "--run-dir",
        str(run_dir),
        "--log",
        str(tmp_path / f"{name}.log"),
    ]
    for k, v in launch_args.items():
        args += [f"--{k.replace('_', '-')}", v]
    proc = subprocess.Popen(
        args,
        cwd=REPO,
        env=child_env(SCALESTUDY_LOCK_DIR=str(lock_dir), **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, run_dir


def wait_until_training(proc: subprocess.Popen, tmp_path: Path, name: str, timeout: float = 120) -> None:
    """Until the run's worker has logged a measured step."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for f in tmp_path.glob(f".{name}.attempt1.*/rank-00000.jsonl"):
            if '"measured"' in f.read_text():
                return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    raise AssertionError(f"{name} did not start training within {timeout} s")


def wait_gone(launcher_pid: int, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := run_processes(launcher_pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Three long 1-process launches started at once (each with its own lock directory, so that
    they start side by side): one to kill, one whose torchrun to kill (the others start their
    workers with scalestudy.launch.local_workers, the default for CPU runs), one to stop with a hung rank
    (by SIGTERM to the launcher, a scheduler's limit: the launcher's time limit takes the same path,
    SIGTERM to torchrun, then SIGKILL after the grace period, without waiting for a limit that
    would have to cover a slow start on a loaded machine)."""
    tmp = tmp_path_factory.mktemp("faults")
    runs = {}
    for name, env, extra in (
        ("killed", {}, {}),
        ("torchrun", {"SCALESTUDY_LOCAL_LAUNCHER": "torchrun"}, {}),
        ("stopped", {}, {"grace_s": "2"}),
        ("warm", {"SCALESTUDY_LOCAL_LAUNCHER": "warm", "SCALESTUDY_WARM_IDLE_S": "30"}, {}),
    ):
        runs[name] = start_launch(tmp, name, lock_dir=tmp / f"locks-{name}", env=env, **extra)
    for name, (proc, _) in runs.items():
        wait_until_training(proc, tmp, name)
    yield tmp, runs
    for proc, _ in runs.values():
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@pytest.mark.multiproc
def test_kill_9_of_the_launcher_leaves_no_process_and_a_second_launch_is_refused(three_runs):
    tmp, runs = three_runs
    proc, run_dir = runs["killed"]
    # the same run id launched again while the first launch runs: refused at once, naming the holder
    second = subprocess.run(
        [
            sys.executable,
            "-m",
            "scalestudy",
            "launch",
            "--spec-json",
            str(tmp / "killed.json"),
            "--run-dir",
            str(run_dir),
        ],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 2, second.stdout + second.stderr
    assert "being launched already" in second.stderr and f"launcher pid {proc.pid}" in second.stderr
    assert workers(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_gone(proc.pid) == []


@pytest.mark.multiproc
def test_kill_9_of_the_launcher_of_a_warm_run_leaves_no_process_but_the_idle_server(three_runs):
    from scalestudy.launch.warm_workers import stop_servers

    tmp, runs = three_runs
    proc, _ = runs["warm"]
    assert workers(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_gone(proc.pid) == []
    assert stop_servers({run_guard.LOCK_DIR_ENV: str(tmp / "locks-warm")})  # the server, retired, ends by itself


@pytest.mark.multiproc
def test_kill_9_of_torchrun_leaves_no_process_and_the_run_is_crashed(three_runs):
    tmp, runs = three_runs
    proc, run_dir = runs["torchrun"]
    assert workers(proc.pid)
    os.kill(agent_pid(proc.pid), signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert wait_gone(proc.pid, 2.0) == []
    assert proc.returncode == 0, out + err
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "crashed"
    assert rawlog.seal_problem(status) is None and "load" in status


@pytest.mark.multiproc
def test_a_stopped_rank_past_the_time_limit_leaves_no_process(three_runs):
    tmp, runs = three_runs
    proc, run_dir = runs["stopped"]
    (worker,) = workers(proc.pid)
    os.kill(worker, signal.SIGSTOP)
    os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=90)
    assert wait_gone(proc.pid, 2.0) == []
    assert proc.returncode == 0, out + err
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "timeout"
    assert _state(worker) in (None, "Z")  # gone, or dead and not yet reaped


def test_a_second_run_on_the_same_devices_waits_for_the_first(tmp_path):
    env = {run_guard.LOCK_DIR_ENV: str(tmp_path)}
    waited = []
    with run_guard.device_lock(["host-cpu"], "first", env):
        code = (
            "import sys; from scalestudy.launch import run_guard as g\n"
            "with g.device_lock(['host-cpu'], 'second', {'SCALESTUDY_LOCK_DIR': sys.argv[1]},"
            " on_wait=lambda p, h: print('WAIT', h, flush=True)) as l: print('GOT', flush=True)\n"
        )
        second = subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path)], env=child_env(), stdout=subprocess.PIPE, text=True
        )
        line = second.stdout.readline()
        assert line.strip() == "WAIT first", line
        waited.append(second.poll() is None)
    assert second.stdout.readline().strip() == "GOT"
    assert second.wait(timeout=30) == 0 and waited == [True]
    assert run_guard.device_names("cuda", 2, {"CUDA_VISIBLE_DEVICES": "3,1,5"}) == ["cuda-1", "cuda-3"]
    assert run_guard.device_names("cpu", 4, {}) == ["host-cpu"]


def test_a_run_lock_is_held_by_one_launch(tmp_path):
    run_dir = tmp_path / "raw" / "r1"
    with run_guard.run_lock(run_dir, "launcher A"):
        with pytest.raises(run_guard.RunLockedError, match="launcher A"):
            with run_guard.run_lock(run_dir, "launcher B"):
                pass
    with run_guard.run_lock(run_dir, "launcher C"):  # released: free again
        pass
    assert not run_guard.run_lock_path(run_dir).exists()


def test_a_process_of_another_run_makes_the_measurement_contaminated():
    stray = subprocess.Popen(["sleep", "30"], env={**child_env(), run_guard.TOKEN_ENV: "another-run"})
    try:
        watch = run_guard.LoadWatch(token="this-run")
        watch.sample()
        load = watch.record(0.0)
        assert load["contaminated"] and stray.pid in load["other_run_processes"]
        assert "other run" in load["reason"] and load["loadavg_1min_max"] is not None
        assert run_guard.end_processes("another-run") == [stray.pid]
        assert stray.wait(timeout=5) == -signal.SIGKILL
        clean = run_guard.LoadWatch(token="this-run")
        clean.sample()
        assert stray.pid not in clean.record(0.0)["other_run_processes"]
    finally:
        stray.kill()
        stray.wait()


class FakeNvml:
    """pynvml's three calls the watch makes, for GPUs holding these numbers of processes."""

    def __init__(self, counts: dict):
        self.counts = counts

    def nvmlDeviceGetHandleByIndex(self, i):
        return str(i)

    def nvmlDeviceGetHandleByUUID(self, u):
        return u

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [object()] * self.counts[handle]


def test_a_gpu_with_another_process_makes_the_measurement_contaminated():
    watch = run_guard.LoadWatch(token="this-run", gpus=("0", "GPU-abc"), nvml=FakeNvml({"0": 1, "GPU-abc": 2}))
    watch.sample()
    load = watch.record(0.0)
    assert load["gpu_compute_processes_max"] == {"0": 1, "GPU-abc": 2}
    assert load["contaminated"] and "GPU(s) GPU-abc (2 compute processes at once)" in load["reason"]
    alone = run_guard.LoadWatch(token="this-run", gpus=("0",), nvml=FakeNvml({"0": 1}))
    alone.sample()
    assert alone.record(0.0)["gpu_compute_processes_max"] == {"0": 1}
    assert "GPU" not in (alone.record(0.0)["reason"] or "")
    assert run_guard.gpu_ids(2, {"CUDA_VISIBLE_DEVICES": "GPU-x,GPU-y,GPU-z"}) == ["GPU-x", "GPU-y"]
    stray = subprocess.Popen(["sleep", "30"], env={**child_env(), run_guard.TOKEN_ENV: "a-run-on-other-gpus"})
    try:
        alone.sample()
        load = alone.record(0.0)
        assert stray.pid in load["other_run_processes"] and not load["contaminated"]  # recorded, not flagged
    finally:
        stray.kill()
        stray.wait()
