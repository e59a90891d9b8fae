"""A study's missing runs launched within a device-time budget, in the study's order, a later call
going on where the budget stopped (scalestudy.launch.budget, `scalestudy launch --budget-gpu-s`)."""

import subprocess
import sys

import pytest
import yaml
from conftest import REPO, child_env

from scalestudy.launch.budget import BudgetTooSmall, plan_budget
from scalestudy.measure import rawlog
from scalestudy.spec.studies import load_study

FIVE = {
    "description": "five one-process runs of the tiny model, one a seed",
    "hardware": "CPU, one process",
    "seeds": [0, 1, 2, 3, 4],
    "time_limit_s": 60,
    "defaults": {
        "model": "tiny",
        "n_layers": 2,
        "device": "cpu",
        "precision": "fp32",
        "seq_len": 32,
        "warmup_iters": 1,
        "measured_iters": 1,
    },
    "experiments": [{"name": "weak_scaling", "set": {"procs_per_node": 1}}],
    "figures": ["weak_scaling"],
}


@pytest.fixture
def five(tmp_path):
    (tmp_path / "workflow/studies").mkdir(parents=True)
    (tmp_path / "workflow/studies/five.yaml").write_text(yaml.safe_dump(FIVE))
    return tmp_path, load_study("five", tmp_path)


def finish(study, run_id):
    d = study.raw_dir / run_id
    d.mkdir(parents=True)
    (d / rawlog.STATUS_FILE).write_text("{}")


def test_a_budget_takes_the_missing_runs_in_order_up_to_the_first_that_does_not_fit(five):
    _, study = five
    ids = [r.run_id for r in study.runs]
    plan = plan_budget(study, 190)
    assert [r.run_id for r in plan.chosen] == ids[:3] and [r.run_id for r in plan.left] == ids[3:]
    assert plan.charged_s == 180 and plan.unit == "CPU process-seconds"
    finish(study, ids[0])
    finish(study, ids[2])
    plan = plan_budget(study, 130)
    assert plan.done == (ids[0], ids[2])
    assert [r.run_id for r in plan.chosen] == [ids[1], ids[3]] and [r.run_id for r in plan.left] == [ids[4]]
    assert "2 runs done, 2 to run now" in plan.describe()


def test_a_budget_that_cannot_start_the_next_run_is_refused_naming_it(five):
    _, study = five
    with pytest.raises(BudgetTooSmall, match=f"cannot start {study.runs[0].run_id}.*1 devices x 60 s"):
        plan_budget(study, 59)
    with pytest.raises(BudgetTooSmall, match="positive"):
        plan_budget(study, 0)
    for r in study.runs:
        finish(study, r.run_id)
    assert plan_budget(study, 1).chosen == ()  # nothing missing: nothing to refuse


def test_two_calls_with_a_budget_make_a_five_run_study(five):
    root, study = five

    def launch(budget):
        cmd = [
            sys.executable,
            "-m",
            "scalestudy",
            "launch",
            "--study",
            "five",
            "--root",
            str(root),
            "--budget-gpu-s",
            str(budget),
        ]
        return subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=240)

    finished = lambda: sorted(p.parent.name for p in study.raw_dir.glob(f"*/{rawlog.STATUS_FILE}"))  # noqa: E731
    ids = [r.run_id for r in study.runs]
    out = launch(190)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 runs done, 3 to run now" in out.stdout and "2 left for a later call" in out.stdout
    assert finished() == sorted(ids[:3])
    out = launch(190)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 runs done, 2 to run now" in out.stdout and "0 left" in out.stdout
    assert finished() == sorted(ids)
    for run_id in ids:
        got = rawlog.read_run(study.raw_dir / run_id)
        assert got.status["status"] == "ok" and got.run_id == run_id
