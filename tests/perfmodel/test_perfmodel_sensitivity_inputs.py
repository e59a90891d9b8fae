"""The claims' sensitivity inputs (perfmodel/sensitivity.py) name what they rest on from the catalog."""

from pathlib import Path

from scalestudy.perfmodel.predict import cached_calibration
from scalestudy.perfmodel.sensitivity import MAMF_H100_BF16_TFLOPS, base_setup, inputs
from scalestudy.spec import catalog

REPO = Path(__file__).resolve().parents[2]


def test_the_computation_rate_input_names_the_h100s_measured_rate_from_the_catalog():
    cal = cached_calibration("data/h200-reference/raw", REPO)
    by_name = {i.name: i for i in inputs(base_setup(REPO), cal, REPO)}
    rate = catalog.gpu("NVIDIA H100 80GB HBM3").matmul_achievable_flops_per_s["bf16"] / 1e12
    source = by_name["computation rate"].source
    assert f"{rate:.2f} measured" in source and f"{MAMF_H100_BF16_TFLOPS} published" in source
    assert f"{rate / MAMF_H100_BF16_TFLOPS - 1:.1%}" in source
    assert all(len(i.levels) == 2 for i in by_name.values())


def test_the_limiter_window_input_names_the_duty_cycle_fits_window():
    from scalestudy.perfmodel import power

    cal = cached_calibration("data/h200-reference/raw", REPO)
    by_name = {i.name: i for i in inputs(base_setup(REPO), cal, REPO)}
    fit = power.load("NVIDIA H200", REPO)  # the run the catalog names for the calibration's GPU
    window = f"{1e3 * fit.limiter_tau_s:.0f} ms"
    assert by_name["power limiter window"].levels[1][0] == window and window in by_name["power limiter window"].source
