"""Each status is written and read back; classified failures exit 0, others fail loudly.

The ranks are forked from a warm server that imported torch once (scalestudy.launch.warm_workers,
the workflow's way for one-host CPU runs); a rank that dies is tested under each way a run's ranks
start: local_workers (the launcher's own one-host start), torchrun (GPU and SLURM runs) and a warm
server."""

import json

import pytest
from conftest import child_env, local_workers, status_of, torchrun, warm_workers

from scalestudy.measure import rawlog

pytestmark = pytest.mark.multiproc

ARGS = [
    "train",
    "--precision",
    "fp32",
    "--n-layers",
    "2",
    "--seq-len",
    "16",
    "--procs-per-node",
    "2",
    "--warmup-iters",
    "1",
    "--measured-iters",
    "3",
    "--quiet",
]


def launch(tmp_path, fault=None, extra=(), nproc=2, starter=warm_workers):
    d = tmp_path / "run"
    env = child_env(SCALESTUDY_INJECT_FAULT=fault) if fault else child_env()
    res = starter(nproc, ARGS + list(extra) + ["--run-dir", str(d)], env=env)
    return d, res


@pytest.mark.parametrize(
    "fault,status,culprits",
    [
        ("oom:rank=1:step=2", "oom", [1]),
        ("timeout:step=1", "timeout", [0, 1]),
        ("comm_error:rank=0:step=1", "comm_error", [0]),
    ],
)
def test_classified_failure_is_data(tmp_path, fault, status, culprits):
    d, res = launch(tmp_path, fault)
    assert res.returncode == 0, res.stderr[-2000:]
    st = status_of(d)
    assert st["status"] == status
    assert set(culprits) <= set(st["culprit_ranks"])
    assert "injected fault" in st["error"]
    run = rawlog.read_run(d)
    assert any(r["key"] == "error" for r in run.records)


def test_unclassified_error_is_recorded_and_fails_loudly(tmp_path):
    d, res = launch(tmp_path, "crash:rank=1:step=1")
    assert res.returncode != 0
    st = status_of(d)
    assert st["status"] == "crashed" and st["culprit_ranks"] == [1]
    assert "ZeroDivisionError" in st["error"]


@pytest.mark.parametrize("starter", [local_workers, torchrun, warm_workers], ids=["local_workers", "torchrun", "warm"])
def test_dead_process_leaves_no_complete_directory(tmp_path, starter):
    d, res = launch(tmp_path, "exit:rank=1:step=1", starter=starter)
    assert res.returncode != 0
    assert not (d / "status.json").exists()
    with pytest.raises(rawlog.IncompleteRunError):
        rawlog.read_run(d)
    # what the ranks wrote before dying is kept
    assert (d / "rank-00000.jsonl").exists() and (d / "rank-00001.jsonl").read_text()
    # a rerun into the same directory moves the unfinished one aside rather than mixing them
    d2, res = launch(tmp_path)
    assert res.returncode == 0
    assert rawlog.read_run(d2).status["status"] == "ok"
    assert list(tmp_path.glob("run.incomplete-*"))


def test_world_size_mismatch_is_invalid_config(tmp_path):
    d, res = launch(tmp_path, extra=["--procs-per-node", "4"])
    assert res.returncode == 0, res.stderr[-2000:]
    st = status_of(d)
    assert st["status"] == "invalid_config" and "processes" in st["error"]


def test_time_limit_gives_timeout(tmp_path):
    d, res = launch(tmp_path, extra=["--measured-iters", "100000", "--time-limit-s", "3"])
    assert res.returncode == 0, res.stderr[-2000:]
    assert status_of(d)["status"] == "timeout"


def test_finished_run_is_not_overwritten(tmp_path):
    d, res = launch(tmp_path)
    assert res.returncode == 0
    before = (d / "status.json").read_text()
    _, res = launch(tmp_path)
    assert res.returncode != 0 and "already holds a finished run" in res.stdout + res.stderr
    assert (d / "status.json").read_text() == before


def test_invalid_spec_on_the_command_line_names_the_field():
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "scalestudy", "train", "--tp", "3", "--procs-per-node", "3"],
        capture_output=True,
        text=True,
        env=child_env(),
    )
    assert res.returncode == 2 and "tp:" in res.stderr and "heads" in res.stderr


def test_ok_run_has_complete_raw_log(tmp_path):
    d, res = launch(tmp_path)
    assert res.returncode == 0
    run = rawlog.read_run(d)
    assert run.status["status"] == "ok" and run.run["kind"] == "train"
    its = list(run.iterations())
    assert len(its) == 2 * 4
    assert {r["value"]["phase"] for r in its} == {"warmup", "measured"}
    prov = run.run["provenance"]
    for key in ("package", "python", "torch", "hosts", "devices", "environment", "command", "slurm"):
        assert key in prov
    assert prov["devices"]["count"] == 2
    assert json.loads((d / "run.json").read_text())["end_time_unix"] > 0


def test_a_classified_failure_releases_its_gloo_group(tmp_path, monkeypatch):
    """Left to the interpreter's exit, a gloo group's worker threads can abort the process
    (std::terminate) and turn a classified failure into a crash; the failure path destroys it."""
    import torch
    import torch.distributed as dist

    from scalestudy.harness import faults
    from scalestudy.harness.run_start import RunContext, _free_port

    monkeypatch.setattr(faults, "ignore_sigterm", lambda: None)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        run = RunContext(
            spec=None,
            run_dir=tmp_path,
            rank=0,
            world=1,
            device=torch.device("cpu"),
            log=rawlog.RankLog(tmp_path, 0, "r"),
            injector=faults.FaultInjector(0, ""),
            facts=[],
        )
        err = torch.distributed.DistNetworkError("injected fault: Connection closed by peer")
        assert run.fail(err, quiet=True) == "comm_error"
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
