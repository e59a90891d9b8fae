"""Fake communication (spec `comm: fake`): one process computes what one rank of a real
multi-process run computes, on the same shapes, and holds the same parameter and optimizer
memory. Real: 4 gloo processes (forked from one that imported torch and the harness once,
tests/harness/forked_ranks.py, with torchrun's environment); fake: one process a rank
(tests/harness/rank_share_worker.py)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import child_env

pytestmark = pytest.mark.multiproc

WORKER = str(Path(__file__).with_name("rank_share_worker.py"))
FORKED_RANKS = str(Path(__file__).with_name("forked_ranks.py"))
sys.path.insert(0, str(Path(__file__).parent))
from rank_share_worker import CASES  # noqa: E402


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("rank_share")
    env = child_env()
    real = subprocess.Popen(
        [sys.executable, FORKED_RANKS, "--nproc=4", WORKER, "real", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    fake = subprocess.run(
        [sys.executable, WORKER, "fake", str(out)], env=env, capture_output=True, text=True, timeout=300
    )
    real_out, _ = real.communicate(timeout=300)
    assert fake.returncode == 0, fake.stdout[-3000:] + fake.stderr[-3000:]
    assert real.returncode == 0, real_out[-3000:]
    return out


def _load(out: Path, mode: str, case: str, rank: int) -> dict:
    return json.loads((out / mode / f"{case}-rank-{rank}.json").read_text())


@pytest.mark.parametrize("case,rank", [(c, r) for c, (_, ranks) in CASES.items() for r in ranks])
def test_fake_rank_is_that_rank_of_the_real_run(records, case, rank):
    fake, real = _load(records, "fake", case, rank), _load(records, "real", case, rank)
    assert fake["params"] == real["params"]
    assert fake["calls"] == real["calls"]  # every module's input and output local shapes, counted
    assert fake["bytes"] == real["bytes"]


def test_pipeline_stages_differ(records):
    """The comparison can fail: the first and the last stage hold and compute different things."""
    first, last = _load(records, "real", "pp-1f1b", 0), _load(records, "real", "pp-1f1b", 3)
    assert first["params"] != last["params"] and first["calls"] != last["calls"]
    assert _load(records, "fake", "pp-1f1b", 0)["calls"] != last["calls"]


def test_fill_wrappers_write_real_looking_outputs(records):
    fills = json.loads((records / "fake" / "fills.json").read_text())
    assert fills["wrapped"] and all(fills["checks"].values()), fills
