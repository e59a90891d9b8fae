"""The slowest of W ranks: the expected maximum of W ranks' computation, from the step-to-step
spread measured on the calibration runs."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from scalestudy.perfmodel.straggler import MIN_STEPS, Straggler, expected_max_normal, step_spread

REPO = Path(__file__).resolve().parents[2]


def test_expected_maximum_of_standard_normals():
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / 3.141592653589793**0.5, rel=1e-6)  # 1/sqrt(pi)
    assert expected_max_normal(3) == pytest.approx(1.5 / 3.141592653589793**0.5, rel=1e-6)
    # tabulated values (Harter 1961): 8 -> 1.42360, 1000 -> 3.24144
    assert expected_max_normal(8) == pytest.approx(1.42360, abs=1e-4)
    assert expected_max_normal(1000) == pytest.approx(3.24144, abs=1e-3)
    with pytest.raises(ValueError):
        expected_max_normal(0)


def test_the_factor_grows_with_the_ranks_and_adds_the_gpu_spread_in_quadrature():
    s = Straggler(0.006, "test")
    assert s.factor(1) == 1.0
    assert 1.0 < s.factor(128) < s.factor(2048) == pytest.approx(1 + 0.006 * expected_max_normal(2048))
    both = Straggler(0.006, "test", gpu_cv=0.008)
    assert both.sigma == pytest.approx(0.01) and "gpu_spread_cv" in both.describe(2048)


@dataclass
class Run:
    run_id: str
    step_cv: float | None
    n_steps: int


def test_the_spread_is_the_median_over_runs_with_enough_steps():
    runs = [
        Run("a", 0.004, 50),
        Run("b", 0.006, 50),
        Run("c", 0.07, 50),
        Run("d", 0.5, MIN_STEPS - 1),
        Run("e", None, 0),
    ]
    cv, source = step_spread(runs)
    assert cv == 0.006 and "median over 3 calibration runs" in source  # one noisy run does not set the tail
    assert step_spread([Run("d", 0.5, 3)])[0] == 0.0


def test_a_prediction_waits_for_its_slowest_rank_and_says_so():
    from scalestudy.perfmodel.cluster import load_cluster
    from scalestudy.perfmodel.options import ModelOptions
    from scalestudy.perfmodel.predict import cached_calibration, predict
    from scalestudy.spec.run import RunSpec

    cal = cached_calibration("data/h200-reference/raw", REPO)
    assert 0.002 < cal.step_cv < 0.01 and cal.step_cv_source.startswith("measured")
    h100 = load_cluster("h100-paper-fig2", REPO)  # FSDP at 2048 GPUs bound by its collectives
    spec = RunSpec(
        model="llama2-7b", device="cuda", seq_len=4096, micro_batch=2, nodes=256, procs_per_node=8, global_batch=4096
    )
    on = predict(spec, h100, cal, band=False, options=ModelOptions(burst_speedup=False))
    off = predict(spec, h100, cal, band=False, options=ModelOptions(straggler=False, burst_speedup=False))
    f = on.values["straggler_factor"]
    assert f == pytest.approx(1 + cal.step_cv * expected_max_normal(2048)) and off.values["straggler_factor"] == 1.0
    assert on.values["compute_s"] == pytest.approx(off.values["compute_s"] * f)
    assert on.values["straggler_s"] == pytest.approx(on.values["compute_s"] - off.values["compute_s"])
    assert "slowest of 2048 ranks" in on.sources["straggler"] and off.values["straggler_s"] == 0.0
    one = predict(
        RunSpec(model="llama2-7b", device="cuda", seq_len=4096, micro_batch=2, global_batch=2), h100, cal, band=False
    )
    assert one.values["straggler_factor"] == 1.0
