"""The mlperf study's analysis: the line fit behind the per-step fixed cost, its claims and
figures from the committed tables, and the model beside them ("not expressible" where it cannot)."""

from pathlib import Path

import pytest

from scalestudy.analysis.linear_fit import fit_line

REPO = Path(__file__).resolve().parents[2]


def test_fit_line_recovers_a_line_and_its_interval():
    f = fit_line([8, 16, 128, 8, 16, 128], [0.93, 1.61, 11.05, 0.94, 1.60, 11.06])
    assert f.n == 6 and f.intercept == pytest.approx(0.26, abs=0.02) and f.slope == pytest.approx(0.0843, abs=0.001)
    assert f.intercept_ci95[0] < f.intercept < f.intercept_ci95[1]
    exact = fit_line([1, 2], [3, 5])
    assert (exact.intercept, exact.slope, exact.intercept_ci95) == (pytest.approx(1.0), pytest.approx(2.0), None)
    with pytest.raises(ValueError, match="two distinct x values"):
        fit_line([4, 4], [1, 2])


def test_the_model_cannot_express_fp8_or_context_parallelism():
    from scalestudy.perfmodel.beside import not_expressible
    from scalestudy.spec.run import RunSpec

    assert not_expressible(RunSpec(model="tiny", precision="fp8")).startswith("FP8 matrix products")
    assert "context parallelism (CP=2)" in not_expressible(RunSpec(model="tiny", nodes=2, cp=2))
    assert not_expressible(RunSpec(model="tiny")) is None


def test_the_harness_refuses_what_only_imported_logs_hold():
    from scalestudy.spec.run import RunSpec

    assert [f for f, _ in RunSpec(model="tiny", precision="fp8", nodes=2, cp=2).harness_problems()] == ["precision", "cp"]
    assert RunSpec(model="tiny").harness_problems() == []


def test_claims_and_figures_of_the_committed_mlperf_tables():
    from scalestudy.analysis import scale_claims
    from scalestudy.analysis.aggregate import load_tables
    from scalestudy.analysis.figures import figure_data
    from scalestudy.analysis.figures.prepare import records
    from scalestudy.spec.studies import load_study

    study = load_study("mlperf", REPO)
    tables = load_tables(REPO / "data/mlperf/tables")
    rows = {r["id"]: r for r in scale_claims.evaluate(tables, records(tables.summary))}
    assert set(rows) == {"D-gpt3-175b", "D-llama3.1-405b", "F-gpt3-175b", "F-llama3.1-405b"}
    d = rows["D-gpt3-175b"]
    assert d["ours"] < 0 and d["ours_ci95_low"] < d["ours"] < d["ours_ci95_high"] < 0 and d["n_seeds"] == "3/3"
    assert rows["F-llama3.1-405b"]["ours"] > 0 and rows["F-gpt3-175b"]["n_seeds"] == "21 runs"
    ws = figure_data("weak_scaling", tables, study)
    assert {r["status"] for r in ws.csv_rows} == {"not expressible"} and len(ws.csv_rows) == 2 * 12
    assert any("NOT EXPRESSIBLE" in n for n in ws.notes)
    st = figure_data("step_time_microbatches", tables, study)
    assert sum(r["status"] == "fit" for r in st.rows) > 0 and any("fixed cost" in n for n in st.notes)


def test_an_expressible_prediction_is_drawn_beside_its_series(tmp_path):
    import pandas as pd

    from scalestudy.analysis.aggregate import load_tables
    from scalestudy.analysis.figures import prepare, render
    from scalestudy.spec.studies import load_study

    study = load_study("mlperf", REPO)
    tables = load_tables(REPO / "data/mlperf/tables")
    beside = tables.model_beside.copy()
    first = beside.index[0]
    beside["expressible"] = beside["expressible"].astype(object)
    beside.loc[first, ["expressible", "reason", "tokens_per_s_per_device", "tokens_per_s_per_device_low",
                       "tokens_per_s_per_device_high"]] = [True, None, 700.0, 650.0, 750.0]
    tables.model_beside = pd.DataFrame(beside)
    paths = render("weak_scaling", study, tables, tmp_path, formats=("csv", "png"))
    rows = [r for r in __import__("csv").DictReader(open(tmp_path / "weak_scaling.csv"))]
    model = [r for r in rows if r["series"].endswith(prepare.MODEL_SERIES) and r["y"]]
    assert {float(r["y"]) for r in model} == {700.0, 700.0 * 512} and len(paths) == 2
    assert sum(r["status"] == "not expressible" for r in rows) == 2 * 11
