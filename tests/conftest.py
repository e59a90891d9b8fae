import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# the launcher's device locks (scalestudy.launch.run_guard) of this test process: tests that launch runs at
# once do not queue behind runs of other checkouts on this host, nor behind the other pytest-xdist
# worker's (each worker inherits the controller's environment, so the directory is made per process)
_LOCKS_OWNER = "SCALESTUDY_TEST_LOCKS_OWNER"
if "SCALESTUDY_LOCK_DIR" not in os.environ or os.environ.get(_LOCKS_OWNER, str(os.getpid())) != str(os.getpid()):
    os.environ["SCALESTUDY_LOCK_DIR"] = tempfile.mkdtemp(prefix="scalestudy-test-locks-")
    os.environ[_LOCKS_OWNER] = str(os.getpid())
# the runs the tests launch check mechanics, not speed, and pytest-xdist's workers run side by side: their
# foreign CPU share is recorded, not flagged (tests/launch/test_integrity_launch.py sets a threshold itself)
os.environ.setdefault("SCALESTUDY_FOREIGN_CPU_MAX", "off")


def child_env(**extra: str) -> dict:
    env = dict(os.environ)
    # the rules' shell commands call `scalestudy` and `snakemake`: this interpreter's, also when pytest
    # runs without `make test` putting the venv on PATH
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONWARNINGS="ignore")
    env.pop("SCALESTUDY_INJECT_FAULT", None)
    env.pop("PYTEST_CURRENT_TEST", None)  # names the test: would give each test a warm server of its own
    env.update(extra)
    return env


def snakemake_cmd() -> list[str]:
    """This interpreter's `snakemake`, or `python -m snakemake` where the venv has no script."""
    exe = shutil.which("snakemake", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "snakemake"]


def torchrun(
    nproc: int, args: list[str], *, env: dict | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    """`torchrun --standalone --nproc_per_node N -m scalestudy ARGS` in a subprocess."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "-m",
        "scalestudy",
        *args,
    ]
    return subprocess.run(cmd, env=env or child_env(), capture_output=True, text=True, timeout=timeout)


def local_workers(
    nproc: int, args: list[str], *, env: dict | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    """`python -m scalestudy workers --nproc N -- ARGS` in a subprocess: the ranks are forked
    from one parent that imported torch once (what `scalestudy launch` does for one-host CPU runs),
    instead of one torch import per rank under torchrun."""
    from scalestudy.launch.local_workers import command

    cmd = command(nproc, ["scalestudy", *args])
    return subprocess.run(cmd, env=env or child_env(), capture_output=True, text=True, timeout=timeout)


def warm_workers(
    nproc: int, args: list[str], *, env: dict | None = None, timeout: float = 180
) -> subprocess.CompletedProcess:
    """`python -m scalestudy.launch.warm_workers --nproc N -- ARGS` in a subprocess, as a run of its
    own (a fresh run token): the ranks fork from a server of this test process's lock directory
    that imported torch and the harness once, as the workflow's CPU runs do (one server an
    environment; it retires at the session's end). For the tests whose subject is what the ranks
    compute, not how they were started."""
    from scalestudy.launch.run_guard import TOKEN_ENV, new_token
    from scalestudy.launch.warm_workers import command

    env = dict(env or child_env())
    env[TOKEN_ENV] = new_token()
    cmd = command(nproc, ["scalestudy", *args])
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def pytest_sessionfinish(session, exitstatus):
    from scalestudy.launch.warm_workers import stop_servers

    stop_servers()  # this process's lock directory only (SCALESTUDY_LOCK_DIR above)


@pytest.fixture
def fresh_catalog(monkeypatch):
    """The built-in catalog only (no SCALESTUDY_CATALOG files), read anew before and after the test."""
    from scalestudy.spec import catalog

    monkeypatch.delenv(catalog.ENV_VAR, raising=False)
    catalog.reset()
    yield
    catalog.reset()


@pytest.fixture
def run_torchrun():
    return torchrun


def losses_by_step(run_dir: Path) -> list[float]:
    from scalestudy.measure.rawlog import read_run

    run = read_run(run_dir)
    recs = [r for r in run.iterations() if r["metadata"]["rank"] == 0]
    return [r["value"]["loss"] for r in sorted(recs, key=lambda r: r["value"]["step"])]


def status_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "status.json").read_text())


# pytest-xdist: `make test` runs `pytest -n 2`; pyproject.toml adds `--dist loadscope
# --no-loadscope-reorder`: each module's tests go to one worker, so a module-scoped fixture (a
# workflow run, the SLURM cluster, a launched run) is made once. (`--dist loadgroup` does not group
# under pytest 9.2: pytest-xdist#1386.) The modules below start first, longest first by the
# durations of a full run, so that no long one starts last on an otherwise idle worker; the rest
# keep their collection order.
LONGEST_FIRST = (
    "test_slurm_cluster",
    "test_workflow_e2e",
    "test_layouts",
    "test_faults",
    "test_launch",
    "test_workflow_dag",
    "test_analysis_provenance_audit",
    "test_rank_share",
    "test_integrity_launch",
    "test_perfmodel_study",
    "test_integrity_processes",
    "test_analysis_figures",
    "test_figure_layout",
    "test_slurm_launch",
    "test_megatron_tp_layers",
    "test_figure_legibility",
    "test_budget",
    "test_mlperf_import",
    "test_perfmodel_predict",
    "test_megatron_model",
    "test_perfmodel_external",
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        module = item.path.stem
        return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: collection order within a module and among the rest
