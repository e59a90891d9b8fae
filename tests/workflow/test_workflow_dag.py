"""The Snakemake workflow plans every study without running anything, lints clean, and refuses an
invalid study at once, naming the field."""

import functools
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import child_env, snakemake_cmd

from scalestudy.spec.studies import FIGURES, load_study

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.workflow


def snakemake(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*snakemake_cmd(), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=child_env()
    )


@functools.cache
def paper_dry_run() -> tuple[subprocess.CompletedProcess, float]:
    """`snakemake -n --forceall` of the paper study (every job, done or not), planned once for the
    tests that read its plan, and the seconds it took."""
    t0 = time.monotonic()
    out = snakemake("-n", "--forceall", "--cores", "2", "--config", "study=paper")
    return out, time.monotonic() - t0


def job_counts(output: str) -> dict[str, int]:
    table = output[output.index("Job stats:") :]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


@pytest.mark.parametrize("study", ["smoke", "node", "paper"])
def test_dry_run_plans_every_job_of_the_study(study):
    if study == "paper":
        out, took = paper_dry_run()
    else:
        t0 = time.monotonic()
        out = snakemake("-n", "--forceall", "--cores", "2", "--config", f"study={study}")  # every job, done or not
        took = time.monotonic() - t0
    assert out.returncode == 0, out.stderr + out.stdout
    s = load_study(study, REPO)
    counts = job_counts(out.stdout)
    assert counts["run"] == len(s.runs)
    assert counts.get("collectives", 0) == len(s.collectives)
    assert counts["aggregate"] == counts["claims"] == counts["all"] == 1
    assert {k for k in counts if k.startswith("figure_")} == {f"figure_{f}" for f in s.figures}
    assert counts["total"] == len(s.runs) + len(s.collectives) + len(s.figures) + 3
    assert took < 60, f"planning {study} took {took:.0f} s"


def test_dry_run_uses_the_run_jobs_resources():
    out, _ = paper_dry_run()
    assert out.returncode == 0, out.stderr
    assert re.search(
        r"resources: .*nodes=256, tasks=256, gpus=2048, .*slurm_extra=--ntasks-per-node=1 "
        r"--gpus-per-node=8",
        out.stdout,
    )
    assert "scalestudy launch --study paper --run-id llama2-7b-n256x8-" in out.stdout


def test_dry_run_prints_the_cost_and_refuses_a_plan_over_budget():
    out = snakemake("-n", "--cores", "2", "--config", "study=paper", "gpu_hours_budget=5000")
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "cost of study paper: 393 jobs, 82,751 GPU-hours at the requested time limits" in text
    # the expected figure moves with the performance model's calibration; the requested one does not
    assert re.search(
        r"study paper asks for 82,751 GPU-hours at the requested time limits \(~\d{1,2},\d{3} expected\) "
        r"for 393 jobs, over its budget of 5,000 GPU-hours \(--config gpu_hours_budget\)",
        text,
    ), text
    assert "Job stats:" not in text  # refused before planning a single job


def test_a_device_time_budget_plans_the_first_runs_that_fit_and_no_figure():
    out = snakemake("-n", "--cores", "2", "--config", "study=paper", "budget_gpu_s=300000")
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert re.search(r"budget 300,000 GPU-seconds for study paper: 0 runs done, \d+ to run now", text), text
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", text[text.index("Job stats:") :], re.M))
    assert int(counts["run"]) >= 1 and not any(k.startswith("figure_") for k in counts), counts
    out = snakemake("-n", "--cores", "2", "--config", "study=paper", "budget_gpu_s=10")
    assert out.returncode != 0 and "budget_gpu_s: a budget of 10 GPU-seconds cannot start" in out.stdout + out.stderr


def test_lint_is_clean():
    out = snakemake("--lint")
    assert out.returncode == 0, out.stderr + out.stdout
    text = out.stdout + out.stderr
    assert "Lints for" not in text and "Congratulations, your workflow is in a good condition!" in text


def test_one_figure_is_a_target_of_its_own():
    out = snakemake("-n", "--cores", "1", "figures/smoke/weak_scaling.pdf", "--forcerun", "figure_weak_scaling")
    assert out.returncode == 0, out.stderr
    counts = job_counts(out.stdout)
    assert counts["figure_weak_scaling"] == 1 and "claims" not in counts and "all" not in counts


def test_an_invalid_study_fails_at_once_naming_the_field(tmp_path):
    study = yaml.safe_load((REPO / "workflow" / "studies" / "smoke.yaml").read_text())
    study["experiments"][0]["grid"]["procs_per_node"] = [1, "two"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(study))
    t0 = time.monotonic()
    out = snakemake("-n", "--config", f"study={bad}")
    assert out.returncode != 0
    assert time.monotonic() - t0 < 30
    assert (
        "study 'bad': experiments[0] (weak_scaling).grid.procs_per_node[1]: 'two' is not of type 'integer'"
        in out.stderr + out.stdout
    )

    study = yaml.safe_load((REPO / "workflow" / "studies" / "smoke.yaml").read_text())
    study["defaults"]["model"] = "llama-3b"
    bad.write_text(yaml.safe_dump(study))
    out = snakemake("-n", "--config", f"study={bad}")
    assert out.returncode != 0
    assert (
        "study 'bad', experiment 'weak_scaling' (procs_per_node=1): model: unknown model 'llama-3b'"
        in out.stderr + out.stdout
    )


def test_an_unknown_config_key_is_refused():
    out = snakemake("-n", "--config", "stuyd=paper")
    assert out.returncode != 0 and "stuyd" in out.stderr + out.stdout


def test_every_figure_caption_comes_from_its_description_and_names_runs_and_hardware():
    from scalestudy.analysis.figures import caption

    report = REPO / "workflow" / "report"
    assert (report / "figure.rst").read_text().strip() == "{{ snakemake.params.caption }}"
    study = load_study("paper-model", REPO)
    for figure in FIGURES:
        text = caption(figure, study, runs="RUNS")
        assert "Runs: RUNS." in text and study.hardware.split(" (")[0] in text, figure
        assert "PREDICTED by the performance model" in text and "Measured" not in text, figure
        assert "seed" not in text.lower(), figure  # a prediction has a band, never seeds
        assert f"--forcerun figure_{figure}" in text, figure
    measured = caption("power", load_study("h200-reference", REPO))
    assert "GPU board power only" in measured and "Measured" in measured and "PREDICTED" not in measured
    assert (report / "claims.rst").exists()
    for kind in ("measured", "predicted", "imported", "rank-share"):  # the home page of each kind of study
        assert (report / f"{kind}.rst").exists(), kind


def test_the_workflow_environment_lists_the_package_dependencies():
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    env = yaml.safe_load((REPO / "workflow" / "envs" / "scalestudy.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert sorted(p.replace(" ", "") for p in pip) == sorted(d.replace(" ", "") for d in deps)


def test_a_gpu_study_whose_runs_are_committed_plans_no_run_and_one_that_is_never_launched_none_either():
    out = snakemake("-n", "--cores", "1", "--config", "study=h200-reference")
    assert out.returncode == 0, out.stderr
    counts = job_counts(out.stdout) if "Job stats:" in out.stdout else {}
    assert "run" not in counts and "collectives" not in counts
    out = snakemake("-n", "--forceall", "--cores", "1", "--config", "study=mlperf")
    assert out.returncode == 0, out.stderr
    counts = job_counts(out.stdout)
    assert "run" not in counts and "collectives" not in counts and counts["aggregate"] == 1


def test_the_report_home_page_of_a_predicted_study_says_predicted_and_never_seeds():
    text = (REPO / "workflow" / "report" / "predicted.rst").read_text()
    assert "**predicted**" in text and "seed" not in text.lower()


def test_a_metrics_sink_whose_package_is_missing_is_refused_when_the_workflow_starts(tmp_path):
    """Not by each job at run time (three tries each): one sentence with the README's install words
    before anything runs. The package is hidden from the workflow's Python by a sitecustomize."""
    data = yaml.safe_load((REPO / "workflow" / "studies" / "smoke.yaml").read_text())
    path = tmp_path / "smoke-sink.yaml"
    path.write_text(yaml.safe_dump({**data, "metrics_sink": {"kind": "tensorboard"}}))
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import importlib.util\n_find = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'tensorboard' else _find(name, *a)\n"
    )
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(hide), *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run(
        [*snakemake_cmd(), "-n", "--config", f"study={path}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode != 0
    assert (
        "study 'smoke-sink': metrics_sink tensorboard needs the tensorboard package, which is not installed: "
        'pip install "scalestudy[tensorboard]"'
    ) in out.stderr + out.stdout, out.stdout[-2000:]
