"""A GPU kind and a model added from files (examples/catalog/my-hardware.yaml) reach a study, a run
launched from it (its workers train the file's model, MFU against the study's peak) and the MFU
of a run on that GPU; the site file's catalog and peak too."""

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, child_env

from scalestudy.launch.run_summary import summary_line
from scalestudy.spec import catalog
from scalestudy.spec.catalog import peak_flops
from scalestudy.spec.site import load_site
from scalestudy.spec.studies import load_study

EXAMPLE = "examples/catalog/my-hardware.yaml"


def test_a_study_adds_its_catalog_file(fresh_catalog):
    with pytest.raises(KeyError, match="unknown model 'tiny-wide'"):
        catalog.model("tiny-wide")
    study = load_study("examples/studies/my-gpu.yaml", REPO)
    assert {r.spec.model for r in study.runs} == {"tiny-wide"} and len(study.runs) == 6
    assert os.environ[catalog.ENV_VAR] == str((REPO / EXAMPLE).resolve())  # for the run's workers
    load_study("examples/studies/my-gpu.yaml", REPO)  # loading twice adds nothing twice
    # a run on that GPU gets its MFU from the file's peak (the harness asks peak_flops for the device name)
    peak = peak_flops("NVIDIA RTX 6000 Ada Generation", "bf16")
    assert peak.peak_flops_per_s == 364.2e12 and peak.source == "table"
    assert peak_flops("rtx6000-ada", "fp32").peak_flops_per_s == 91.1e12


def test_the_site_file_adds_a_catalog_and_a_peak(fresh_catalog, tmp_path):
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm/site.yaml").write_text(f"catalog: {REPO / EXAMPLE}\npeak_tflops: 12.5\n")
    (tmp_path / "workflow/studies").mkdir(parents=True)
    text = (
        (REPO / "examples/studies/my-gpu.yaml").read_text().replace("catalog: [examples/catalog/my-hardware.yaml]", "")
    )
    (tmp_path / "workflow/studies/site-gpu.yaml").write_text(text)
    study = load_study("site-gpu", tmp_path)
    assert study.catalog == () and study.runs[0].spec.model == "tiny-wide"
    assert load_site(root=tmp_path).peak_tflops == 12.5


@pytest.mark.multiproc
def test_a_run_of_the_files_model_with_the_studys_peak(fresh_catalog, tmp_path):
    study = load_study("examples/studies/my-model-cpu.yaml", REPO)
    run = next(r for r in study.runs if r.spec.world_size == 1)
    env = child_env()
    env.pop(catalog.ENV_VAR, None)  # the launcher finds the file from the study alone
    run_dir = tmp_path / "raw" / run.run_id
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scalestudy",
            "launch",
            "--study",
            "examples/studies/my-model-cpu.yaml",
            "--run-id",
            run.run_id,
            "--run-dir",
            str(run_dir),
            "--log",
            str(tmp_path / "run.log"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr + (tmp_path / "run.log").read_text()
    peaks = [
        json.loads(line)["value"]
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if '"device_peak"' in line
    ]
    assert peaks and all(p["peak_flops_per_s"] == 0.5e12 and p["source"] == "user" for p in peaks)
    assert json.loads((run_dir / "run.json").read_text())["spec"]["model"] == "tiny-wide"
    line = summary_line(run_dir)
    assert f"[summary] run {run.run_id}: ok | " in line and " | MFU " in line and "no MFU" not in line
