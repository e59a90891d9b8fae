"""RunSpec -> megatron-core arguments, in one place.

Pure: a function of the spec (and of the features the installed megatron-core offers, which the
caller detects); it imports torch for dtypes and the activation, but neither megatron-core nor any
process group, so a spec can be checked anywhere. A layout that megatron-core cannot express is
refused with `MegatronUnsupported` (a SpecError, so a run ends with status `invalid_config`),
never approximated.

How each spec field maps, and why each refusal: docs/megatron-backend.md; the plan's `notes`
(written to the raw log) say it for one run.

Rank layout: megatron's order tp-cp-ep-dp-pp with dp = dp_replicate x dp_shard (shard fastest) puts
every rank at the same coordinates as the torch backend's mesh (pp, dp_replicate, dp_shard, tp),
so each rank sees the same data in both backends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import torch
import torch.nn.functional as F

from scalestudy.spec.run import RunSpec, SpecError

# What an installed megatron-core may or may not offer; model.installed_features() detects them.
PARTIAL_DISTRIBUTED_OPTIMIZER = "partial_distributed_optimizer"  # num_distributed_optimizer_instances
VIRTUAL_PIPELINE = "virtual_pipeline"  # GPTModel(vp_stage=...) and the interleaved schedule
KNOWN_FEATURES = frozenset({PARTIAL_DISTRIBUTED_OPTIMIZER, VIRTUAL_PIPELINE})

RANK_ORDER = "tp-cp-ep-dp-pp"


class MegatronUnsupported(SpecError):
    """A spec whose layout megatron-core cannot express; `problems` lists (field, reason)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        ValueError.__init__(self, "megatron-core cannot run this spec: " + "; ".join(f"{f}: {r}" for f, r in problems))


@dataclass(frozen=True)
class MegatronPlan:
    """Arguments for megatron-core, derived from one RunSpec."""

    parallel: dict[str, Any]  # parallel_state.initialize_model_parallel(**parallel)
    transformer: dict[str, Any]  # TransformerConfig(**transformer)
    model: dict[str, Any]  # GPTModel(config, layer_spec, pre_process=..., post_process=..., vp_stage=..., **model)
    ddp: dict[str, Any]  # DistributedDataParallelConfig(**ddp)
    optimizer: dict[str, Any]  # OptimizerConfig(**optimizer)
    schedule: dict[str, Any]  # num_microbatches, micro_batch_size, seq_length, name
    data_parallel: str  # "distributed_optimizer", "partial_distributed_optimizer", "ddp" or "none" (dp = 1)
    notes: tuple[str, ...] = field(default=())

    def record(self) -> dict:
        """A JSON-able description for the raw log."""

        def plain(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            if isinstance(v, (str, int, float, bool)) or v is None:
                return v
            return getattr(v, "__name__", None) or str(v)

        return {
            "parallel": plain(self.parallel),
            "transformer": plain(self.transformer),
            "model": plain(self.model),
            "ddp": plain(self.ddp),
            "optimizer": plain(self.optimizer),
            "schedule": plain(self.schedule),
            "data_parallel": self.data_parallel,
            "notes": list(self.notes),
        }


def refusals(spec: RunSpec, features: Iterable[str] | None = None, *, allow_cpu: bool = False) -> list[tuple[str, str]]:
    """Why megatron-core cannot run `spec` as the torch backend would: (field, reason) pairs.
    `features`: what the installed megatron-core offers (model.installed_features()); None: all
    of KNOWN_FEATURES. `allow_cpu`: for the CPU tests, which build megatron-core's parts (layers,
    process groups), never a training run, on CPU."""
    have = KNOWN_FEATURES if features is None else frozenset(features)
    p: list[tuple[str, str]] = []
    if spec.device != "cuda" and not allow_cpu:
        p.append(
            (
                "device",
                "megatron-core's GPTModel runs on CUDA only (its rotary embedding, model-parallel RNG "
                "and schedules call torch.cuda); use device cuda or backend torch",
            )
        )
    if spec.compile:
        p.append(
            (
                "compile",
                "megatron-core does not support torch.compile of its transformer layers; "
                "run the megatron backend with compile false",
            )
        )
    if spec.pp > 1:
        if spec.pp_schedule == "gpipe":
            p.append(
                (
                    "pp_schedule",
                    "megatron-core has no GPipe (all forwards, then all backwards) pipeline "
                    "schedule; use 1f1b or interleaved_1f1b",
                )
            )
        if spec.grad_accum > 1:
            p.append(
                (
                    "pp_microbatches",
                    f"megatron-core runs all {spec.grad_accum * spec.pp_microbatches} microbatches of a step in one "
                    f"pipeline schedule (one fill and drain), the torch backend runs grad_accum={spec.grad_accum} "
                    f"schedules of pp_microbatches={spec.pp_microbatches}; set pp_microbatches="
                    f"{spec.grad_accum * spec.pp_microbatches} so that both backends run the same step",
                )
            )
        if spec.pp_schedule == "interleaved_1f1b" and spec.pp_stages_per_rank > 1 and VIRTUAL_PIPELINE not in have:
            p.append(("pp_schedule", "the installed megatron-core has no virtual pipeline stages (GPTModel vp_stage)"))
    if spec.dp_shard > 1 and spec.reshard_after_forward:
        p.append(
            (
                "reshard_after_forward",
                "megatron-core's distributed optimizer keeps whole parameters on every "
                "data-parallel rank between forward and backward (it shards optimizer "
                "state and gradients): there is no parameter resharding to switch on",
            )
        )
    if spec.dp_shard > 1 and (spec.fsdp_forward_prefetch, spec.fsdp_backward_prefetch) != (1, 1):
        p.append(
            (
                "fsdp_forward_prefetch",
                "prefetch depths are torch-FSDP settings; megatron-core overlaps its "
                "parameter all-gather one bucket ahead and has no depth to set: leave "
                "fsdp_forward_prefetch and fsdp_backward_prefetch at 1",
            )
        )
    if spec.dp_shard > 1 and spec.optimizer != "adamw":
        p.append(
            (
                "optimizer",
                f"megatron-core's distributed optimizer (the counterpart of dp_shard > 1) runs Adam "
                f"only, not {spec.optimizer}; use optimizer adamw, or dp_shard 1",
            )
        )
    if spec.dp_replicate > 1 and spec.dp_shard > 1 and PARTIAL_DISTRIBUTED_OPTIMIZER not in have:
        p.append(
            (
                "dp_replicate",
                "HSDP (dp_replicate > 1 with dp_shard > 1) needs megatron-core's partial distributed "
                "optimizer (num_distributed_optimizer_instances), which the installed megatron-core "
                "lacks",
            )
        )
    return p


def check(spec: RunSpec, features: Iterable[str] | None = None, *, allow_cpu: bool = False) -> None:
    problems = refusals(spec, features, allow_cpu=allow_cpu)
    if problems:
        raise MegatronUnsupported(problems)


def data_parallel_kind(spec: RunSpec) -> str:
    if spec.dp_replicate > 1 and spec.dp_shard > 1:
        return "partial_distributed_optimizer"
    if spec.dp_shard > 1:
        return "distributed_optimizer"  # flat FSDP's counterpart
    if spec.dp_replicate > 1:
        return "ddp"
    return "none"  # dp = 1: nothing to shard or reduce; megatron-core's (non-distributed) mixed-precision optimizer


def plan(spec: RunSpec, features: Iterable[str] | None = None, *, allow_cpu: bool = False) -> MegatronPlan:
    """The megatron-core arguments for `spec`; MegatronUnsupported if it cannot be expressed
    (`features` and `allow_cpu` as for `refusals`)."""
    check(spec, features, allow_cpu=allow_cpu)
    cfg = spec.model_config()
    bf16 = spec.precision == "bf16"
    dtype = torch.bfloat16 if bf16 else torch.float32
    vp = spec.pp_stages_per_rank if spec.pp > 1 and spec.pp_schedule == "interleaved_1f1b" else None
    dp_kind = data_parallel_kind(spec)
    distopt = dp_kind in ("distributed_optimizer", "partial_distributed_optimizer")
    instances = spec.dp_replicate if dp_kind == "partial_distributed_optimizer" else 1

    parallel = {
        "tensor_model_parallel_size": spec.tp,
        "pipeline_model_parallel_size": spec.pp,
        "virtual_pipeline_model_parallel_size": vp,
        "context_parallel_size": 1,
        "order": RANK_ORDER,
    }
    if instances > 1:
        parallel["num_distributed_optimizer_instances"] = instances

    transformer: dict[str, Any] = {
        # shape
        "num_layers": cfg.n_layers,
        "hidden_size": cfg.dim,
        "num_attention_heads": cfg.n_heads,
        "num_query_groups": cfg.n_kv_heads,
        "kv_channels": cfg.head_dim,
        "ffn_hidden_size": cfg.ffn_dim,
        # Llama: RMSNorm, SwiGLU, no biases, no dropout
        "normalization": "RMSNorm",
        "layernorm_epsilon": cfg.norm_eps,
        "gated_linear_unit": True,
        "activation_func": F.silu,
        "add_bias_linear": False,
        "add_qkv_bias": False,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        "attention_softmax_in_fp32": True,
        # no fused kernels that need Apex or Transformer Engine
        "bias_activation_fusion": False,
        "bias_dropout_fusion": False,
        "masked_softmax_fusion": False,
        "apply_rope_fusion": False,
        "persist_layer_norm": False,
        "gradient_accumulation_fusion": False,
        "cross_entropy_loss_fusion": False,
        # parallelism
        "tensor_model_parallel_size": spec.tp,
        "pipeline_model_parallel_size": spec.pp,
        "virtual_pipeline_model_parallel_size": vp,
        "sequence_parallel": spec.sequence_parallel,
        "context_parallel_size": 1,
        # precision
        "bf16": bf16,
        "fp16": False,
        "params_dtype": dtype,
        "pipeline_dtype": dtype,
        # weights come from the torch backend's init by name (model.init_from_torch_names)
        "perform_initialization": False,
        "use_cpu_initialization": spec.device == "cpu",
    }
    if spec.pp > 1:
        # Megatron-LM's defaults: free the activations a stage has sent; in the interleaved schedule,
        # unbatched p2p overlapped with compute (batched p2p mixes up the forward and backward tensors
        # of the interleaved schedule at pp = 2, where the next and the previous stage are one peer:
        # Megatron-LM issue #750); the non-interleaved schedule takes batched p2p only.
        transformer["deallocate_pipeline_outputs"] = True
        if vp:
            transformer.update(overlap_p2p_comm=True, batch_p2p_comm=False)
    if spec.activation_checkpointing == "full":
        transformer.update(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)

    model = {
        "vocab_size": cfg.vocab_size,
        "max_sequence_length": spec.seq_len,
        "position_embedding_type": "rope",
        "rotary_percent": 1.0,
        "rotary_base": int(cfg.rope_theta) if float(cfg.rope_theta).is_integer() else cfg.rope_theta,
        "share_embeddings_and_output_weights": False,
        "parallel_output": True,
        "fp16_lm_cross_entropy": False,
    }

    ddp = {
        "grad_reduce_in_fp32": True,  # the torch backend reduces gradients in fp32
        "overlap_grad_reduce": spec.dp > 1,
        "overlap_param_gather": distopt and spec.dp > 1,
        "use_distributed_optimizer": distopt,
        "average_in_collective": False,
        "check_for_nan_in_grad": False,
    }
    if instances > 1:
        ddp["num_distributed_optimizer_instances"] = instances

    if spec.optimizer == "adamw":
        optimizer = {
            "optimizer": "adam",
            "lr": spec.lr,
            "min_lr": spec.lr,
            "weight_decay": 0.1,
            "adam_beta1": 0.9,
            "adam_beta2": 0.95,
            "adam_eps": 1e-8,
            "decoupled_weight_decay": True,
        }
    else:
        optimizer = {"optimizer": "sgd", "lr": spec.lr, "min_lr": spec.lr, "weight_decay": 0.0, "sgd_momentum": 0.0}
    optimizer.update(
        clip_grad=0.0,
        bf16=bf16,
        fp16=False,
        params_dtype=dtype,
        use_distributed_optimizer=distopt,
        overlap_param_gather=ddp["overlap_param_gather"],
    )

    n_micro = spec.global_batch // (spec.micro_batch * spec.dp)
    if spec.pp == 1:
        sched = "forward_backward_no_pipelining"
    elif vp:
        sched = "forward_backward_pipelining_with_interleaving"
    else:
        sched = "forward_backward_pipelining_without_interleaving"
    schedule = {
        "name": sched,
        "num_microbatches": n_micro,
        "micro_batch_size": spec.micro_batch,
        "seq_length": spec.seq_len,
    }

    notes = [
        f"data parallelism: {dp_kind}"
        + {
            "distributed_optimizer": " (optimizer state and gradients sharded over the data-parallel group, "
            "whole parameters on every rank; the counterpart of the torch backend's FSDP)",
            "partial_distributed_optimizer": f" ({instances} optimizer instances: shard within dp_shard, gradient "
            "all-reduce across dp_replicate; the counterpart of HSDP)",
            "ddp": " (bucketed gradient all-reduce, overlapped with backward)",
            "none": " (one data-parallel rank: megatron-core's DDP wrapper and mixed-precision optimizer, "
            "no communication)",
        }[dp_kind],
        f"schedule: {sched} with {n_micro} microbatches of {spec.micro_batch} per step",
        "weight decay on every parameter, no gradient clipping, constant learning rate (as the torch backend)",
        "rotary embedding: megatron's rotate-half form; query and key rows are permuted from the torch backend's "
        "interleaved form when weights are loaded, which leaves attention unchanged",
    ]
    return MegatronPlan(
        parallel=parallel,
        transformer=transformer,
        model=model,
        ddp=ddp,
        optimizer=optimizer,
        schedule=schedule,
        data_parallel=dp_kind,
        notes=tuple(notes),
    )
