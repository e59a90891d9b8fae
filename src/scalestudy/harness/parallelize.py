"""Apply the parallelisms of a spec to a model, in torchtitan's order: TP, activation
checkpointing, compile, FSDP2 (flat or HSDP)."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from scalestudy.harness import optimisations
from scalestudy.harness.parallel_dims import ParallelDims
from scalestudy.spec.run import RunSpec


def apply_tp(model: nn.Module, tp_mesh, sequence_parallel: bool) -> None:
    """Megatron-style tensor parallelism with DTensor: column-parallel wq/wk/wv/w1/w3,
    row-parallel wo/w2; with sequence parallelism the norms and residuals are sharded on the
    sequence dimension."""
    seq = Shard(1) if sequence_parallel else Replicate()
    top = {}
    if model.tok_embeddings is not None:
        top["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)
    if model.norm is not None:
        if sequence_parallel:
            top["norm"] = SequenceParallel()
        top["output"] = ColwiseParallel(input_layouts=seq, output_layouts=Replicate(), use_local_output=True)
        model.loss_chunk_tokens = 0  # the chunked loss needs the whole vocabulary on each rank
    if top:
        parallelize_module(model, tp_mesh, top)
    for block in model.layers.values():
        plan = {
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=seq),
            "feed_forward.w1": ColwiseParallel(),
            "feed_forward.w2": RowwiseParallel(output_layouts=seq),
            "feed_forward.w3": ColwiseParallel(),
        }
        if sequence_parallel:
            plan.update(
                {
                    "attention_norm": SequenceParallel(),
                    "attention": PrepareModuleInput(
                        input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)
                    ),
                    "ffn_norm": SequenceParallel(),
                    "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                }
            )
        parallelize_module(block, tp_mesh, plan)


def apply_ac(model: nn.Module) -> None:
    """Full activation checkpointing of every transformer block."""
    for key, block in list(model.layers.items()):
        model.layers[key] = checkpoint_wrapper(block, preserve_rng_state=False)


def apply_compile(model: nn.Module) -> None:
    for key, block in list(model.layers.items()):
        model.layers[key] = torch.compile(block, fullgraph=True)
    model.rope_real = optimisations.enabled("rope")  # the compiled blocks fuse RoPE in real arithmetic


def apply_fsdp(model: nn.Module, dp_mesh, spec: RunSpec) -> None:
    """FSDP2 over the data-parallel mesh (1-D: flat FSDP, 2-D: HSDP), one unit per block."""
    if spec.precision == "bf16":
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        mp = MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32)
    blocks = list(model.layers.values())
    for i, block in enumerate(blocks):
        # The last block's parameters are needed again at once by backward: never reshard it.
        reshard = spec.reshard_after_forward and i < len(blocks) - 1
        fully_shard(block, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard)
    fully_shard(model, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=spec.reshard_after_forward)
    if spec.fsdp_forward_prefetch:
        n = spec.fsdp_forward_prefetch
        for i, block in enumerate(blocks):
            nxt = blocks[i + 1 : i + 1 + n]
            if nxt:
                block.set_modules_to_forward_prefetch(nxt)
    if spec.fsdp_backward_prefetch:
        n = spec.fsdp_backward_prefetch
        for i, block in enumerate(blocks):
            prev = blocks[max(0, i - n) : i][::-1]
            if prev:
                block.set_modules_to_backward_prefetch(prev)


def parallelize(model: nn.Module, dims: ParallelDims, spec: RunSpec) -> nn.Module:
    if dims.tp_enabled:
        apply_tp(model, dims.tp_mesh, spec.sequence_parallel)
    if spec.activation_checkpointing == "full":
        apply_ac(model)
    if spec.compile:
        apply_compile(model)
    apply_fsdp(model, dims.dp_mesh, spec)
    return model
