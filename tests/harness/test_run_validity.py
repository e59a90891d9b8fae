"""Fault injection, issue 26 (harness side): a run proves it trained. A loss that is not finite or
leaves its sane band makes the run `diverged`, a step time <= 0 `invalid`, each with the step in
status.json; neither has a throughput in the tables. The learning rate is bounded by what the harness
trains with; the outlier rule's threshold is a typed study setting."""

import json
import math

import pytest
from analysis_fixtures import INTEGRITY_SPEC, make_study, planned, write_train_run
from conftest import REPO, child_env, status_of, warm_workers

from scalestudy.analysis import aggregate as agg
from scalestudy.measure.csv_format import read_csv_rows
from scalestudy.harness import faults
from scalestudy.measure import rawlog
from scalestudy.spec.run import LR_MAX, RunSpec, SpecError
from scalestudy.spec.studies import StudyError, study_from_dict

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


# ---- the rule itself -----------------------------------------------------------------------
def test_the_loss_band_and_the_step_time_rule():
    lo, hi = faults.loss_band(512)
    assert lo == 0.0 and hi == pytest.approx(2 * math.log(512))  # twice the loss of a uniform prediction
    faults.check_step(3, 6.7, 0.01, 512)  # the tiny model's loss at start: in the band
    faults.check_step(3, None, 0.01, 512)  # no loss to check (fake communication)
    for loss in (float("nan"), float("inf"), 14.15, -0.1):  # 14.15: the tiny model at lr 1, step 1
        with pytest.raises(faults.Diverged) as e:
            faults.check_step(4, loss, 0.01, 512)
        assert e.value.step == 4 and faults.classify(e.value) == "diverged" and "step 4" in str(e.value)
    for t in (0.0, -1e-3, float("nan")):
        with pytest.raises(faults.InvalidMeasurement) as e:
            faults.check_step(2, 6.7, t, 512)
        assert e.value.step == 2 and faults.classify(e.value) == "invalid"
    assert {"diverged", "invalid"} <= set(rawlog.STATUSES) <= set(rawlog.STATUS_PRIORITY)
    # a peer's comm_error (the echo of the rank that stopped) never hides why the run stopped
    assert rawlog.combine_statuses(["comm_error", "invalid"]) == "invalid"
    assert rawlog.combine_statuses(["diverged", "diverged"]) == "diverged"


# ---- a run that did not train, end to end ----------------------------------------------------
@pytest.mark.multiproc
@pytest.mark.parametrize(
    "fault,status,step,culprits",
    [
        ("nan:step=2", "diverged", 2, [0, 1]),  # the global loss: every rank sees it and stops at once
        ("zero_time:rank=1:step=1", "invalid", 1, [1]),  # one rank's clock: the other stops on its lost peer
    ],
)
def test_a_run_that_did_not_train_is_not_ok(tmp_path, fault, status, step, culprits):
    d = tmp_path / "run"
    res = warm_workers(2, ARGS + ["--run-dir", str(d)], env=child_env(SCALESTUDY_INJECT_FAULT=fault))
    assert res.returncode == 0, res.stderr[-2000:]  # classified: the outcome is data
    st = status_of(d)
    assert st["status"] == status and st["step"] == step and set(culprits) <= set(st["culprit_ranks"])
    assert f"step {step}" in st["error"]
    run = rawlog.read_run(d)  # the raw-log format accepts it (seal, checksums, no contradiction)
    assert run.status["status"] == status and any(r["key"] == "error" for r in run.records)
    # the offending step's iteration is not recorded as a measurement by the ranks that saw it
    assert all(r["value"]["step"] < step for r in run.iterations() if r["metadata"]["rank"] in culprits)


def test_a_diverged_or_invalid_seed_has_no_throughput(tmp_path):
    raw = tmp_path / "data" / "t" / "raw"
    runs = []
    for seed, status in enumerate(("ok", "diverged", "invalid")):
        spec = INTEGRITY_SPEC.replace(seed=seed)
        write_train_run(raw, spec, status=status, fail_at_step=2)
        runs.append(planned(spec, ("weak_scaling",), "FSDP"))
    study = make_study(tmp_path, runs)
    agg.aggregate(study)
    rows = {r["seed"]: r for r in read_csv_rows(study.tables_dir / "runs.csv")}
    assert rows["0"]["tokens_per_s"] and rows["1"]["tokens_per_s"] == "" and rows["2"]["tokens_per_s"] == ""
    assert (rows["1"]["status"], rows["2"]["status"]) == ("diverged", "invalid")
    (summary,) = read_csv_rows(study.tables_dir / "summary.csv")
    assert summary["n_diverged"] == "1" and summary["n_invalid"] == "1"
    assert summary["tokens_per_s_n"] in ("", "0", "1")  # only the ok seed could stand behind a value
    assert INTEGRITY_SPEC.replace(seed=1).run_id not in summary["run_ids"]


def test_an_ok_run_with_a_step_time_of_zero_is_refused_when_read(tmp_path):
    # a raw log that says ok but holds what check_step stops at (an older harness, an edit): refused,
    # naming the file, never averaged
    d = write_train_run(tmp_path / "raw", INTEGRITY_SPEC, step_time_s=[0.5, 0.0, 0.5, 0.5])
    with pytest.raises(
        rawlog.CorruptLogError,
        match=r"status.json: contradicts the metrics: status ok, but step 2 "
        r"has step time 0.0 s",
    ):
        rawlog.read_run(d)
    assert (
        rawlog.status_contradictions(
            {"spec": {"measured_iters": 1, "comm": "fake"}},
            {"status": "ok"},
            [{"key": "iteration", "value": {"step": 0, "phase": "measured", "step_time_s": 1.0, "loss": float("nan")}}],
        )
        == []
    )  # a fake-communication run's loss is no training loss (the committed paper-rank runs: NaN)
    assert (
        "diverged"
        in rawlog.status_contradictions(
            {"spec": {"measured_iters": 1}},
            {"status": "ok"},
            [{"key": "iteration", "value": {"step": 0, "phase": "measured", "step_time_s": 1.0, "loss": float("nan")}}],
        )[0]
    )


# ---- the learning rate the harness trains with -----------------------------------------------
def test_the_lr_bound_is_what_the_harness_trains_with():
    # measured on the smoke spec (spec.run.LR_MAX): AdamW leaves the loss band from lr 0.5, SGD from 30
    assert LR_MAX == {"adamw": 0.1, "sgd": 10.0}
    RunSpec(model="tiny", lr=0.1)
    RunSpec(model="tiny", optimizer="sgd", lr=10.0)
    with pytest.raises(SpecError, match=r"lr: 0.5 is above 0.1, the largest learning rate the harness trains with"):
        RunSpec(model="tiny", lr=0.5)
    with pytest.raises(SpecError, match="lr: 1000 is above 10"):
        RunSpec(model="tiny", optimizer="sgd", lr=1000)
    schema = json.loads((REPO / "workflow" / "schemas" / "study.schema.json").read_text())
    assert schema["$defs"]["fields"]["properties"]["lr"]["maximum"] == max(LR_MAX.values())
    base = {
        "description": "d",
        "hardware": "h",
        "seeds": [0],
        "defaults": {"model": "tiny", "device": "cpu"},
        "experiments": [{"name": "weak_scaling", "grid": {"procs_per_node": [1]}}],
    }
    for lr, words in ((1000, "lr"), (0.5, "lr: 0.5 is above 0.1")):
        bad = json.loads(json.dumps(base))
        bad["defaults"]["lr"] = lr
        with pytest.raises(StudyError, match=words):
            study_from_dict("bad", bad, root=REPO)


# ---- the outlier rule's threshold: a typed study setting ------------------------------------
def test_outlier_slowdown_is_a_typed_study_field():
    base = {
        "description": "d",
        "hardware": "h",
        "seeds": [0],
        "defaults": {"model": "tiny", "device": "cpu"},
        "experiments": [{"name": "weak_scaling", "grid": {"procs_per_node": [1]}}],
    }
    study = study_from_dict("s", base, root=REPO)
    assert study.outlier_slowdown is None and agg.outlier_slowdown(study) is None  # the device kind's default
    study = study_from_dict("s", {**base, "outlier_slowdown": 0.2}, root=REPO)
    assert study.outlier_slowdown == 0.2 and agg.outlier_slowdown(study) == 0.2
    with pytest.raises(StudyError, match="outlier_slowdown"):
        study_from_dict("s", {**base, "outlier_slowdown": 1.5}, root=REPO)
