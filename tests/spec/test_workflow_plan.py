"""What the workflow asks of the studies (scalestudy.spec.workflow_plan): which studies each kind of
rule matches, and which files the model's rules read."""

import re

from conftest import REPO

from scalestudy.spec.studies import load_study, study_headers
from scalestudy.spec.workflow_plan import model_inputs, studies_with


def test_each_role_matches_its_studies_and_nothing_else():
    headers, _ = study_headers(REPO)
    smoke = load_study("smoke", REPO)
    launched = studies_with("launch", smoke, headers)
    assert re.fullmatch(launched, "smoke") and re.fullmatch(launched, "h200-reference")
    assert not re.fullmatch(launched, "mlperf") and not re.fullmatch(launched, "paper-model")
    assert studies_with("prediction", smoke, headers) == "paper\\-model"
    assert studies_with("model_beside", smoke, headers) == "mlperf"
    assert studies_with("model_beside", smoke, {}) == "(?!)"  # matches no name


def test_a_prediction_reads_its_study_the_clusters_the_calibration_and_the_rank_shares():
    study = load_study("paper-model", REPO)
    files = model_inputs(study, "prediction", load_study("paper-rank", REPO), root=REPO)
    assert files[0] == str(study.source)
    assert "workflow/clusters/h100-paper.yaml" in files
    assert any(f.startswith("data/h200-reference/raw/") and f.endswith("/status.json") for f in files)
    assert files[-2:] == ["data/paper-rank/tables/rank_configs.csv", str(load_study("paper-rank", REPO).source)]
    beside = model_inputs(load_study("mlperf", REPO), "model_beside", root=REPO)
    assert "data/paper-rank/tables/rank_configs.csv" not in beside
    assert any(f.startswith("data/h200-reference/raw/") for f in beside)
