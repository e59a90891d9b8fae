"""The mlperf study's analysis: the line fit behind the per-step fixed cost, its claims and
figures from the committed tables (runs.csv, summary.csv), every series on one machine (`system`),
and the model beside them ("not expressible" where it cannot)."""

from pathlib import Path

import pytest

from scalestudy.analysis.linear_fit import fit_line

REPO = Path(__file__).resolve().parents[2]
FIGURES = ("weak_scaling", "step_time_microbatches", "hardware_generations")


def test_fit_line_recovers_a_line_and_its_interval():
    f = fit_line([8, 16, 128, 8, 16, 128], [0.93, 1.61, 11.05, 0.94, 1.60, 11.06])
    assert f.n == 6 and f.intercept == pytest.approx(0.26, abs=0.02) and f.slope == pytest.approx(0.0843, abs=0.001)
    assert f.intercept_ci95[0] < f.intercept < f.intercept_ci95[1]
    exact = fit_line([1, 2], [3, 5])
    assert (exact.intercept, exact.slope, exact.intercept_ci95) == (pytest.approx(1.0), pytest.approx(2.0), None)
    with pytest.raises(ValueError, match="two distinct x values"):
        fit_line([4, 4], [1, 2])


def test_the_model_cannot_express_nvfp4():
    from scalestudy.perfmodel.beside import not_expressible
    from scalestudy.spec.run import RunSpec

    assert "NVFP4" in not_expressible(RunSpec(model="tiny", precision="nvfp4"))
    assert not_expressible(RunSpec(model="tiny")) is None


def test_the_harness_refuses_what_only_imported_logs_hold():
    from scalestudy.spec.run import RunSpec

    assert [f for f, _ in RunSpec(model="tiny", precision="fp8", nodes=2, cp=2).harness_problems()] == [
        "precision",
        "cp",
    ]
    assert [f for f, _ in RunSpec(model="tiny", precision="nvfp4", system="gb200-nvidia").harness_problems()] == [
        "precision",
        "system",
    ]
    assert RunSpec(model="tiny").harness_problems() == []


def _study_and_tables():
    from scalestudy.analysis.aggregate import load_tables
    from scalestudy.spec.studies import load_study

    return load_study("mlperf", REPO), load_tables(REPO / "data/mlperf/tables")


def test_claims_of_the_committed_mlperf_tables():
    """A decline (D) row for every pipelined family, a fixed-cost (F) row for every family with two
    or more micro-batch counts, a model (M) row for every family beside the model; each named by its
    model and machine (and what else tells two families of one machine apart), no id twice."""
    from scalestudy.analysis import scale_claims
    from scalestudy.analysis.figures.prepare import records

    _, tables = _study_and_tables()
    rows = scale_claims.evaluate(tables, records(tables.summary))
    decline = [r for r in rows if r["id"].startswith("D-")]
    fixed = [r for r in rows if r["id"].startswith("F-")]
    model = {r["id"]: r for r in rows if r["id"].startswith("M-")}
    assert len({r["id"] for r in rows}) == len(rows)
    assert len(decline) == 11 and len(fixed) == 7  # 11 families (v5.1 GB200 NVFP4 in one), 7 with a fit
    assert {
        "D-gpt3-175b@h100-eos/pp_stages_per_rank=12/micro_batch=1",
        "D-llama3.1-405b@gb200-nvidia/precision=nvfp4",
        "F-llama3.1-405b@h100-eos",
    } <= {r["id"] for r in rows}
    nvfp4 = model["M-llama3.1-405b@gb200-nvidia/precision=nvfp4"]
    assert nvfp4["verdict"] == "not comparable" and "NVFP4" in nvfp4["reason"]
    if getattr(tables, "model_beside", None) is not None:  # the model beside: its error
        eos = model["M-llama3.1-405b@h100-eos"]
        assert eos["verdict"] in ("consistent", "not consistent") and "decline" in eos["reason"]
    (eos,) = [r for r in decline if "h100-eos" in r["claim"] and "pp_stages_per_rank=12" in r["claim"]]
    assert (
        eos["ours"] < 0 and eos["ours_ci95_low"] < eos["ours"] < eos["ours_ci95_high"] < 0 and eos["n_seeds"] == "3/3"
    )
    (f,) = [r for r in fixed if "h100-eos" in r["claim"] and "pp_stages_per_rank=12" in r["claim"]]
    assert f["n_seeds"] == "21 runs" and 0 < f["ours"] < 1


@pytest.mark.parametrize("name", FIGURES)
def test_no_series_joins_two_machines(name):
    """Every measured series of every figure holds the configurations of one system."""
    from scalestudy.analysis.figures import figure_data
    from scalestudy.analysis.figures.prepare import FIT_SERIES, MODEL_SERIES, specs_by_config

    study, tables = _study_and_tables()
    specs = specs_by_config(tables)
    fd = figure_data(name, tables, study)
    systems: dict[str, set[str]] = {}
    for r in fd.rows:
        if r["series"].endswith((MODEL_SERIES, FIT_SERIES)):
            continue
        for cid in r.get("config_ids") or []:
            systems.setdefault(r["series"], set()).add(specs[cid]["system"])
    assert systems and all(len(s) == 1 for s in systems.values()), systems
    assert all(next(iter(s)) in series for series, s in systems.items())  # the name says which machine


def test_the_study_plans_every_imported_run():
    study, _ = _study_and_tables()
    raw = {p.name for p in (REPO / "data/mlperf/raw").iterdir() if p.is_dir()}
    assert set(study.run_ids) == raw
    assert {s["system"] for s in study.imported} >= {p.spec.system for p in study.runs}


def test_an_expressible_prediction_is_drawn_beside_its_series(tmp_path):
    import csv

    import pandas as pd

    from scalestudy.analysis.figures import prepare, render

    study, tables = _study_and_tables()
    cfgs = prepare.experiment_configs(tables, "weak_scaling")
    first = sorted(cfgs, key=lambda c: c["config_id"])[0]
    beside = [
        {
            "config_id": c["config_id"],
            "world_size": c["world_size"],
            "expressible": False,
            "reason": "not expressible: a test's reason",
        }
        for c in cfgs
    ]
    beside[[c["config_id"] for c in cfgs].index(first["config_id"])].update(
        expressible=True,
        reason=None,
        tokens_per_s_per_device=700.0,
        tokens_per_s_per_device_low=650.0,
        tokens_per_s_per_device_high=750.0,
    )
    tables.model_beside = pd.DataFrame(beside)
    paths = render("weak_scaling", study, tables, tmp_path, formats=("csv", "png"))
    rows = list(csv.DictReader(open(tmp_path / "weak_scaling.csv")))
    model = [r for r in rows if r["series"].endswith(prepare.MODEL_SERIES) and r["y"]]
    world = prepare.as_int(first["world_size"])
    assert {float(r["y"]) for r in model} == {700.0, 700.0 * world} and len(paths) == 2
    assert sum(r["status"] == "not expressible" for r in rows) == 2 * (len(cfgs) - 1)
