"""The external validation ledger: sources, conversions, not-expressible rows, CLI, CSV and figure."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from scalestudy.perfmodel.external import load_ledger, megatron_flops_per_token, spec_of
from scalestudy.spec import catalog

REPO = Path(__file__).resolve().parents[2]


def test_ledger_rows_name_their_sources_and_configurations():
    data, rows = load_ledger(REPO)
    assert {r.group for r in rows} == {"torchtitan-h100", "torchtitan-a100", "narayanan2021"}
    for r in rows:
        s = r.source
        assert ("repo" in s and len(s["commit"]) == 40 and s["path"]) or "paper" in s
        if not r.not_expressible:
            spec = spec_of(r)  # a valid RunSpec on the row's cluster
            assert r.cluster and spec.world_size >= 8
    by = {r.id: r for r in rows}
    assert sum(1 for r in rows if r.group == "narayanan2021") == 10
    assert spec_of(by["meg-1t-3072"]).world_size == 3072 and spec_of(by["meg-1t-3072"]).layout == "ddp+tp+pp"
    # float8 / compile rows are listed, never predicted
    assert by["tt-h100-70b-2d-256"].not_expressible and "float8" in by["tt-h100-70b-2d-256"].not_expressible


def test_megatron_flops_formula_gives_the_papers_aggregate():
    # Table 1, 1T: 163 TFLOP/s a GPU on 3072 GPUs is the 502.0 PFLOP/s aggregate; and the formula is
    # 96 B s l h^2 (1 + s/6h + V/16lh) over B s tokens
    cfg = catalog.model("gpt-1t")
    f = megatron_flops_per_token(cfg, 2048)
    assert f == pytest.approx(96 * 128 * 25600**2 * (1 + 2048 / (6 * 25600) + 51200 / (16 * 128 * 25600)))
    assert 163e12 * 3072 / 1e15 == pytest.approx(502.0, rel=0.003)


def test_ledger_predictions_and_cli_outputs(tmp_path):
    _, rows = load_ledger(REPO)
    out, fig = tmp_path / "ledger.csv", tmp_path / "model_validation"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "scalestudy",
            "model",
            "validate",
            "--external",
            "--out",
            str(out),
            "--figure",
            str(fig),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "NOT EXPRESSIBLE" in r.stdout and "narayanan2021" in r.stdout and "ratio tt-h100-8b-fsdp-8" in r.stdout
    with open(out) as f:
        ledger = {x["id"]: x for x in csv.DictReader(f)}
    assert set(ledger) == {x.id for x in rows}
    for row in rows:
        x = ledger[row.id]
        if row.not_expressible:
            assert x["predicted_tokens_per_s_per_device"] == "" and x["not_expressible"]
        else:
            lo, p, hi = (float(x[k]) for k in ("band_low", "predicted_tokens_per_s_per_device", "band_high"))
            assert 0 < lo <= p <= hi
            pub = float(x["published_tokens_per_s_per_device"])
            assert float(x["error_pct"]) == pytest.approx(100 * (p / pub - 1), rel=1e-4, abs=1e-3)
    for ext in (".pdf", ".png", ".csv"):
        assert (tmp_path / f"model_validation{ext}").stat().st_size > 0
    from scalestudy.analysis.audit import made_by_other_code

    out.rename(tmp_path / "model_validation_ledger.csv")  # where the workflow writes it, beside the figure
    assert made_by_other_code(tmp_path, REPO) == []  # both name this analysis code and this model
