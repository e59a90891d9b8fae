"""The cost of a study before it is submitted (scalestudy.launch.cost), its budget, and `scalestudy status`."""

import json
import time

import pytest
import yaml
from conftest import REPO

from scalestudy.cli import main
from scalestudy.launch.cost import BudgetError, budget_of, check_budget, format_cost, study_cost, study_status
from scalestudy.measure import rawlog
from scalestudy.spec.site import Site, load_site
from scalestudy.spec.studies import load_study, study_from_dict


def test_the_paper_study_by_size_at_the_requested_limits():
    cost = study_cost(load_study("paper", REPO), Site(), expected=False)
    assert cost.unit == "GPU-hours" and cost.jobs == 393  # 384 training runs + 9 collectives jobs
    by_size = {r.devices: r.jobs for r in cost.rows}
    assert by_size == {8: 22, 16: 46, 32: 55, 64: 40, 128: 49, 256: 85, 512: 37, 1024: 22, 2048: 37}
    assert round(cost.requested_h) == 82751
    # one 2048-GPU job: 2048 GPUs x its SLURM time limit in minutes
    assert max(r.requested_h for r in cost.rows) == pytest.approx(53725.9, abs=0.1)


def test_the_paper_study_expected_from_the_performance_model():
    cost = study_cost(load_study("paper", REPO), Site())
    assert "h100-paper" in cost.expected_from
    # the model's, not a measurement: 11,661 with the scale-out model of issue 13, 9,712 with NCCL's latencies (issue 49)
    assert 8000 < cost.expected_h < 12000
    text = format_cost(cost)
    assert text.startswith("cost of study paper: 393 jobs, 82,751 GPU-hours at the requested time limits, ~")
    assert "   256   2048    37 " in text


def test_a_plan_over_budget_is_refused_naming_the_numbers_and_the_fix():
    study = load_study("paper", REPO)
    cost = study_cost(study, Site(), expected=False)
    budget, source = budget_of(study, Site(gpu_hours_budget=50000))
    assert (budget, source) == (50000, "gpu_hours_budget in defaults")
    with pytest.raises(BudgetError) as e:
        check_budget(cost, budget, source)
    msg = str(e.value)
    assert "82,751 GPU-hours" in msg and "393 jobs" in msg and "50,000 GPU-hours" in msg
    assert "raise gpu_hours_budget" in msg
    check_budget(cost, 90000, "x")  # under budget: nothing
    assert budget_of(study, Site(gpu_hours_budget=1), 2.0) == (2.0, "--config gpu_hours_budget")


def test_a_study_budget_wins_over_the_site_and_a_cpu_study_has_none(tmp_path, capsys):
    data = yaml.safe_load((REPO / "workflow/studies/paper.yaml").read_text())
    data["gpu_hours_budget"] = 1000
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["study", "--study", str(path), "--no-expected"]) == 4
    out = capsys.readouterr()
    assert "budget: 1,000 GPU-hours (gpu_hours_budget in" in out.out
    assert "over its budget of 1,000 GPU-hours" in out.err
    smoke = study_cost(load_study("smoke", REPO), Site(), expected=False)
    assert smoke.unit == "CPU process-hours"
    check_budget(smoke, 0.001, "x")  # CPU process-hours are not GPU-hours


def _finished(run_dir, status, seconds, world=1):
    run_dir.mkdir(parents=True)
    (run_dir / rawlog.RUN_FILE).write_text(json.dumps({"start_time_unix": 1000.0, "end_time_unix": 1000.0 + seconds}))
    (run_dir / rawlog.STATUS_FILE).write_text(json.dumps({"status": status}))


def test_status_of_a_study_in_flight(tmp_path, capsys):
    data = yaml.safe_load((REPO / "workflow/studies/smoke.yaml").read_text())
    study = study_from_dict("smoke", data, root=tmp_path)
    ids = [r.run_id for r in study.runs if r.spec.world_size == 1]
    _finished(study.raw_dir / ids[0], "ok", 3600)
    _finished(study.raw_dir / ids[1], "oom", 1800)
    attempt = tmp_path / "data/smoke/attempts" / f"{ids[2]}.attempt1.pid1.20260101T000000"
    attempt.mkdir(parents=True)
    (attempt / rawlog.RUN_FILE).write_text(json.dumps({"start_time_unix": time.time() - 360}))
    (tmp_path / "data/smoke/crashed" / f"{ids[3]}.20260101T000000").mkdir(parents=True)
    st = study_status(study, load_site(root=tmp_path))
    assert st.done == {"ok": 1, "oom": 1} and st.running == [ids[2]] and st.failed == [ids[3]]
    assert st.left == st.planned - 4
    assert st.spent_h == pytest.approx(1.5 + 0.1, abs=0.01)
    (tmp_path / "workflow/studies").mkdir(parents=True)
    (tmp_path / "workflow/studies/smoke.yaml").write_text(yaml.safe_dump(data))
    assert main(["status", "--study", "smoke", "--root", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "  done         2  (1 ok, 1 oom)" in text and "  running      1" in text and "  failed       1" in text


def test_status_asks_squeue_for_the_runs_jobs(tmp_path, monkeypatch, capsys):
    import os

    from scalestudy.launch.slurm_queue import job_comment

    data = yaml.safe_load((REPO / "workflow/studies/smoke.yaml").read_text())
    study = study_from_dict("smoke", data, root=tmp_path)
    (tmp_path / "workflow/studies").mkdir(parents=True)
    (tmp_path / "workflow/studies/smoke.yaml").write_text(yaml.safe_dump(data))
    ids, coll = [r.run_id for r in study.runs], study.collectives[0].run_id
    queue = [
        f"101|PENDING|{job_comment('run', 'smoke', ids[0])}",
        f"102|RUNNING|{job_comment('run', 'smoke', ids[1])}",
        f"103|SUSPENDED|{job_comment('collectives', 'smoke', coll)}",
        f"104|RUNNING|{job_comment('run', 'smoke-other', ids[2])}",  # another study's job
        "105|PENDING|rule_aggregate_wildcards_smoke",
    ]  # not a run
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "squeue"
    fake.write_text(
        '#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\n'
        "[ -n \"$FAIL\" ] && { echo 'squeue: error: slurm_load_jobs: Unable to contact slurm controller' >&2; "
        "exit 1; }\ncat <<'END'\n" + "\n".join(queue) + "\nEND\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert main(["status", "--study", "smoke", "--root", str(tmp_path), "--json"]) == 0
    q = json.loads(capsys.readouterr().out)["queue"]
    assert q == {"pending": [ids[0]], "running": [ids[1]], "other": {"SUSPENDED": [coll]}, "error": None}
    assert "--format=%i|%T|%k" in (bin_dir / "args").read_text() and "--user=" in (bin_dir / "args").read_text()
    assert main(["status", "--study", "smoke", "--root", str(tmp_path)]) == 0
    assert "  squeue       1 pending, 1 running, 1 suspended  (SLURM jobs of its runs)" in capsys.readouterr().out
    monkeypatch.setenv("FAIL", "1")
    assert main(["status", "--study", "smoke", "--root", str(tmp_path)]) == 0  # the directories still tell
    assert "Unable to contact slurm controller" in capsys.readouterr().out
