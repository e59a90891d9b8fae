"""The calibrated efficiencies carried to another GPU kernel class by kernel class (perfmodel/achievable.py
KernelCarry): matrix products by the achievable-matmul ratio and the power-limit clock, attention as they
are times option attention_carry (or at the matmul efficiency where it runs as batched matrix products),
memory-bound work by HBM bandwidth. Pure logic on a hand-made calibration; one test on the real one."""

from dataclasses import replace
from pathlib import Path

import pytest

from scalestudy.perfmodel import compute as C
from scalestudy.perfmodel.achievable import kernel_carry, tensor_carry
from scalestudy.perfmodel.options import ModelOptions, choices
from scalestudy.spec.run import RunSpec

H200, A100 = "NVIDIA H200", "NVIDIA A100-SXM4-80GB"
REPO = Path(__file__).resolve().parents[2]

CAL = C.ComputeCalibration(
    method="kernel categories",
    eta_matmul=0.75,
    eta_attention=0.5,
    eta_elementwise=0.6,
    eta_optimizer=0.7,
    eta_fsdp_copy=0.5,
    gap_fraction=0.0,
    gpu=H200,
    peak_flops=1e15,
    hbm_bytes_per_s=4.8e12,
    run_ids=("x",),
)


def spec(**kw) -> RunSpec:
    return RunSpec(
        **{
            "model": "llama2-7b",
            "seq_len": 4096,
            "micro_batch": 2,
            "nodes": 1,
            "procs_per_node": 1,
            "global_batch": 2,
            **kw,
        }
    )


def test_each_class_has_its_own_factor(fresh_catalog):
    k = kernel_carry(A100, H200, clock_ratio=0.9, attention_factor=1.25, hbm_target=2.039e12, hbm_calibration=4.8e12)
    t = tensor_carry(A100, H200).factor
    assert k.matmul == pytest.approx(t * 0.9)
    assert k.attention == pytest.approx(t * 0.9 * 1.25)
    assert k.memory_time_ratio == pytest.approx(4.8 / 2.039)
    d = k.as_dict()
    assert d["achievable_matmul_ratio"] == pytest.approx(t) and d["attention_carry"] == 1.25
    text = k.describe()
    assert f"x {k.matmul:.3f}" in text and "attention_carry 1.25" in text and "4.8 over 2.039 TB/s" in text
    plain = kernel_carry(A100, H200)
    assert plain.attention == plain.matmul == pytest.approx(t) and plain.memory_time_ratio is None
    assert "attention as the matrix products" in plain.describe()
    with pytest.raises(ValueError, match="positive"):
        kernel_carry(A100, H200, attention_factor=0.0)


def test_the_attention_rate_moves_only_the_attention_time():
    s = spec()
    w = C.work(s)
    base = C.compute_times(s, CAL, 1e15, 4.8e12)
    fast = C.compute_times(s, CAL, 1e15, 4.8e12, attention_flops=2e15)
    attn_fwd = w.attn_flops_fwd_layer / (1e15 * CAL.eta_attention)
    assert base.layer_fwd_s - fast.layer_fwd_s == pytest.approx(attn_fwd / 2)
    assert base.layer_bwd_s - fast.layer_bwd_s == pytest.approx(2 * attn_fwd / 2)  # no recomputation
    assert (fast.head_fwd_s, fast.optimizer_s, fast.fsdp_copy_s) == (
        base.head_fwd_s,
        base.optimizer_s,
        base.fsdp_copy_s,
    )
    same = C.compute_times(s, CAL, 1e15, 4.8e12, attention_flops=1e15)
    assert same == base


def test_batched_matmul_attention_runs_at_the_matmul_efficiency():
    """Megatron-LM 2021 (no flash attention): Q K^T and P V are baddbmm/bmm GEMMs."""
    s = spec()
    w = C.work(s, passes=C.MEGATRON_2021)
    assert not C.MEGATRON_2021.flash_attention and C.FUSED.flash_attention and C.UNFUSED.flash_attention
    t = C.compute_times(s, CAL, 1e15, 4.8e12, passes=C.MEGATRON_2021)
    want = (w.matmul_flops_fwd_layer + w.attn_flops_fwd_layer) / (1e15 * CAL.eta_matmul) + w.elem_bytes_fwd_layer / (
        4.8e12 * CAL.eta_elementwise
    )
    assert t.layer_fwd_s == pytest.approx(want)
    # and the attention rate's carry applies to those GEMMs too
    t2 = C.compute_times(s, CAL, 1e15, 4.8e12, passes=C.MEGATRON_2021, attention_flops=0.5e15)
    assert t2.layer_fwd_s - t.layer_fwd_s == pytest.approx(w.attn_flops_fwd_layer / (1e15 * CAL.eta_matmul))


def test_memory_bound_kernels_carry_by_hbm_bandwidth_and_tensor_work_does_not():
    s = spec(activation_checkpointing="full")
    w = C.work(s)
    fast, slow = C.compute_times(s, CAL, 1e15, 4.8e12), C.compute_times(s, CAL, 1e15, 2.4e12)
    assert slow.optimizer_s == pytest.approx(2 * fast.optimizer_s)
    assert slow.fsdp_copy_s == pytest.approx(2 * fast.fsdp_copy_s)
    elem_fwd = w.elem_bytes_fwd_layer / (4.8e12 * CAL.eta_elementwise)
    assert slow.layer_fwd_s - fast.layer_fwd_s == pytest.approx(elem_fwd)  # only the element-wise part doubled
    tensor = C.compute_times(s, CAL, 0.5e15, 4.8e12)
    assert tensor.optimizer_s == fast.optimizer_s and tensor.fsdp_copy_s == fast.fsdp_copy_s


def test_the_option_is_validated_and_a_command_line_number():
    assert ModelOptions().attention_carry == 1.0
    assert choices()["attention_carry"] is float
    assert ModelOptions.from_dict({"attention_carry": 0.62}).attention_carry == 0.62
    for bad in (0.0, -1.0, 11.0):
        with pytest.raises(ValueError, match="attention_carry"):
            ModelOptions(attention_carry=bad)


def test_predictions_report_the_carry_and_the_option_slows_only_attention(fresh_catalog):
    from scalestudy.perfmodel.cluster import load_cluster
    from scalestudy.perfmodel.predict import cached_calibration, predict
    from scalestudy.perfmodel.validate import fsdp

    cal = cached_calibration("data/h200-reference/raw", REPO)
    a100 = load_cluster("a100-paper", REPO)
    base = predict(fsdp(8), a100, cal, band=False)
    slow = predict(fsdp(8), a100, cal, band=False, options=ModelOptions(attention_carry=0.5))
    # a100-paper runs FlashAttention-2: its published fraction of peak over the calibration's cuDNN's
    assert base.values["attention_carry"] == pytest.approx(
        (173 / 312) / (477.4 / 989.4) * base.values["clock_ratio"], rel=1e-3
    )
    assert slow.values["attention_carry"] == pytest.approx(0.5 * base.values["attention_carry"])
    assert "attention_carry 0.5" in slow.sources["calibrated_from_measurements"]["kernel_class_carry"]
    assert "HBM bandwidth" in base.sources["calibrated_from_measurements"]["kernel_class_carry"]
    assert slow.compute["optimizer_s"] == base.compute["optimizer_s"]
    assert slow.compute["layer_fwd_s"] > base.compute["layer_fwd_s"]
    assert slow.values["tokens_per_s_per_device"] < base.values["tokens_per_s_per_device"]
    # on the calibration's own GPU every class is as calibrated
    h200 = predict(fsdp(1), load_cluster("h200-node", REPO), cal, band=False)
    assert h200.values["attention_carry"] == pytest.approx(1.0)
    assert replace(ModelOptions(), attention_carry=1.0) == ModelOptions()


def test_the_attention_table_checks_its_kernels_gpus_and_sources():
    import copy

    from scalestudy.perfmodel import achievable

    good = achievable._attention_table()
    assert achievable.attention_table_problems(good) == []
    bad = copy.deepcopy(good)
    bad["calibration_kernel"] = "flash9"
    bad["rates"]["NVIDIA A100-SXM4-80GB"]["flash3"] = {"tflops": 1.0, "source": "published: x"}
    bad["rates"]["Imaginary GPU"] = {"flash2": {"tflops": 1.0, "source": "published: x"}}
    problems = achievable.attention_table_problems(bad)
    assert any("calibration_kernel 'flash9'" in p for p in problems)
    assert any("flash3: not a declared kernel" in p for p in problems)
    assert any("Imaginary GPU: not a GPU of the catalog" in p for p in problems)
    unsourced = copy.deepcopy(good)
    unsourced["rates"]["NVIDIA A100-SXM4-80GB"]["flash2"]["source"] = "a blog"
    assert any("source" in p for p in achievable.attention_table_problems(unsourced))
