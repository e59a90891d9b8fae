"""The collectives each layout issues, against hand-computed Llama-2 7B numbers."""

from dataclasses import replace

import pytest

from scalestudy.perfmodel.layout_comm import bubble_fraction, layout_collectives, unit_params, volumes
from scalestudy.perfmodel.options import HARNESS, ModelOptions
from scalestudy.spec import catalog
from scalestudy.spec.catalog.models import parameter_counts
from scalestudy.spec.run import RunSpec

D, FFN, V, L = 4096, 11008, 32000, 32
P_LAYER = 4 * D * D + 3 * D * FFN + 2 * D  # 202,383,360
P_ROOT = 2 * V * D + D  # embedding + output head + final norm
A = 2 * 4096 * D * 2  # micro batch 2 x seq 4096 x width x bf16
BASE = dict(model="llama2-7b", device="cuda", seq_len=4096, micro_batch=2, procs_per_node=8)


def by(spec, name, unit=None, options=ModelOptions()):
    cs = [c for c in layout_collectives(spec, 8, options) if c.name == name and (unit is None or c.unit == unit)]
    assert cs, f"no {name} {unit}"
    return cs


def test_parameter_bookkeeping():
    assert P_LAYER == 202_383_360
    assert L * P_LAYER + P_ROOT == parameter_counts(catalog.model("llama2-7b"))["n_params"]


def test_fsdp_2048():
    s = RunSpec(nodes=256, **BASE)
    (ag_b,) = by(s, "fsdp_all_gather", "block")
    (ag_r,) = by(s, "fsdp_all_gather", "root")
    (rs_b,) = by(s, "fsdp_reduce_scatter", "block")
    (rs_r,) = by(s, "fsdp_reduce_scatter", "root")
    assert ag_b.size_bytes == 2 * P_LAYER == 404_766_720 and ag_b.calls == 32
    assert ag_r.size_bytes == 2 * P_ROOT and ag_r.calls == 1
    assert rs_b.size_bytes == 4 * P_LAYER == 809_533_440 and rs_b.calls == 32
    assert rs_r.size_bytes == 4 * P_ROOT
    assert ag_b.group.n == 2048 and ag_b.group.nodes == 256
    v = volumes(s, 8)
    n = parameter_counts(catalog.model("llama2-7b"))["n_params"]
    assert v["fsdp_all_gather"] == 2 * n  # bf16 parameters gathered once a step
    assert v["fsdp_reduce_scatter"] == 4 * n  # fp32 gradients reduce-scattered once a step
    assert set(v) == {"fsdp_all_gather", "fsdp_reduce_scatter"}
    # the bus bytes of one rank: (n-1)/n of the size
    assert ag_b.bus_bytes_per_step == pytest.approx(32 * 2 * P_LAYER * 2047 / 2048)


def test_fsdp_reshard_after_forward_gathers_again_in_backward():
    s = RunSpec(nodes=2, reshard_after_forward=True, **BASE)
    (ag_bwd,) = by(s, "fsdp_all_gather_bwd")
    assert ag_bwd.calls == 31 and ag_bwd.size_bytes == 2 * P_LAYER


def test_fsdp_grad_accumulation_gathers_each_micro_batch_reduces_once():
    s = RunSpec(nodes=2, global_batch=64, **BASE)  # 16 ranks x micro 2 x accumulation 2
    assert s.grad_accum == 2
    assert by(s, "fsdp_all_gather", "block")[0].calls == 64
    assert by(s, "fsdp_reduce_scatter", "block")[0].calls == 32


def test_hsdp_2048():
    s = RunSpec(nodes=256, dp_shard=8, dp_replicate=256, **BASE)
    (rs_b,) = by(s, "fsdp_reduce_scatter", "block")
    (ar_b,) = by(s, "hsdp_all_reduce", "block")
    (ar_r,) = by(s, "hsdp_all_reduce", "root")
    assert rs_b.group.n == 8 and rs_b.group.nodes == 1  # shard group inside a node
    assert by(s, "fsdp_all_gather", "block")[0].group.nodes == 1
    assert ar_b.group.n == 256 and ar_b.group.nodes == 256 and ar_b.group.per_node == 1  # one replica a node
    assert ar_b.size_bytes == 4 * P_LAYER / 8 == 101_191_680
    assert ar_b.calls == 32 and ar_r.size_bytes == 4 * P_ROOT / 8
    v = volumes(s, 8)
    n = parameter_counts(catalog.model("llama2-7b"))["n_params"]
    assert v["hsdp_all_reduce"] == pytest.approx(4 * n / 8)


def test_tp2_without_sequence_parallelism():
    s = RunSpec(nodes=1, tp=2, global_batch=16, **BASE)  # dp 4, local batch 4 = 2 micro batches
    m = 2
    assert unit_params(s).block == (P_LAYER - 2 * D) / 2 + 2 * D
    fwd = [c for c in by(s, "tp_all_reduce", "layer") if c.phase == "forward"][0]
    bwd = [c for c in by(s, "tp_all_reduce", "layer") if c.phase == "backward"][0]
    assert fwd.size_bytes == A == 67_108_864 and fwd.calls == m * L * 2 and bwd.calls == m * L * 2
    assert fwd.group.n == 2 and fwd.group.nodes == 1 and fwd.stream == "compute"
    (emb,) = by(s, "tp_all_reduce", "embedding")
    (head,) = by(s, "tp_all_reduce", "head")
    assert emb.calls == m and head.calls == m and head.phase == "backward"
    # the harness gathers the bf16 logits; Megatron's vocab-parallel loss (the default) all-reduces
    # three fp32 numbers a token instead
    (logits,) = by(s, "tp_logits_all_gather", options=HARNESS)
    assert logits.size_bytes == 2 * 4096 * V * 2
    (loss,) = by(s, "tp_loss_all_reduce")
    assert loss.size_bytes == 2 * 4096 * 4 and loss.calls == 3 * m and loss.op == "all_reduce"
    assert not [c for c in layout_collectives(s, 8) if c.name == "tp_logits_all_gather"]
    # FSDP over the 4 data-parallel ranks at stride 2
    ag = by(s, "fsdp_all_gather", "block")[0]
    assert ag.group.n == 4 and ag.size_bytes == 2 * unit_params(s).block


def test_tp4_sequence_parallel_and_checkpointing():
    s = RunSpec(nodes=1, tp=4, sequence_parallel=True, activation_checkpointing="full", global_batch=4, **BASE)
    m = 1
    ag = [c for c in by(s, "tp_all_gather", "layer")]
    rs = [c for c in by(s, "tp_reduce_scatter", "layer")]
    fwd_ag = sum(c.calls for c in ag if c.phase == "forward")
    bwd_ag = sum(c.calls for c in ag if c.phase == "backward")
    assert fwd_ag == m * L * 4 and bwd_ag == m * L * 2  # recomputed forward counted with the forward
    assert sum(c.calls for c in rs) == m * L * 6
    assert all(c.size_bytes == A for c in ag + rs)
    assert not [c for c in layout_collectives(s, 8) if c.name == "tp_all_reduce"]


def test_pp4_sends_and_bubble():
    s = RunSpec(nodes=4, pp=4, global_batch=64, pp_microbatches=4, **BASE)  # dp 8, local 8 = 4 micro of 2
    sends = by(s, "pp_send")
    assert {c.phase for c in sends} == {"forward", "backward"}
    assert all(c.size_bytes == A and c.calls == 4 for c in sends)
    assert sends[0].group.nodes == 2  # neighbouring stages are a node apart
    assert unit_params(s).blocks == 8
    assert unit_params(s).root == V * D + D  # the last stage: head and norm
    assert bubble_fraction(s) == pytest.approx(3 / 7)
    assert by(s, "fsdp_reduce_scatter", "block")[0].calls == 8
    inter = RunSpec(
        nodes=4, pp=4, pp_schedule="interleaved_1f1b", pp_stages_per_rank=2, global_batch=64, pp_microbatches=4, **BASE
    )
    assert bubble_fraction(inter) == pytest.approx(3 / 11)


def test_one_gpu_issues_nothing():
    assert layout_collectives(RunSpec(**{**BASE, "procs_per_node": 1}), 8) == []


def test_zero1_replaces_the_ddp_all_reduce():
    s = RunSpec(nodes=2, dp_replicate=16, dp_shard=1, global_batch=32, **BASE)
    ddp = {c.name for c in layout_collectives(s, 8)}
    assert "hsdp_all_reduce" in ddp and not any(n.startswith("zero1") for n in ddp)
    z = layout_collectives(s, 8, ModelOptions(distributed_optimizer=True))
    assert not [c for c in z if c.name == "hsdp_all_reduce"]
    (rs,) = [c for c in z if c.name == "zero1_reduce_scatter" and c.unit == "block"]
    (ag,) = [c for c in z if c.name == "zero1_all_gather" and c.unit == "block"]
    assert rs.size_bytes == 4 * P_LAYER and ag.size_bytes == 2 * P_LAYER and ag.calls == L and rs.group.n == 16
    # reduce-scatter + all-gather move the all-reduce's bytes (busbw convention)
    ar = [c for c in layout_collectives(s, 8) if c.name == "hsdp_all_reduce" and c.unit == "block"][0]
    assert rs.bus_bytes_per_step + 2 * ag.bus_bytes_per_step == pytest.approx(ar.bus_bytes_per_step)


def test_zero1_shards_master_weights_and_moments_in_the_memory_estimate():
    from scalestudy.perfmodel.predict import memory_bytes
    from scalestudy.spec.memory_estimate import estimate_memory

    s = RunSpec(nodes=2, dp_replicate=16, dp_shard=1, global_batch=32, **BASE)
    est = estimate_memory(s)
    assert memory_bytes(s) == est.total_bytes
    tp = RunSpec(nodes=2, tp=4, global_batch=32, **BASE)
    lg = estimate_memory(tp).logits_bytes
    assert memory_bytes(tp) == pytest.approx(estimate_memory(tp).total_bytes - lg * 3 / 4, abs=1)  # vocab-parallel
    assert memory_bytes(tp, HARNESS) == estimate_memory(tp).total_bytes  # gathered logits
    z = memory_bytes(s, ModelOptions(distributed_optimizer=True))
    # 12 bytes a parameter (fp32 master + two moments) over 16 ranks; params and grads stay whole
    assert est.total_bytes - z == pytest.approx((est.params_bytes + est.optimizer_bytes) * 15 / 16, abs=1)
    fsdp = RunSpec(nodes=2, global_batch=32, **BASE)  # ZeRO-3 already shards: the option changes nothing
    assert memory_bytes(fsdp, ModelOptions(distributed_optimizer=True)) == estimate_memory(fsdp).total_bytes


def test_elementwise_work_by_kernel_set():
    from scalestudy.perfmodel import compute as C

    for model, mlp in (("gpt-1.7b", "gelu"), ("llama2-7b", "swiglu")):
        s = RunSpec(**{**BASE, "model": model})
        cfg = s.model_config()
        d, kv, f = cfg.dim, cfg.n_kv_heads * cfg.head_dim, cfg.ffn_dim
        for p in C.ELEMENTWISE.values():
            for i, field in ((0, "elem_bytes_fwd_layer"), (1, "elem_bytes_bwd_layer")):
                per_token = (
                    p.norm_residual[i] * d
                    + p.rope[i] * (d + kv)
                    + getattr(p, mlp)[i] * f
                    + p.attention_scores[i] * cfg.n_heads * s.seq_len
                ) * C.BYTES_PER_ELEMENT
                assert getattr(C.work(s, passes=p), field) == pytest.approx(per_token * s.micro_batch * s.seq_len)
    assert C.FUSED.gelu < C.FUSED.swiglu and C.UNFUSED.norm_residual > C.FUSED.norm_residual
    # flash attention keeps the [heads, s, s] probabilities on chip; Megatron 2021 wrote them out
    tp = RunSpec(**{**BASE, "model": "gpt-1.7b", "tp": 2})
    extra = {
        n: C.work(tp, passes=p).elem_bytes_fwd_layer - C.work(tp).elem_bytes_fwd_layer for n, p in C.ELEMENTWISE.items()
    }
    cfg = tp.model_config()
    assert extra["fused"] == 0 and extra["megatron-2021"] == pytest.approx(
        4.5 * cfg.n_heads / 2 * tp.seq_len * tp.micro_batch * tp.seq_len * C.BYTES_PER_ELEMENT
    )
    gqa = RunSpec(**{**BASE, "model": "llama3-8b"})  # k and v repeated to every query head
    cfg = gqa.model_config()
    no_gqa = C.work(gqa, passes=replace(C.FUSED, gqa_repeat=(0.0, 0.0))).elem_bytes_fwd_layer
    assert C.work(gqa).elem_bytes_fwd_layer - no_gqa == pytest.approx(
        2 * (cfg.dim + cfg.n_kv_heads * cfg.head_dim) * gqa.micro_batch * gqa.seq_len * C.BYTES_PER_ELEMENT
    )


def test_selective_op_recomputes_every_second_matrix_product_of_a_block():
    from scalestudy.perfmodel.compute import RECOMPUTE, selective_op_matmul_fraction

    # torchtitan's policy: wq, wk, wv, wo, w1, w3, w2 in forward order, every second recomputed: wk, wo, w3
    l70 = catalog.model("llama2-70b")  # dim 8192, 8 KV heads of 128, ffn 28672
    assert selective_op_matmul_fraction(l70) == pytest.approx((1024 + 8192 + 28672) / (2 * 8192 + 2 * 1024 + 3 * 28672))
    l13 = catalog.model("llama2-13b")  # no GQA: wk as wide as wq
    assert selective_op_matmul_fraction(l13) == pytest.approx((2 * 5120 + 13824) / (4 * 5120 + 3 * 13824))
    gpt = catalog.model("gpt-1.7b")  # GELU: wq, wk, wv, wo, fc1, fc2 -> wk, wo, fc2
    assert selective_op_matmul_fraction(gpt) == pytest.approx(0.5)
    opts = ModelOptions(recompute="selective_op")
    assert opts.recompute_fractions(l70) == (selective_op_matmul_fraction(l70), 0.0, 1.0)
    assert ModelOptions(recompute="selective_layer").recompute_fractions(l70) == RECOMPUTE["selective_layer"]
    assert ModelOptions().recompute_fractions(l70) is None
    with pytest.raises(ValueError, match="selective_op"):
        ModelOptions(recompute="selective_mm")
