"""megatron-core's tensor-parallel layers and process groups on CPU (gloo), against the torch
backend's: ColumnParallelLinear -> RowParallelLinear at TP=2 against DTensor ColwiseParallel ->
RowwiseParallel and against nn.Linear with the same weights, forward and backward; and the groups
that parallel_state builds from mapping.plan against the torch backend's DeviceMesh, rank by rank.
Each case runs tests/harness/megatron_worker.py on ranks forked from one process that imported torch
and megatron-core once (tests/harness/forked_ranks.py: torchrun's environment, the package's
local_workers start), not under torchrun, whose every rank imports them anew."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import child_env
from scalestudy.harness.megatron_backend import megatron_core_version

pytestmark = [
    pytest.mark.multiproc,
    pytest.mark.skipif(
        megatron_core_version() is None, reason="megatron-core is not installed (pip install 'scalestudy[megatron]')"
    ),
]

WORKER = Path(__file__).with_name("megatron_worker.py")
FORKED_RANKS = Path(__file__).with_name("forked_ranks.py")


def run_worker(cases: list[str], nproc: int, out: Path, timeout: float = 240) -> dict[str, list[dict]]:
    """The cases in one start of `nproc` forked ranks (one torch and megatron import for all):
    each case's result, rank by rank."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(FORKED_RANKS), f"--nproc={nproc}", str(WORKER), ",".join(cases), str(out)]
    res = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    return {c: [json.loads((out / c / f"rank-{r}.json").read_text()) for r in range(nproc)] for c in cases}


def assert_close(checks: dict, rel: float) -> None:
    bad = {k: v for k, v in checks.items() if v[0] > rel * max(v[1], 1e-12)}
    assert not bad, bad


def test_tensor_parallel_layers_match_dtensor_and_linear(tmp_path):
    ranks = run_worker(["tp_layers"], 2, tmp_path)["tp_layers"]
    for r in ranks:
        assert len(r["checks"]) == 8
        assert_close(r["checks"], rel=1e-6)


def test_parallel_state_groups_match_the_torch_mesh(tmp_path):
    ranks = run_worker(["parallel_state"], 4, tmp_path)["parallel_state"]
    for r in ranks:
        for name, layout in r["layouts"].items():
            assert layout["got"] == layout["want"], (r["rank"], name, layout)
    hsdp = ranks[0]["layouts"]["hsdp"]
    assert hsdp["parallel"]["num_distributed_optimizer_instances"] == 2
    assert hsdp["got"]["intra_partial_dp"] == [0, 1] and hsdp["got"]["inter_partial_dp"] == [0, 2]
