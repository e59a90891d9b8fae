"""The package's Llama as megatron-core `GPTModel`, and its weights by name from the torch backend.

The layer is megatron-core's local (no Transformer Engine) GPT layer, `TransformerLayer` with
`SelfAttention` (fused QKV `ColumnParallelLinear`, `RowParallelLinear` projection) and a gated
`MLP` (`linear_fc1` holds the gate and up projections, SwiGLU), with two modules of this package
put in through megatron-core's ModuleSpec, the places that Transformer Engine fills in a usual
Megatron setup:

- `SDPAttention`, the core attention: torch's scaled_dot_product_attention (flash or memory-
  efficient kernels), as the torch backend uses. megatron-core's own local `DotProductAttention`
  materialises the [b, heads, s, s] score matrix, a different kernel from the one the torch
  backend runs, which would make the comparison one of attention kernels, not of frameworks.
- `RMSNorm`: the torch backend's RMSNorm arithmetic (fp32 statistics), with its weight marked
  `sequence_parallel` so that megatron-core all-reduces its gradient over the tensor-parallel
  group under sequence parallelism (megatron-core's local norm, torch.nn.RMSNorm, refuses
  sequence parallelism).

Weights: `megatron_value` turns the torch backend's full tensors (by the torch model's
parameter names) into one tensor-parallel rank's shard of a GPTModel parameter: Q, K and V
interleaved by query group into `linear_qkv`, gate and up projection shards stacked into
`linear_fc1`, and the rows of Q and K permuted from the torch backend's interleaved rotary form
to megatron-core's rotate-half form (q.k is unchanged, so attention is unchanged).
"""

from __future__ import annotations

import inspect
import math
import re
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from scalestudy.harness.llama import canonical_name, init_values
from scalestudy.spec.catalog.models import ModelConfig

from .mapping import PARTIAL_DISTRIBUTED_OPTIMIZER, VIRTUAL_PIPELINE, MegatronPlan

_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.(.+)$")


def installed_features() -> frozenset[str]:
    """Which of mapping.KNOWN_FEATURES the installed megatron-core offers."""
    from megatron.core import parallel_state  # local: megatron-core is optional
    from megatron.core.models.gpt import GPTModel  # local: megatron-core is optional

    have = set()
    if "num_distributed_optimizer_instances" in inspect.signature(parallel_state.initialize_model_parallel).parameters:
        have.add(PARTIAL_DISTRIBUTED_OPTIMIZER)
    if "vp_stage" in inspect.signature(GPTModel.__init__).parameters:
        have.add(VIRTUAL_PIPELINE)
    return frozenset(have)


# ---- modules put into megatron-core's layer spec ----------------------------------------------


def _param_device(config):
    """Where megatron-core's own layers put their parameters."""
    return "cpu" if config.use_cpu_initialization else torch.cuda.current_device()


class RMSNorm(nn.Module):
    """The torch backend's RMSNorm (statistics in fp32) in megatron-core's norm signature."""

    def __init__(self, config, hidden_size: int, eps: float = 1e-5, **_ignored):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size, dtype=config.params_dtype, device=_param_device(config)))
        # megatron-core all-reduces the gradients of parameters marked so over the TP group
        setattr(self.weight, "sequence_parallel", bool(config.sequence_parallel))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return out.type_as(x) * self.weight


def _sdpa_attention_class():
    from megatron.core.transformer.module import MegatronModule  # local: megatron-core is optional

    class SDPAttention(MegatronModule):
        """Causal core attention by torch.nn.functional.scaled_dot_product_attention, in the
        interface of megatron-core's DotProductAttention: query [sq, b, np, hn], key and value
        [sk, b, ng, hn] (ng query groups), output [sq, b, np * hn]."""

        def __init__(
            self,
            config,
            layer_number: int,
            attn_mask_type,
            attention_type: str,
            attention_dropout: float | None = None,
            softmax_scale: float | None = None,
            cp_comm_type: str | None = None,
            pg_collection=None,
        ):
            super().__init__(config=config)
            from megatron.core.transformer.enums import AttnMaskType  # local: megatron-core is optional

            if attn_mask_type != AttnMaskType.causal:
                raise ValueError(f"SDPAttention runs causal attention only, not {attn_mask_type}")
            if config.context_parallel_size != 1:
                raise ValueError("SDPAttention does not implement context parallelism")
            dropout = config.attention_dropout if attention_dropout is None else attention_dropout
            if dropout:
                raise ValueError("SDPAttention runs without attention dropout, as the torch backend does")
            self.softmax_scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(config.kv_channels)

        def forward(
            self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None, packed_seq_params=None
        ):
            if attention_mask is not None or attention_bias is not None or packed_seq_params is not None:
                raise ValueError("SDPAttention takes no attention mask, bias or packed sequences (causal only)")
            n_rep = query.shape[2] // key.shape[2]
            if n_rep > 1:
                key = key.repeat_interleave(n_rep, dim=2)
                value = value.repeat_interleave(n_rep, dim=2)
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, np, s, hn]
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.softmax_scale)
            sq, b = query.shape[0], query.shape[1]
            return out.permute(2, 0, 1, 3).reshape(sq, b, -1)

    return SDPAttention


def layer_spec():
    """megatron-core's local GPT layer (get_gpt_layer_local_spec) with SDPAttention and RMSNorm."""
    from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add  # local: megatron-core is optional
    from megatron.core.tensor_parallel import (  # local: megatron-core is optional
        ColumnParallelLinear,
        RowParallelLinear,
    )
    from megatron.core.transformer.attention import (  # local: megatron-core is optional
        SelfAttention,
        SelfAttentionSubmodules,
    )
    from megatron.core.transformer.enums import AttnMaskType  # local: megatron-core is optional
    from megatron.core.transformer.identity_op import IdentityOp  # local: megatron-core is optional
    from megatron.core.transformer.mlp import MLP, MLPSubmodules  # local: megatron-core is optional
    from megatron.core.transformer.spec_utils import ModuleSpec  # local: megatron-core is optional
    from megatron.core.transformer.transformer_layer import (  # local: megatron-core is optional
        TransformerLayer,
        TransformerLayerSubmodules,
    )

    return ModuleSpec(
        module=TransformerLayer,
        submodules=TransformerLayerSubmodules(
            input_layernorm=RMSNorm,
            self_attention=ModuleSpec(
                module=SelfAttention,
                params={"attn_mask_type": AttnMaskType.causal},
                submodules=SelfAttentionSubmodules(
                    linear_qkv=ColumnParallelLinear,
                    core_attention=_sdpa_attention_class(),
                    linear_proj=RowParallelLinear,
                    q_layernorm=IdentityOp,
                    k_layernorm=IdentityOp,
                ),
            ),
            self_attn_bda=get_bias_dropout_add,
            pre_mlp_layernorm=RMSNorm,
            mlp=ModuleSpec(
                module=MLP, submodules=MLPSubmodules(linear_fc1=ColumnParallelLinear, linear_fc2=RowParallelLinear)
            ),
            mlp_bda=get_bias_dropout_add,
        ),
    )


def block_spec(config, vp_stage: int | None = None):
    """The decoder of one model chunk: its layers and the final RMSNorm."""
    from megatron.core.transformer.transformer_block import (  # local: megatron-core is optional
        TransformerBlockSubmodules,
        get_num_layers_to_build,
    )

    n = get_num_layers_to_build(config, vp_stage=vp_stage)
    return TransformerBlockSubmodules(layer_specs=[layer_spec()] * n, layer_norm=RMSNorm)


def transformer_config(plan: MegatronPlan):
    from megatron.core.transformer.transformer_config import TransformerConfig  # local: megatron-core is optional

    return TransformerConfig(**plan.transformer)


def build_chunks(plan: MegatronPlan, config) -> list[nn.Module]:
    """This rank's GPTModel chunks (one, or pp_stages_per_rank under the interleaved schedule).
    Needs parallel_state initialised with plan.parallel. Weights are left uninitialised."""
    from megatron.core import parallel_state  # local: megatron-core is optional
    from megatron.core.models.gpt import GPTModel  # local: megatron-core is optional

    vp = plan.parallel.get("virtual_pipeline_model_parallel_size")
    chunks = []
    for i in range(vp or 1):
        vp_stage = i if vp else None
        kwargs = {"vp_stage": vp_stage} if vp else {}
        pre = parallel_state.is_pipeline_first_stage(ignore_virtual=False, **kwargs)
        post = parallel_state.is_pipeline_last_stage(ignore_virtual=False, **kwargs)
        chunks.append(
            GPTModel(
                config=config,
                transformer_layer_spec=block_spec(config, vp_stage),
                pre_process=pre,
                post_process=post,
                **kwargs,
                **plan.model,
            )
        )
    return chunks


# ---- weights by name --------------------------------------------------------------------------


def torch_shape(name: str, cfg: ModelConfig) -> tuple[int, ...]:
    """The full shape of a parameter of the torch backend's Transformer, by its name."""
    kv = cfg.n_kv_heads * cfg.head_dim
    if name in ("tok_embeddings.weight", "output.weight"):
        return (cfg.vocab_size, cfg.dim)
    if name == "norm.weight" or name.endswith(("attention_norm.weight", "ffn_norm.weight")):
        return (cfg.dim,)
    leaf = name.split(".", 2)[2]
    return {
        "attention.wq.weight": (cfg.n_heads * cfg.head_dim, cfg.dim),
        "attention.wk.weight": (kv, cfg.dim),
        "attention.wv.weight": (kv, cfg.dim),
        "attention.wo.weight": (cfg.dim, cfg.n_heads * cfg.head_dim),
        "feed_forward.w1.weight": (cfg.ffn_dim, cfg.dim),
        "feed_forward.w2.weight": (cfg.dim, cfg.ffn_dim),
        "feed_forward.w3.weight": (cfg.ffn_dim, cfg.dim),
    }[leaf]


def rope_rows_to_half(w: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Rows of a Q or K projection, per head, from the interleaved rotary form (pairs 2i, 2i+1;
    the torch backend's complex form) to the rotate-half form (pairs i, i + head_dim/2)."""
    perm = torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)]).to(w.device)
    return w.view(-1, head_dim, *w.shape[1:])[:, perm].reshape(w.shape)


def _rows(t: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    n = t.shape[0] // size
    return t[rank * n : (rank + 1) * n]


def _cols(t: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    n = t.shape[1] // size
    return t[:, rank * n : (rank + 1) * n]


def megatron_value(
    name: str, layer: int | None, cfg: ModelConfig, fetch: Callable[[str], torch.Tensor], tp_rank: int = 0, tp: int = 1
) -> tuple[torch.Tensor, list[str]]:
    """One TP rank's value of the GPTModel parameter `name` (names as GPTModel has them, the
    layer index local to the chunk; `layer` is its global index), built from full tensors that
    `fetch(torch_name)` returns. Returns the value and the torch names it came from."""
    m = _LAYER.match(name)
    leaf = m.group(2) if m else name
    pre = f"layers.{layer}." if m else ""
    if name == "embedding.word_embeddings.weight":
        return _rows(fetch("tok_embeddings.weight"), tp_rank, tp), ["tok_embeddings.weight"]
    if name == "output_layer.weight":
        return _rows(fetch("output.weight"), tp_rank, tp), ["output.weight"]
    if name == "decoder.final_layernorm.weight":
        return fetch("norm.weight"), ["norm.weight"]
    if m is None:
        raise KeyError(f"no torch counterpart for GPTModel parameter {name!r}")
    if leaf == "input_layernorm.weight":
        return fetch(pre + "attention_norm.weight"), [pre + "attention_norm.weight"]
    if leaf == "pre_mlp_layernorm.weight":
        return fetch(pre + "ffn_norm.weight"), [pre + "ffn_norm.weight"]
    if leaf == "self_attention.linear_qkv.weight":
        names = [pre + f"attention.w{x}.weight" for x in "qkv"]
        hd, groups = cfg.head_dim, cfg.n_kv_heads // tp
        q = rope_rows_to_half(_rows(fetch(names[0]), tp_rank, tp), hd)
        k = rope_rows_to_half(_rows(fetch(names[1]), tp_rank, tp), hd)
        v = _rows(fetch(names[2]), tp_rank, tp)
        per = cfg.n_heads // cfg.n_kv_heads * hd
        parts = []
        for g in range(groups):  # megatron's layout: [q heads of group g, k of g, v of g] per group
            parts += [q[g * per : (g + 1) * per], k[g * hd : (g + 1) * hd], v[g * hd : (g + 1) * hd]]
        return torch.cat(parts), names
    if leaf == "self_attention.linear_proj.weight":
        return _cols(fetch(pre + "attention.wo.weight"), tp_rank, tp), [pre + "attention.wo.weight"]
    if leaf == "mlp.linear_fc1.weight":
        names = [pre + "feed_forward.w1.weight", pre + "feed_forward.w3.weight"]
        return torch.cat([_rows(fetch(names[0]), tp_rank, tp), _rows(fetch(names[1]), tp_rank, tp)]), names
    if leaf == "mlp.linear_fc2.weight":
        return _cols(fetch(pre + "feed_forward.w2.weight"), tp_rank, tp), [pre + "feed_forward.w2.weight"]
    raise KeyError(f"no torch counterpart for GPTModel parameter {name!r}")


def global_layer_index(chunk: nn.Module, local: int) -> int:
    """The global index (0-based) of a chunk's local layer `local`."""
    return chunk.decoder.layers[local].layer_number - 1


def unwrap(module: nn.Module) -> nn.Module:
    """The GPTModel inside DDP and Float16Module wrappers."""
    while hasattr(module, "module") and isinstance(module.module, nn.Module):
        module = module.module
    return module


@torch.no_grad()
def load_from_torch(
    chunk: nn.Module,
    cfg: ModelConfig,
    fetch: Callable[[str], torch.Tensor],
    tp_rank: int = 0,
    tp: int = 1,
    keep: bool = False,
) -> dict[str, torch.Tensor]:
    """Fill every parameter of a GPTModel chunk from the torch backend's full tensors by name
    (`fetch(torch_name)`). With keep, returns the values at fetch's precision, by GPTModel name
    (for the optimizer's fp32 main parameters); otherwise an empty dict."""
    model = unwrap(chunk)
    kept = {}
    for name, p in model.named_parameters():
        m = _LAYER.match(name)
        layer = global_layer_index(model, int(m.group(1))) if m else None
        value, _ = megatron_value(name, layer, cfg, fetch, tp_rank, tp)
        if value.shape != p.shape:
            raise ValueError(f"{name}: torch gives {tuple(value.shape)}, GPTModel holds {tuple(p.shape)}")
        p.copy_(value)
        if keep:
            kept[name] = value
    return kept


def torch_init_fetch(cfg: ModelConfig, seed: int, device: torch.device) -> Callable[[str], torch.Tensor]:
    """fetch(torch_name): the full fp32 tensor the torch backend initialises that parameter with."""
    return lambda name: init_values(name, torch.Size(torch_shape(name, cfg)), cfg, seed, device)


def state_dict_fetch(state_dict: dict[str, torch.Tensor]) -> Callable[[str], torch.Tensor]:
    """fetch(torch_name) from a torch backend model's (unsharded) state dict."""
    sd = {canonical_name(k): v for k, v in state_dict.items()}
    return lambda name: sd[name]


@torch.no_grad()
def set_main_params(optimizer, chunks: list[nn.Module], values: list[dict[str, torch.Tensor]]) -> None:
    """Make the optimizer's fp32 main parameters the exact values (not the bf16-rounded model
    parameters megatron-core copies them from), as the torch backend's fp32 master weights are."""
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer  # local: megatron-core is optional
    from megatron.core.optimizer.optimizer import Float16OptimizerWithFloat16Params  # local: megatron-core is optional

    by_param = {}
    for chunk, vals in zip(chunks, values):
        for name, p in unwrap(chunk).named_parameters():
            by_param[p] = vals[name]
    for opt in getattr(optimizer, "chained_optimizers", [optimizer]):
        if isinstance(opt, DistributedOptimizer):
            sd = values[0] if len(values) == 1 else {f"model{i}": v for i, v in enumerate(values)}
            opt.reload_model_params(state_dict=sd)
        elif isinstance(opt, Float16OptimizerWithFloat16Params):
            for model_group, main_group in zip(opt.float16_groups, opt.fp32_from_float16_groups):
                for p, main in zip(model_group, main_group):
                    main.copy_(by_param[p])
        # FP32Optimizer: the model parameters are the main parameters, already exact
