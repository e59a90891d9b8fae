"""A first-order estimate of one rank's device memory for a spec, made before launch.

Counts parameters, gradients and AdamW state (sharded by FSDP), the unsharded compute copies
FSDP holds, activations (in the manner of Korthikanti et al. 2022, adapted to SwiGLU, GQA and
a fused attention that keeps no score matrix) and the logits of the loss. It ignores allocator
fragmentation, communication buffers and the CUDA context, so a run estimated near the
device's capacity may still fail: the run itself decides, the estimate only warns.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scalestudy.spec.catalog.models import parameter_counts
from scalestudy.spec.run import RunSpec

GIB = 1024**3


@dataclass(frozen=True)
class MemoryEstimate:
    """A rank's estimated peak memory, by part, in bytes."""

    params_bytes: int  # fp32 master parameters, sharded
    grads_bytes: int  # fp32 gradients, sharded
    optimizer_bytes: int  # AdamW's two fp32 moments, sharded
    unsharded_bytes: int  # parameters and gradients FSDP gathers for compute
    activations_bytes: int
    logits_bytes: int

    @property
    def total_bytes(self) -> int:
        return (
            self.params_bytes
            + self.grads_bytes
            + self.optimizer_bytes
            + self.unsharded_bytes
            + self.activations_bytes
            + self.logits_bytes
        )

    def as_dict(self) -> dict:
        d = asdict(self)
        d["total_bytes"] = self.total_bytes
        d["method"] = "scalestudy.memory_estimate: first-order, no fragmentation or comm buffers"
        return d

    def fits(self, capacity_bytes: int) -> bool:
        return self.total_bytes <= capacity_bytes


def in_flight_microbatches(spec: RunSpec) -> int:
    """The most micro batches whose activations a rank holds at once under the spec's pipeline schedule."""
    if spec.pp == 1:
        return 1
    if spec.pp_schedule == "gpipe":
        return spec.pp_microbatches * spec.pp_stages_per_rank
    if spec.pp_schedule == "1f1b":
        return min(spec.pp, spec.pp_microbatches)
    return min(spec.pp_microbatches * spec.pp_stages_per_rank, spec.pp * spec.pp_stages_per_rank + spec.pp)


def in_flight_share(spec: RunSpec) -> float:
    """The share of a rank's layers whose activations one micro batch in flight holds: all, or one
    model chunk's under interleaved 1F1B (in_flight_microbatches counts chunks there)."""
    return 1.0 / (spec.pp_stages_per_rank if spec.pp_schedule == "interleaved_1f1b" else 1)


def estimate_memory(spec: RunSpec, checkpointing: str | None = None) -> MemoryEstimate:
    """`checkpointing`: none, full, selective_layer or selective_op (torchtitan's selective
    checkpointing) in place of the spec's activation_checkpointing."""
    cfg = spec.model_config()
    counts = parameter_counts(cfg)
    n_stages = spec.pp * spec.pp_stages_per_rank
    split = cfg.n_layers + (2 if spec.pp_embedding_stages else 0)  # embedding and output in a layer's place
    layers_per_rank = split // n_stages * spec.pp_stages_per_rank
    # the heavier end of the pipeline: the embedding table or the output head
    rank_params = (layers_per_rank * counts["n_params_per_layer"] + counts["n_params_embedding"]) / spec.tp
    sharded = rank_params / (spec.dp_shard * spec.cp)  # the optimizer shards over dp x cp (Megatron)
    compute_bytes = 4 if spec.precision == "fp32" else 2  # FP8 runs keep bf16 weights and activations
    if spec.reshard_after_forward:
        held_layers = min(layers_per_rank, 2 + spec.fsdp_forward_prefetch)
        unsharded = (held_layers * counts["n_params_per_layer"] / spec.tp) * compute_bytes * 2
    else:
        unsharded = rank_params * compute_bytes + 2 * counts["n_params_per_layer"] / spec.tp * compute_bytes

    s, b, h, f = spec.seq_len // spec.cp, spec.micro_batch, cfg.dim, cfg.ffn_dim  # a rank's part of a sequence
    kv = cfg.n_kv_heads * cfg.head_dim
    sp = spec.tp if spec.sequence_parallel else 1
    # elements saved for backward by one block: norms (with fp32 copies), residuals, q/k/v,
    # attention output, and the SwiGLU intermediates
    per_layer_elems = s * b * ((5 * h + 4 * h) / sp + (2 * h + 2 * kv) / spec.tp + 4 * f / spec.tp)
    per_layer = per_layer_elems * compute_bytes
    block_input = s * b * h / sp * compute_bytes
    mode = checkpointing or spec.activation_checkpointing
    if mode == "full":
        per_mb = layers_per_rank * block_input + per_layer
    elif mode == "selective_layer":  # every second block checkpointed whole
        checkpointed = layers_per_rank // 2
        per_mb = checkpointed * block_input + (layers_per_rank - checkpointed) * per_layer + per_layer
    elif mode == "selective_op":
        # torchtitan's op-level policy keeps the block input and the outputs of attention and of
        # every other matrix product (wq, wv, w1, w2), recomputing the rest in backward
        # (perfmodel/compute.py selective_op_matmul_fraction cites the policy)
        kept = block_input + s * b * ((2 * h + kv + f) / spec.tp + h / sp) * compute_bytes
        per_mb = layers_per_rank * kept + per_layer
    elif mode == "none":
        per_mb = layers_per_rank * per_layer
    else:
        raise ValueError(f"activation checkpointing {mode!r} is not none, full, selective_layer or selective_op")
    activations = per_mb * in_flight_share(spec) * in_flight_microbatches(spec)
    logits = s * b * cfg.vocab_size * (compute_bytes + 4 + 4)
    return MemoryEstimate(
        params_bytes=int(sharded * 4),
        grads_bytes=int(sharded * 4),
        optimizer_bytes=int(sharded * 8),
        unsharded_bytes=int(unsharded),
        activations_bytes=int(activations),
        logits_bytes=int(logits),
    )
