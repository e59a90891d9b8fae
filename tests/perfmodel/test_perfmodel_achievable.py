"""Tensor-core efficiencies carried between GPUs by their measured achievable matmul rates."""

import pytest

from scalestudy.perfmodel.achievable import achievable_rate, tensor_carry
from scalestudy.spec import catalog

H200, A100, H100 = "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"

GPU = """
gpus:
  My GPU 9000:
    product: GPU 9000
    peak_tflops: {{bf16: 1000, fp16: 1000}}
    memory_gib: 100
    hbm_gb_per_s: 5000
    intra_node_link_gb_per_s: 400
    power_cap_w: 800
    datasheet: my vendor
    {rate}
"""


def test_the_ratio_of_achievable_fractions_applies_where_both_gpus_have_a_rate(fresh_catalog):
    c = tensor_carry(A100, H200)
    assert c.factor == pytest.approx((271.2 / 312) / (806.55 / 989.4)) and not c.missing
    assert "MAMF" in c.target.source and "measured" in c.calibration.source and f"x {c.factor:.3f}" in c.describe()
    assert tensor_carry("a100-sxm-40gb", "h200").factor == pytest.approx(c.factor)  # aliases resolve
    assert tensor_carry(H100, H200).factor == pytest.approx(806.31 / 806.55)
    assert tensor_carry(H200, H200).factor == 1.0


def test_without_a_rate_on_either_side_the_efficiencies_carry_unchanged(fresh_catalog):
    for target, cal in (
        ("Tesla V100-SXM2-32GB", H200),
        ("NVIDIA A100 80GB PCIe", H200),
        (A100, "NVIDIA L40S"),
        (A100, None),
        ("no such GPU", H200),
    ):
        c = tensor_carry(target, cal)
        assert c.factor == 1.0 and c.missing and "unchanged" in c.describe()
    assert tensor_carry(A100, "NVIDIA L40S").missing == ("NVIDIA L40S",)
    assert tensor_carry(A100, H200, "fp16").factor == 1.0  # only bf16 was measured
    assert achievable_rate("Tesla V100-SXM2-32GB", "bf16") is None


def test_a_user_gpu_carries_by_its_own_rate_and_the_catalog_refuses_a_rate_above_peak(fresh_catalog, tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text(
        GPU.format(rate='matmul_achievable_tflops: {fp16: 700}\n    matmul_achievable_source: "measured: mine"')
    )
    catalog.add_catalog_file(f)
    assert tensor_carry("My GPU 9000", H200, "fp16").factor == 1.0  # the H200 has no fp16 rate
    assert tensor_carry("My GPU 9000", H200, "bf16").factor == 1.0  # nor this GPU a bf16 one
    assert achievable_rate("My GPU 9000", "fp16").fraction == pytest.approx(0.7)
    catalog.reset()
    high = tmp_path / "high.yaml"
    high.write_text(GPU.format(rate="matmul_achievable_tflops: {bf16: 1200}\n    matmul_achievable_source: x"))
    with pytest.raises(catalog.CatalogError, match="high.yaml: GPU 'My GPU 9000'.*1200.*must not exceed.*1000"):
        catalog.add_catalog_file(high)


def test_the_schema_wants_a_source_with_the_rate_and_known_dtypes(fresh_catalog, tmp_path):
    for rate, message in (
        ("matmul_achievable_tflops: {bf16: 700}", "needs matmul_achievable_source"),
        (
            "matmul_achievable_tflops: {bf16: 700, fp8: 1000}\n    matmul_achievable_source: x",
            "needs matmul_achievable_sources.fp8",
        ),
        ('matmul_achievable_source: "measured: mine"', "'matmul_achievable_tflops' is a dependency"),
        ("matmul_achievable_tflops: {tf32: 100}\n    matmul_achievable_source: x", "matmul_achievable_tflops"),
        ("matmul_achievable_tflops: {bf16: 0}\n    matmul_achievable_source: x", "matmul_achievable_tflops/bf16"),
    ):
        f = tmp_path / "bad.yaml"
        f.write_text(GPU.format(rate=rate))
        with pytest.raises(catalog.CatalogError, match=message):
            catalog.add_catalog_file(f)
        catalog.reset()


def test_the_h200_rate_is_the_best_of_the_committed_sweep(fresh_catalog):
    """gpus.yaml's H200 rate and the sweep's checksum in its source are those of the measurement its
    `matmul_achievable_data` names (data/h200-matmul: the removed benchmarks/matmul_sweep.py's file, or a
    run directory of `scalestudy instrument matmul-sweep`): a new sweep must change both."""
    from pathlib import Path

    from scalestudy.measure.instruments import content_sha256, sweep_best

    rel = catalog.gpu(H200).matmul_achievable_data
    path = Path(__file__).resolve().parents[2] / rel
    best, best_of_records = sweep_best(path)
    assert best == best_of_records
    rate = achievable_rate(H200, "bf16")
    assert rate.tflops == pytest.approx(best)
    assert content_sha256(path) in rate.source and rel in rate.source
