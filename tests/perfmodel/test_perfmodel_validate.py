"""Validation on the committed H200 reference runs (held out) and the paper's C1-C4."""

import subprocess
import sys
from pathlib import Path

import pytest

from scalestudy.perfmodel.predict import cached_calibration
from scalestudy.perfmodel.validate import TARGET, held_out, implied_ring_latency, paper_claims

REPO = Path(__file__).resolve().parents[2]
CAL = "data/h200-reference/raw"
TRACED = "llama2-7b-n1x1-r1s1t1p1-gb2-788fb17cca-seed0"
SLICE = "llama2-7b-n1x1-r1s1t1p1-gb2-01be5fe6d4-seed0"


def test_calibration_from_the_h200_reference():
    cal = cached_calibration(CAL, REPO)
    c = cal.compute
    assert c.method == "kernel categories" and c.run_ids == (TRACED,)
    assert 0.6 < c.eta_matmul < 0.95 and 0.5 < c.eta_attention < 1.0  # of the 989.4 TFLOP/s peak
    for eta in (c.eta_optimizer, c.eta_fsdp_copy):
        assert 0.05 < eta < 1.0
    assert 0.05 < c.eta_elementwise < 1.0  # compute.FUSED: the kernels the harness runs
    assert 0 < c.gap_fraction < 0.1
    assert cal.power is not None and cal.power.device == "NVIDIA H200" and cal.power.idle_w < cal.power.cap_w
    assert {r["run_id"] for r in cal.power_held_out} >= {TRACED, SLICE}  # all measured runs check the duty fit
    assert {r["run_id"] for r in cal.held_out} == {SLICE, "llama2-7b-n1x1-r1s1t1p1-gb2-660d5325af-seed0"}
    # the whole 7B shape without checkpointing fits, with the allocator retrying every step (138.5 of
    # 139.8 GiB): read, but neither fitted nor predicted
    assert [r.run_id for r in cal.runs if r.ok and r.alloc_retries] == ["llama2-7b-n1x1-r1s1t1p1-gb2-faab4bba0e-seed0"]
    assert not any(r.modelled for r in cal.runs if r.alloc_retries or r.spec.compile)


def test_elementwise_counts_carry_to_the_run_without_checkpointing():
    """The fused kernel counts, forward and backward apart, at the efficiency fitted on the
    checkpointed run (two forwards, one backward) predict the element-wise kernel time of the traced
    run without checkpointing (one of each)."""
    from scalestudy.perfmodel.compute import step_totals

    cal = cached_calibration(CAL, REPO)
    other = [r for r in cal.runs if r.kernels is not None and r.run_id != TRACED and not r.spec.compile]
    assert other and all(r.spec.activation_checkpointing == "none" for r in other)
    for r in other:
        predicted = step_totals(r.spec)["elementwise"] / (cal.compute.hbm_bytes_per_s * cal.compute.eta_elementwise)
        assert predicted / r.kernels.per_step_s["elementwise"] - 1 == pytest.approx(0, abs=0.15)


def test_held_out_error_within_target():
    rep = held_out(CAL, REPO)
    a = {r["run_id"]: r for r in rep["folds"]["A"]["rows"]}
    assert abs(a[SLICE]["step_error"]) < TARGET  # 16 layers without checkpointing, from the checkpointed full model
    assert abs(a[SLICE]["power_error"]) < 0.05
    assert all(abs(r["step_error"]) <= TARGET for r in rep["folds"]["A"]["rows"])
    assert "B" in rep["folds"] and rep["folds"]["B"]["method"] == "mfu"
    # fold B (one MFU from the 16-layer run without checkpointing, for the checkpointed runs) misses
    # the target by half a point on the reference remeasured with issue 14's harness (10.5%); one MFU
    # counts no element-wise bytes, so the kernel counts cannot move it
    assert all(abs(r["step_error"]) <= 0.12 for r in rep["folds"]["B"]["rows"])
    assert rep["within_target"] == (rep["worst_step_error"] <= TARGET)


def test_paper_claims_rows():
    cal = cached_calibration(CAL, REPO)
    rows = {r.id: r for r in paper_claims(cal, REPO)}
    assert list(rows) == ["C1", "C2", "C3", "C4", "HSDP-256", "HSDP-2048"]
    for r in rows.values():
        assert r.low <= r.predicted <= r.high
    assert rows["C1"].paper == -37.22 and rows["C1"].predicted < 0  # the direction holds
    assert rows["C4"].paper == pytest.approx(59.67 - 40.77) and rows["C4"].predicted > 0
    assert rows["HSDP-2048"].paper is None and "best TP/PP" in rows["HSDP-2048"].detail


def test_implied_latency_diagnostic():
    cal = cached_calibration(CAL, REPO)
    imp = implied_ring_latency(cal, REPO)
    # not reached; or reached by raising the latencies; or (factor 1) the model's C1 already falls at
    # least as steeply as the paper's, as it does with the reference remeasured by issue 14's harness
    assert (
        imp["factor"] is None
        or imp["c1"] == pytest.approx(-37.22, abs=0.5)
        or (imp["factor"] == 1.0 and imp["c1"] <= -37.22)
    )


def test_perfmodel_imports_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['scalestudy.harness'] = None\n"
        "import scalestudy.perfmodel.validate, scalestudy.perfmodel.predict, scalestudy.cli.model\n"
        "assert not [m for m in sys.modules if m.startswith('torch.') or m.startswith('scalestudy.harness.')]\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
