"""What the public MLPerf runs need of the model: context parallelism, embedding pipeline stages, FP8
linear layers at their achievable rate, overlapped pipeline sends, and per-family software settings."""

from pathlib import Path

import pytest

from scalestudy.perfmodel import achievable
from scalestudy.perfmodel import compute as C
from scalestudy.perfmodel.beside import beside_options, not_expressible
from scalestudy.perfmodel.cluster import load_cluster
from scalestudy.perfmodel.layout_comm import groups, kv_bytes, layout_collectives
from scalestudy.perfmodel.options import ModelOptions
from scalestudy.perfmodel.predict import cached_calibration, predict
from scalestudy.spec.run import RunSpec

REPO = Path(__file__).resolve().parents[2]
LLAMA405 = dict(
    model="llama3.1-405b",
    seq_len=8192,
    micro_batch=1,
    nodes=64,
    procs_per_node=8,
    device="cuda",
    tp=8,
    pp=8,
    pp_schedule="interleaved_1f1b",
    pp_stages_per_rank=8,
    pp_microbatches=288,
    global_batch=1152,
    sequence_parallel=True,
    backend="megatron",
    pp_embedding_stages=True,
)


def spec(**kw) -> RunSpec:
    return RunSpec(**{**LLAMA405, **kw})


def test_context_parallelism_splits_the_sequence_and_passes_keys_and_values():
    one, two = C.work(spec(cp=1, global_batch=2304)), C.work(spec(cp=2))
    assert two.matmul_flops_fwd_layer == pytest.approx(one.matmul_flops_fwd_layer / 2)
    assert two.attn_flops_fwd_layer == pytest.approx(one.attn_flops_fwd_layer / 2)  # half the queries, all keys
    s = spec(cp=2)
    g = groups(s, 8)
    assert g["cp"].n == 2 and g["cp"].nodes == 2  # TP 8 fills the node: the CP peer is on the next one
    assert g["dp_shard"].n == s.dp_shard * 2  # the gradients reduce over dp x cp
    sends = [c for c in layout_collectives(s, 8) if c.name == "cp_send"]
    assert {c.phase for c in sends} == {"forward", "backward"}
    fwd = next(c for c in sends if c.phase == "forward")
    assert fwd.size_bytes == kv_bytes(s) == 2 * 4096 * 8 * 128 / 8 * 2 and fwd.stream == "cp"


def test_embedding_stages_take_a_layers_place_and_the_heaviest_rank_holds_a_full_chunk():
    cfg = spec(cp=2).model_config()
    assert C.layers_per_rank(spec(cp=2), cfg) == (126 + 2) // 64 * 8 == 16
    w = C.work(spec(cp=2))
    assert not w.has_head and w.head_matmul_flops_fwd == 0.0  # the output layer is lighter than a layer


def test_fp8_runs_the_layers_products_at_the_achievable_fp8_rate_and_adds_their_casts():
    carry = achievable.precision_carry("NVIDIA H100 80GB HBM3", "NVIDIA H200", "fp8")
    assert carry.factor == pytest.approx((1402.6 / 989.4) / (806.55 / 989.4))
    assert "MAMF" in carry.target.source
    bf, f8 = C.work(spec(cp=2)), C.work(spec(cp=2, precision="fp8"))
    assert f8.elem_bytes_fwd_layer > bf.elem_bytes_fwd_layer and f8.head_matmul_flops_fwd == bf.head_matmul_flops_fwd
    with pytest.raises(ValueError, match="no measured or published achievable fp8 matmul rate for NVIDIA A100"):
        achievable.precision_carry("NVIDIA A100-SXM4-80GB", "NVIDIA H200", "fp8")
    cal = cached_calibration("data/h200-reference/raw", REPO)
    eos = load_cluster("h100-eos", REPO)
    a, b = (predict(spec(cp=2, precision=p), eos, cal, band=False) for p in ("bf16", "fp8"))
    assert a.values["step_time_s"] > 1.3 * b.values["step_time_s"]


def test_overlapped_pipeline_sends_hide_behind_the_next_chunk():
    cal = cached_calibration("data/h200-reference/raw", REPO)
    eos = load_cluster("h100-eos", REPO)
    s = spec(cp=2, precision="fp8")
    off, on = (predict(s, eos, cal, band=False, options=ModelOptions(pp_comm_overlap=v)).values for v in (False, True))
    assert on["exposed_comm_s"] < off["exposed_comm_s"]
    assert on["overlap_slowdown_s"] > off["overlap_slowdown_s"]  # hidden sends slow the computation they overlap


def test_software_settings_by_family_first_match_wins_and_name_their_source():
    conf = {
        "cluster": "h100-eos",
        "options": {"grad_reduce_dtype": "bf16"},
        "software": [
            {"match": {"model": "gpt3-175b"}, "options": {"tp_comm_overlap": True}, "source": "a"},
            {"match": {"model": "llama3.1-405b", "cp": 2}, "options": {"param_gather_dtype": "fp8"}, "source": "b"},
            {"match": {"model": "llama3.1-405b"}, "options": {"tp_comm_overlap": False}, "source": "c"},
        ],
    }
    assert beside_options(spec(cp=2), conf) == ({"grad_reduce_dtype": "bf16", "param_gather_dtype": "fp8"}, "b")
    assert beside_options(spec(cp=1, global_batch=2304), conf)[1] == "c"
    with pytest.raises(ValueError, match="match names colour, not run-spec fields"):
        beside_options(spec(cp=2), {**conf, "software": [{"match": {"colour": 1}, "options": {}, "source": "x"}]})


def test_a_number_format_without_a_rate_is_named_not_guessed():
    assert not_expressible(spec(cp=2, precision="fp8")) is None


def test_measured_shapes_set_the_layers_rate_against_the_calibrations():
    from scalestudy.perfmodel.gemm_rates import GemmRates, shape_factor
    from scalestudy.spec.gemm import layer_gemms

    def table(layout, dtype, rate, head=500.0):
        return {
            (layout, "bf16" if g.projection == "output" else dtype, g.projection, g.pass_): (
                head if g.projection == "output" else rate
            )
            for g in layer_gemms(*layout.split("/")[:1], *map(int, layout.split("/")[1:]))
        }

    rates = GemmRates(
        "NVIDIA H200", {**table("llama2-7b/8192/1", "bf16", 700.0, 700.0), **table("gpt3-175b/2048/4", "fp8", 1400.0)}
    )
    sf = shape_factor(rates, "gpt3-175b/2048/4", "fp8", ("llama2-7b/8192/1",))
    assert sf.layer == pytest.approx(2.0) and sf.head == pytest.approx(500 / 700)
    assert shape_factor(rates, "gpt3-175b/2048/4", "bf16", ("llama2-7b/8192/1",)) is None


def test_the_committed_h100_gemm_runs_give_every_layout_a_shape_factor_in_both_precisions():
    import subprocess
    import sys

    from conftest import REPO, child_env

    out = subprocess.run(
        [sys.executable, "-m", "scalestudy", "model", "gemm-factors", "data/h100-gemm/raw"],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "measured products of 22 layouts on NVIDIA H100 80GB HBM3" in out.stdout
    rows = {ln.split()[0]: ln.split()[1:] for ln in out.stdout.splitlines()[2:]}
    assert len(rows) == 22 and all("-" not in r for r in rows.values())
    assert rows["llama2-7b/8192/1"][1] == "1.000"  # S of the calibration layout itself
    out = subprocess.run(
        [sys.executable, "-m", "scalestudy", "model", "gemm-factors", "data/no-such-gemm"],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "no finished gemm run under data/no-such-gemm" in out.stderr
