"""RunSpec -> megatron-core arguments (harness/megatron_backend/mapping.py), and the refusal of
layouts megatron-core cannot express. The mapping itself needs no megatron-core; the tests that
build megatron-core's config objects from it skip without it (the optional extra `megatron`)."""

import inspect
import json

import pytest
import torch

from scalestudy.harness import faults
from scalestudy.harness.megatron_backend import mapping, megatron_core_version
from scalestudy.harness.megatron_backend.mapping import MegatronUnsupported, plan, refusals
from scalestudy.spec.run import RunSpec, SpecError

HAVE_MEGATRON = megatron_core_version() is not None
needs_megatron = pytest.mark.skipif(
    not HAVE_MEGATRON, reason="megatron-core is not installed (pip install 'scalestudy[megatron]')"
)


def S(**kw) -> RunSpec:
    kw.setdefault("device", "cuda")
    return RunSpec(**kw)


# ---- what the plan holds ---------------------------------------------------------------------


def test_llama2_7b_shape_and_llama_settings():
    p = plan(S(model="llama2-7b", seq_len=4096, micro_batch=2, activation_checkpointing="full"))
    t = p.transformer
    assert (
        t["num_layers"],
        t["hidden_size"],
        t["num_attention_heads"],
        t["num_query_groups"],
        t["kv_channels"],
        t["ffn_hidden_size"],
    ) == (32, 4096, 32, 32, 128, 11008)
    assert t["normalization"] == "RMSNorm" and t["layernorm_epsilon"] == 1e-5
    assert t["gated_linear_unit"] and t["activation_func"] is torch.nn.functional.silu
    assert not t["add_bias_linear"] and not t["add_qkv_bias"]
    assert t["hidden_dropout"] == t["attention_dropout"] == 0.0
    assert t["bf16"] and t["params_dtype"] is torch.bfloat16 and t["pipeline_dtype"] is torch.bfloat16
    assert (t["recompute_granularity"], t["recompute_method"], t["recompute_num_layers"]) == ("full", "uniform", 1)
    assert not t["perform_initialization"]  # weights come from the torch backend's init by name
    m = p.model
    assert m["vocab_size"] == 32000 and m["max_sequence_length"] == 4096
    assert m["position_embedding_type"] == "rope" and m["rotary_base"] == 10000
    assert m["share_embeddings_and_output_weights"] is False
    assert p.schedule == {
        "name": "forward_backward_no_pipelining",
        "num_microbatches": 1,
        "micro_batch_size": 2,
        "seq_length": 4096,
    }
    assert p.data_parallel == "none"
    assert p.ddp["grad_reduce_in_fp32"] and not p.ddp["use_distributed_optimizer"]


def test_gqa_70b_and_1b():
    assert plan(S(model="llama2-70b")).transformer["num_query_groups"] == 8
    t = plan(S(model="llama-1b")).transformer
    assert (t["num_attention_heads"], t["num_query_groups"], t["kv_channels"]) == (32, 4, 64)


def test_optimizer_is_the_torch_backends():
    o = plan(S()).optimizer
    assert (o["optimizer"], o["adam_beta1"], o["adam_beta2"], o["adam_eps"], o["weight_decay"]) == (
        "adam",
        0.9,
        0.95,
        1e-8,
        0.1,
    )
    assert o["decoupled_weight_decay"] and o["clip_grad"] == 0.0 and o["lr"] == o["min_lr"] == 3e-4
    o = plan(S(optimizer="sgd", lr=0.5)).optimizer
    assert (o["optimizer"], o["sgd_momentum"], o["weight_decay"], o["clip_grad"], o["lr"]) == (
        "sgd",
        0.0,
        0.0,
        0.0,
        0.5,
    )
    o = plan(S(precision="fp32")).optimizer
    assert not o["bf16"] and o["params_dtype"] is torch.float32


@pytest.mark.parametrize(
    "kw, kind, distopt, instances",
    [
        (dict(procs_per_node=8), "distributed_optimizer", True, 1),  # flat FSDP
        (dict(procs_per_node=8, dp_replicate=8), "ddp", False, 1),
        (dict(nodes=2, procs_per_node=4, dp_replicate=2), "partial_distributed_optimizer", True, 2),  # HSDP
        (dict(procs_per_node=2, tp=2), "none", False, 1),
    ],
)
def test_data_parallel_counterparts(kw, kind, distopt, instances):
    p = plan(S(**kw))
    assert p.data_parallel == kind
    assert p.ddp["use_distributed_optimizer"] is distopt is p.optimizer["use_distributed_optimizer"]
    dp = S(**kw).dp
    assert p.ddp["overlap_grad_reduce"] is (dp > 1)
    assert p.ddp["overlap_param_gather"] is (distopt and dp > 1)
    assert p.ddp.get("num_distributed_optimizer_instances", 1) == instances
    assert p.parallel.get("num_distributed_optimizer_instances", 1) == instances


def test_model_parallel_degrees_and_schedules():
    p = plan(S(procs_per_node=8, tp=2, pp=2, sequence_parallel=True, global_batch=16, pp_microbatches=8))
    assert p.parallel == {
        "tensor_model_parallel_size": 2,
        "pipeline_model_parallel_size": 2,
        "virtual_pipeline_model_parallel_size": None,
        "context_parallel_size": 1,
        "order": "tp-cp-ep-dp-pp",
    }
    assert p.transformer["sequence_parallel"] and p.transformer["deallocate_pipeline_outputs"]
    assert p.schedule["name"] == "forward_backward_pipelining_without_interleaving"
    assert p.schedule["num_microbatches"] == 8
    assert "overlap_p2p_comm" not in p.transformer  # the non-interleaved schedule refuses it
    p = plan(S(procs_per_node=4, pp=4, pp_schedule="interleaved_1f1b", pp_stages_per_rank=2))
    assert p.parallel["virtual_pipeline_model_parallel_size"] == 2
    assert p.transformer["virtual_pipeline_model_parallel_size"] == 2
    assert p.schedule["name"] == "forward_backward_pipelining_with_interleaving"
    # Megatron-LM's defaults for the interleaved schedule (batched p2p is wrong at pp = 2)
    assert p.transformer["overlap_p2p_comm"] and not p.transformer["batch_p2p_comm"]


def test_gradient_accumulation_without_pipeline():
    p = plan(S(procs_per_node=2, micro_batch=2, global_batch=16))  # dp 2: 4 microbatches per rank
    assert p.schedule["num_microbatches"] == 4


def test_record_is_json():
    rec = plan(S(model="llama2-7b", activation_checkpointing="full")).record()
    back = json.loads(json.dumps(rec))
    assert back["transformer"]["activation_func"] == "silu"
    assert back["transformer"]["params_dtype"] == "torch.bfloat16"
    assert back["data_parallel"] == "none" and back["notes"]


# ---- refusals --------------------------------------------------------------------------------

REFUSED = {
    "cpu": (dict(device="cpu"), "device"),
    "compile": (dict(compile=True), "compile"),
    "gpipe": (dict(procs_per_node=2, pp=2, pp_schedule="gpipe"), "pp_schedule"),
    "pp-grad-accum": (dict(procs_per_node=2, pp=2, global_batch=4), "pp_microbatches"),
    "reshard": (dict(procs_per_node=2, reshard_after_forward=True), "reshard_after_forward"),
    "prefetch": (dict(procs_per_node=2, fsdp_forward_prefetch=2), "fsdp_forward_prefetch"),
    "sgd-sharded": (dict(procs_per_node=2, optimizer="sgd"), "optimizer"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_with_a_clear_error(name):
    kw, field = REFUSED[name]
    spec = RunSpec(**{"device": "cuda", **kw})
    with pytest.raises(MegatronUnsupported) as e:
        plan(spec)
    assert field in [f for f, _ in e.value.problems]
    assert "megatron-core cannot run this spec" in str(e.value)
    assert isinstance(e.value, SpecError)
    assert faults.classify(e.value) == "invalid_config"  # a run ends with status invalid_config


def test_pipeline_accumulation_refusal_says_what_to_set():
    ((field, reason),) = refusals(S(procs_per_node=2, pp=2, global_batch=8))  # 4 schedules of 2 microbatches
    assert field == "pp_microbatches" and "set pp_microbatches=8" in reason
    assert not refusals(S(procs_per_node=2, pp=2, global_batch=8, pp_microbatches=8))


def test_every_problem_at_once():
    problems = refusals(RunSpec(device="cpu", compile=True, procs_per_node=2, reshard_after_forward=True))
    assert {f for f, _ in problems} == {"device", "compile", "reshard_after_forward"}


def test_what_is_not_refused():
    # dp = 1: the FSDP-only knobs mean nothing and are not refused; sgd runs without sharding
    assert not refusals(S(reshard_after_forward=True, fsdp_forward_prefetch=3, optimizer="sgd"))
    assert not refusals(S(procs_per_node=2, dp_replicate=2, optimizer="sgd"))
    assert not refusals(S(procs_per_node=4, tp=2, pp=2, sequence_parallel=True, global_batch=4, pp_microbatches=4))
    assert not refusals(S(device="cpu"), allow_cpu=True)


def test_features_the_installed_megatron_core_lacks():
    hsdp = S(nodes=2, procs_per_node=2, dp_replicate=2)
    assert refusals(hsdp, features={mapping.VIRTUAL_PIPELINE})[0][0] == "dp_replicate"
    assert not refusals(hsdp, features=mapping.KNOWN_FEATURES)
    vpp = S(procs_per_node=2, pp=2, pp_schedule="interleaved_1f1b", pp_stages_per_rank=2)
    assert refusals(vpp, features=set())[0][0] == "pp_schedule"


# ---- against the installed megatron-core -------------------------------------------------------

SPECS = {
    "7b-ac": dict(model="llama2-7b", seq_len=4096, micro_batch=2, activation_checkpointing="full"),
    "70b-gqa-tp8-sp": dict(model="llama2-70b", procs_per_node=8, tp=8, sequence_parallel=True),
    "tp-pp": dict(procs_per_node=4, tp=2, pp=2, global_batch=2, pp_microbatches=2),
    "interleaved": dict(procs_per_node=2, pp=2, pp_schedule="interleaved_1f1b", pp_stages_per_rank=2),
    "fsdp-fp32": dict(procs_per_node=4, precision="fp32"),
    "hsdp": dict(nodes=2, procs_per_node=2, dp_replicate=2),
    "ddp-sgd": dict(procs_per_node=2, dp_replicate=2, optimizer="sgd"),
}


@needs_megatron
@pytest.mark.parametrize("name", list(SPECS))
def test_megatron_core_accepts_the_plan(name):
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.optimizer import OptimizerConfig
    from megatron.core.transformer.transformer_config import TransformerConfig

    p = plan(S(**SPECS[name]))
    TransformerConfig(**p.transformer)  # its __post_init__ checks shapes, recompute and pipeline settings
    DistributedDataParallelConfig(**p.ddp)
    OptimizerConfig(**p.optimizer)
    inspect.signature(parallel_state.initialize_model_parallel).bind(**p.parallel)
    inspect.signature(GPTModel.__init__).bind(
        None,
        None,
        None,
        pre_process=True,
        post_process=True,
        vp_stage=None,
        **{k: v for k, v in p.model.items() if k not in ("vocab_size", "max_sequence_length")},
        vocab_size=p.model["vocab_size"],
        max_sequence_length=p.model["max_sequence_length"],
    )


@needs_megatron
def test_installed_features():
    from scalestudy.harness.megatron_backend.model import installed_features

    assert installed_features() == mapping.KNOWN_FEATURES


def test_megatron_core_version_is_recorded():
    from scalestudy.harness.provenance import LIBRARIES

    assert "megatron-core" in LIBRARIES  # run.json's provenance.libraries names the installed version
