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


def test_raw_dirs_one_a_planned_run_the_committed_ones_of_a_partial_study_and_a_predicted_study_whole(tmp_path):
    import dataclasses

    import pytest

    from scalestudy.spec.workflow_plan import NoRawLogs, raw_dirs

    smoke = load_study("smoke", REPO)
    assert raw_dirs(smoke, REPO) == [f"data/smoke/raw/{r}" for r in smoke.run_ids + smoke.collectives_ids]
    rank = load_study("paper-rank", REPO)
    have = [f"data/paper-rank/raw/{r}" for r in rank.run_ids[:3]]
    for d in have:
        (tmp_path / d).mkdir(parents=True)
    assert raw_dirs(dataclasses.replace(rank, partial=True), tmp_path) == have  # the committed ones only
    assert len(raw_dirs(rank, tmp_path)) == len(rank.run_ids)  # whole: the missing ones are planned
    assert raw_dirs(load_study("paper-model", REPO), REPO) == ["data/paper-model/raw"]
    with pytest.raises(NoRawLogs, match="commit its raw logs first"):
        raw_dirs(load_study("mlperf", REPO), REPO / "no-such-root")


def test_tables_and_the_runs_a_caption_names():
    from scalestudy.spec.workflow_plan import runs_in_words, table_files

    assert table_files(load_study("smoke", REPO))[0] == "data/smoke/tables/runs.csv"
    assert "data/mlperf/tables/model_beside.csv" in table_files(load_study("mlperf", REPO))
    assert "data/paper-model/tables/c3_terms.csv" in table_files(load_study("paper-model", REPO))
    smoke = load_study("smoke", REPO)
    assert runs_in_words(smoke, "weak_scaling", REPO).endswith("configurations x 3 seeds")
    assert "PREDICTED" in runs_in_words(load_study("paper-model", REPO), "weak_scaling", REPO)
    assert "rank shares planned in study paper-rank" in runs_in_words(
        load_study("paper-rank", REPO), "rank_memory", REPO
    )
