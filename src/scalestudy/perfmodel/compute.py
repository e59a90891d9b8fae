"""Computation time of a training step per GPU, calibrated from measured runs.

The measured kernel time of a traced run, by category (measured.py), fixes an efficiency for each
kind of work, relative to the GPU that ran it:

  gemm        model matrix-product FLOPs (6 x non-embedding matrix parameters a token, plus the
              forward again under full activation checkpointing) / time  ->  eta_matmul x peak
  attention   attention FLOPs (12 L d s a token, counted in full as metrics.FLOPS_FORMULA does,
              plus the recomputed forward) / time                        ->  eta_attention x peak
  elementwise nominal bytes of the norm, residual, RoPE, SwiGLU and loss element-wise work (FUSED
              below: the kernels the harness runs, 2 bytes an element; forward, backward, the
              forward again under checkpointing) / time                  ->  eta_elementwise x HBM
  optimizer   28 bytes a local parameter (fused AdamW in fp32) / time     ->  eta_optimizer x HBM
  fsdp_copy   12 nominal bytes a locally unsharded parameter / time       ->  eta_fsdp_copy x HBM
  gap         1 - busy kernel time / measured step time (host overhead)   ->  gap_fraction

A prediction for another shape, layout or GPU re-counts the FLOPs and bytes for that spec (per
GPU: tensor parallelism divides matrix products, attention heads and the TP-sharded element-wise
work; sequence parallelism also the norms and residuals; pipeline parallelism the layers) and
divides by the efficiencies times the target GPU's datasheet peak and memory bandwidth (the
matrix-product efficiencies first carried by the two GPUs' measured achievable matmul fractions
of peak where both are known, the attention ones by the published rates of the two GPUs'
attention kernels: achievable.py). That the efficiencies carry over
to other matrix shapes, micro batches and GPUs is an assumption (named in every prediction); the
held-out validation (validate.py) measures how well they carry over between the measured runs.

Without a traced run the model falls back to one efficiency: the measured hardware MFU (FLOPs
including recomputation over the step time), applied to all FLOPs (method `mfu`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from scalestudy.spec import catalog
from scalestudy.spec.catalog.models import ModelConfig, parameter_counts
from scalestudy.spec.run import RunSpec

ADAMW_BYTES_PER_PARAM = 28  # fused AdamW, fp32: read param, grad, m, v; write param, m, v
FSDP_COPY_BYTES_PER_PARAM = 12  # nominal: bf16 all-gather copy-out and fp32 reduce-scatter copy-in
BYTES_PER_ELEMENT = 2  # nominal (bf16)


@dataclass(frozen=True)
class ElementwisePasses:
    """Element-wise work of one token and layer, in elements read plus written (2 bytes nominal, an
    fp32 element counts twice), as (forward, backward); the recomputed forward under checkpointing
    repeats the forward's. The loss's work is in elements a token (x vocab, and x dim where the
    hidden state's gradient is rescaled) and a micro batch (x vocab x dim: the weight gradient)."""

    name: str
    norm_residual: tuple[float, float]  # x dim       (sharded by TP only with sequence parallelism)
    rope: tuple[float, float]  # x (dim + kv_dim)          (sharded by TP)
    swiglu: tuple[float, float]  # x ffn_dim               (sharded by TP)
    gelu: tuple[float, float]  # x ffn_dim                 (sharded by TP)
    gqa_repeat: tuple[float, float]  # x (dim + kv_dim), only with fewer KV heads than heads
    attention_scores: tuple[float, float]  # x (heads x seq_len): attention probabilities in memory (TP)
    loss_token_vocab: float  # x vocab, forward and backward (replicated under TP unless vocab-parallel)
    loss_token_dim: float = 0.0  # x dim
    loss_weight: float = 0.0  # x vocab x dim, a micro batch
    # the attention products' kernels: True, a fused flash-attention kernel (its own class, eta_attention:
    # what the calibration runs ran, cuDNN's sm90 flash kernels in data/h200-reference); False, batched
    # matrix products (QK^T and PV as cuBLAS baddbmm/bmm) at the matrix products' efficiency, eta_matmul
    flash_attention: bool = True


# The harness in eager mode with its fused kernels (optimisations norm, ekern, loss: what
# data/h200-reference ran), counted from the kernels one traced step launches:
FUSED = ElementwisePasses(
    name="fused",
    # forward: two F.rms_norm (harness/llama.py RMSNorm: read x, write y) = 2 x 2, two residual adds
    # (TransformerBlock.forward: 2 reads, 1 write) = 2 x 3; backward: two rms_norm backward (input
    # gradient: read dy and x, write dx; weight gradient: read dy and x again) = 2 x 5, and five
    # gradient sums of 3 (two residuals, the q/k/v input gradients summed twice, w1/w3 once)
    norm_residual=(10.0, 25.0),
    rope=(2.0, 2.0),  # fused_ops.rotate_real as one generated kernel for q and k: read, write; same backward
    swiglu=(3.0, 5.0),  # fused_ops.swiglu: read gate and up, write; backward reads dy, gate, up, writes two
    # Megatron-LM's fused bias-GELU (megatron/model/fused_bias_gelu.py): read, write; backward read dy
    # and the input, write
    gelu=(2.0, 3.0),
    gqa_repeat=(2.0, 2.0),  # Attention.forward's repeat_interleave of k and v: read kv_dim, write dim each
    attention_scores=(0.0, 0.0),  # F.scaled_dot_product_attention: flash attention keeps them on chip
    # harness/loss.py, per token x vocab: log_softmax (read bf16, write fp32) 1 + 2, exp_ in place 2 + 2,
    # copy into the bf16 dlogits 2 + 1; backward's _scale_ of the two gradients (float(), mul_, copy_:
    # 1 + 2, 2 + 2, 2 + 1) over tokens x dim and over the vocab x dim weight gradient
    loss_token_vocab=10.0,
    loss_token_dim=10.0,
    loss_weight=10.0,
)

# Plain PyTorch ops, one kernel each: the harness before its fused kernels, and torchtitan's
# published runs (torchtitan/models/llama/model.py: RMSNorm._norm, apply_rotary_emb on complex
# numbers, F.silu(w1(x)) * w3(x); F.cross_entropy on the fp32 logits). Counted op by op; their
# fp32 intermediates count twice:
UNFUSED = ElementwisePasses(
    name="unfused",
    # RMSNorm forward: x.float() 1 + 2, pow 2 + 2, mean 2, x * rsqrt 2 + 2, type_as 2 + 1, * weight
    # 1 + 1 = 18; backward 38 (the same ops' gradients: * weight 2 and its weight gradient 4, type_as
    # 3, x * rsqrt 4 and the rsqrt gradient's product and sum 8, mean 2, pow 6, the two x gradients
    # summed 6, float() 3); two norms, two residual adds (3 each) and the five gradient sums of FUSED
    norm_residual=(42.0, 91.0),
    rope=(10.0, 10.0),  # float() 1 + 2, complex product 2 + 2, type_as 2 + 1; backward the same ops
    swiglu=(5.0, 9.0),  # silu 1 + 1, product 2 + 1; backward: two products 3 + 3, silu backward 3
    gelu=(2.0, 4.0),
    gqa_repeat=(2.0, 2.0),  # torchtitan's repeat_kv (expand, then reshape copies)
    attention_scores=(0.0, 0.0),  # F.scaled_dot_product_attention
    # logits.float() 1 + 2, log_softmax 2 + 2, its gradient 2 (fill) + 6, back to bf16 2 + 1
    loss_token_vocab=18.0,
)

# Megatron-LM as Narayanan et al. 2021 ran it: fused kernels for the norms, bias-GELU and
# bias-dropout-add (counted as FUSED), but attention without flash attention
# (megatron/model/transformer.py ParallelAttention: baddbmm, FusedScaleMaskSoftmax, attention
# dropout, bmm): the [heads, s, s] scores of every sequence go through memory. Forward: the fused
# scale-mask-softmax reads the scores and writes the probabilities (2), dropout reads them and writes
# them and a one-byte mask (2.5); backward: dropout's gradient reads the gradient and the mask and
# writes (2.5), softmax's reads the gradient and the probabilities and writes (3). Attention dropout
# 0.1 is Megatron-LM's default (megatron/arguments.py, --attention-dropout) [assumed: the paper does not
# state it; without dropout the counts are (2, 3)].
# Its attention products are batched matrix products (torch.baddbmm for Q K^T, torch.bmm for P V), over
# the whole [s, s] score matrix (the causal mask is applied after them): they run as GEMM kernels, so
# their FLOPs (counted in full, as they are computed) go at the matrix products' efficiency, not at the
# flash-attention kernel's.
MEGATRON_2021 = replace(FUSED, name="megatron-2021", attention_scores=(4.5, 5.5), flash_attention=False)

ELEMENTWISE = {p.name: p for p in (FUSED, UNFUSED, MEGATRON_2021)}


@dataclass(frozen=True)
class StepWork:
    """FLOPs and nominal bytes of one GPU's share of one micro batch (forward and backward) or step."""

    matmul_flops_fwd_layer: float  # one layer, one micro batch
    attn_flops_fwd_layer: float
    elem_bytes_fwd_layer: float
    elem_bytes_bwd_layer: float  # without the recomputed forward
    head_matmul_flops_fwd: float
    head_elem_bytes: float  # loss, forward and backward together
    optimizer_bytes: float  # a step
    fsdp_copy_bytes: float  # a step
    layers: int  # layers of the (heaviest) stage this GPU runs
    has_head: bool
    recompute: bool


# Fractions of the layer forward recomputed in backward, (matrix products, attention, element-wise):
# full checkpointing recomputes all; torchtitan's selective checkpointing [torchtitan
# torchtitan/models/llama3/infra/parallelize.py, _apply_ac]: "layer" checkpoints every second block
# in full; "op" saves the outputs of attention (SDPA) and of every other matrix product and
# recomputes the rest of the forward (its matrix-product fraction depends on the shape:
# selective_op_matmul_fraction).
RECOMPUTE = {"none": (0.0, 0.0, 0.0), "full": (1.0, 1.0, 1.0), "selective_layer": (0.5, 0.5, 0.5), "selective_op": None}


def selective_op_matmul_fraction(cfg: ModelConfig) -> float:
    """The layer's matrix-product FLOPs that torchtitan's op-level selective checkpointing recomputes.
    Its policy counts the block's aten.mm calls in forward order and saves all but every second
    ("Saves output of all compute ops, except every second mm": torchtitan
    torchtitan/parallelisms/parallelize_llama.py, _apply_ac_to_transformer_block, a fresh count a
    block). Forward order: wq, wk, wv, wo, then w1, w3, w2 (SwiGLU: w2(silu(w1 x) * w3 x)) or fc1,
    fc2 (GELU), so wk, wo and w3 (fc2) are recomputed: 36% of Llama 2 70B's layer FLOPs (GQA makes
    wk narrow), 39% of Llama 2 13B's."""
    d, kv, f = cfg.dim, cfg.n_kv_heads * cfg.head_dim, cfg.ffn_dim
    widths = [d, kv, kv, d] + ([f, f, f] if cfg.mlp == "swiglu" else [f, f])  # output widths, each x dim
    return sum(widths[1::2]) / sum(widths)


def recompute_fractions(name: str, cfg: ModelConfig) -> tuple[float, float, float]:
    """RECOMPUTE[name] for the model shape `cfg`."""
    if name == "selective_op":
        return (selective_op_matmul_fraction(cfg), 0.0, 1.0)
    return RECOMPUTE[name]


def layers_per_rank(spec: RunSpec, cfg: ModelConfig) -> int:
    """Transformer layers of the heaviest pipeline rank: with embedding stages (NeMo's
    ASYM_PP_EMBED/LOSS) the embedding and the output layer each take one layer's place in the
    split, so an interior rank holds (layers + 2) / (pp x stages a rank) layers a chunk."""
    split = cfg.n_layers + (2 if spec.pp_embedding_stages else 0)
    return split // (spec.pp * spec.pp_stages_per_rank) * spec.pp_stages_per_rank


# FP8 linear layers (Transformer Engine, as NeMo runs them) cast each input in forward and each output
# gradient in backward to FP8 with its transpose for the other product: read bf16, write FP8 twice,
# 4 bytes an element [Transformer Engine transformer_engine/pytorch/module/linear.py and
# layernorm_linear.py: fp8_cast_transpose_fused on inputmat and grad_output] [assumed: no cast fused
# into the norm or the preceding kernel]. In nominal 2-byte elements:
FP8_CAST_ELEMENTS = 2.0
LOW_PRECISION = ("fp8",)  # the layers' matrix products run in it; the output head, attention and the rest in bf16


def work(
    spec: RunSpec,
    vocab_parallel_loss: bool = False,
    optimizer_shards: int | None = None,
    passes: ElementwisePasses = FUSED,
) -> StepWork:
    cfg = spec.model_config()
    counts = parameter_counts(cfg)
    d, f, kv, t = cfg.dim, cfg.ffn_dim, cfg.n_kv_heads * cfg.head_dim, spec.tp
    sp = t if spec.sequence_parallel else 1
    tokens = spec.micro_batch * spec.seq_len
    tokens //= spec.cp  # context parallelism: each rank holds seq_len / cp of every sequence
    layer_matmul_params = counts["n_params_per_layer"] - 2 * d
    matmul = 2.0 * layer_matmul_params / t * tokens
    attn = 4.0 * d * spec.seq_len / t * tokens  # a rank's tokens attend to the whole sequence
    mlp = passes.gelu if cfg.mlp == "gelu" else passes.swiglu
    gqa = passes.gqa_repeat if cfg.n_kv_heads < cfg.n_heads else (0.0, 0.0)
    fwd, bwd = (
        (
            passes.norm_residual[i] * d / sp
            + (passes.rope[i] + gqa[i]) * (d + kv) / t
            + mlp[i] * f / t
            + passes.attention_scores[i] * cfg.n_heads * spec.seq_len / t
        )
        for i in (0, 1)
    )
    if spec.precision in LOW_PRECISION:  # the inputs of qkv, proj, fc1, fc2; the gradients of their outputs
        up = 2 * f if cfg.mlp == "swiglu" else f
        fwd += FP8_CAST_ELEMENTS * (d + d / t + d + f / t)
        bwd += FP8_CAST_ELEMENTS * ((d + 2 * kv) / t + d + up / t + d)
    vocab_split = t if vocab_parallel_loss else 1
    loss = (
        passes.loss_token_vocab * cfg.vocab_size / vocab_split + passes.loss_token_dim * d
    ) * tokens + passes.loss_weight * cfg.vocab_size * d / t
    layers = layers_per_rank(spec, cfg)
    head = 2.0 * cfg.vocab_size * d / t * tokens
    # the heaviest pipeline stage: the last holds the output head (and the loss) besides its layers; with
    # embedding stages the head takes one layer's place there, so an interior rank is the heaviest unless
    # the head outweighs a layer
    has_head = not spec.pp_embedding_stages or head > matmul + attn
    if spec.pp_embedding_stages and has_head:
        layers -= 1
    local_params = (layers * counts["n_params_per_layer"] + counts["n_params_embedding"]) / t
    # the optimizer state is sharded over the data-parallel ranks, with context parallelism over dp x cp
    # (Megatron's distributed optimizer shards over the data-parallel group with context parallelism)
    return StepWork(
        matmul_flops_fwd_layer=matmul,
        attn_flops_fwd_layer=attn,
        elem_bytes_fwd_layer=fwd * tokens * BYTES_PER_ELEMENT,
        elem_bytes_bwd_layer=bwd * tokens * BYTES_PER_ELEMENT,
        head_matmul_flops_fwd=head if has_head else 0.0,
        head_elem_bytes=loss * BYTES_PER_ELEMENT if has_head else 0.0,
        optimizer_bytes=ADAMW_BYTES_PER_PARAM * local_params / (optimizer_shards or spec.dp_shard * spec.cp),
        fsdp_copy_bytes=FSDP_COPY_BYTES_PER_PARAM * local_params if spec.dp_shard * spec.dp_replicate >= 1 else 0.0,
        layers=layers,
        has_head=has_head,
        recompute=spec.activation_checkpointing == "full",
    )


def microbatches(spec: RunSpec) -> int:
    """Forward/backward passes of one GPU in a step."""
    return spec.grad_accum * spec.pp_microbatches


@dataclass(frozen=True)
class ComputeCalibration:
    method: str  # "kernel categories" | "mfu"
    eta_matmul: float
    eta_attention: float
    eta_elementwise: float
    eta_optimizer: float
    eta_fsdp_copy: float
    gap_fraction: float
    gpu: str | None
    peak_flops: float
    hbm_bytes_per_s: float
    run_ids: tuple[str, ...]
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ComputeTimes:
    """Seconds on one GPU (its heaviest pipeline stage)."""

    layer_fwd_s: float  # one layer, one micro batch
    layer_bwd_s: float  # including the recomputed forward under checkpointing
    head_fwd_s: float
    head_bwd_s: float
    optimizer_s: float  # a step
    fsdp_copy_s: float  # a step
    gap_fraction: float
    layers: int
    microbatches: int
    attn_fwd_s: float = 0.0  # the attention kernels of one layer and micro batch (in layer_fwd_s)
    attn_bwd_s: float = 0.0  # (in layer_bwd_s)

    @property
    def microbatch_fwd_s(self) -> float:
        return self.layers * self.layer_fwd_s + self.head_fwd_s

    @property
    def microbatch_bwd_s(self) -> float:
        return self.layers * self.layer_bwd_s + self.head_bwd_s

    @property
    def kernels_s(self) -> float:
        """Kernel time of a step without communication."""
        return self.microbatches * (self.microbatch_fwd_s + self.microbatch_bwd_s) + self.optimizer_s + self.fsdp_copy_s


def compute_times(
    spec: RunSpec,
    cal: ComputeCalibration,
    peak_flops: float,
    hbm: float,
    scale: float = 1.0,
    vocab_parallel_loss: bool = False,
    recompute: tuple[float, float, float] | None = None,
    optimizer_shards: int | None = None,
    passes: ElementwisePasses = FUSED,
    attention_flops: float | None = None,
    layer_matmul_flops: float | None = None,
) -> ComputeTimes:
    """Computation of `spec` on a GPU of `peak_flops` and `hbm` bytes/s; `scale` multiplies every
    kernel time (the uncertainty box); vocab_parallel_loss: the loss's element-wise work is split
    over the TP ranks (Megatron) instead of replicated; recompute: the fractions of the forward's
    (matrix products, attention, element-wise work) recomputed in backward, instead of the spec's
    activation checkpointing (selective checkpointing, RECOMPUTE); passes: the element-wise kernels
    the training code runs (FUSED: the harness; UNFUSED: plain PyTorch ops); attention_flops: the
    rate that the attention kernels' efficiency (eta_attention for flash attention, eta_matmul for
    batched matrix products: passes.flash_attention) is a fraction of; default `peak_flops` (the
    kernel classes' carry, achievable.KernelCarry, can give attention its own); layer_matmul_flops: the
    rate that eta_matmul is a fraction of for the transformer layers' matrix products where they run in
    a lower precision than the output head (FP8: LOW_PRECISION); default `peak_flops`."""
    w = work(spec, vocab_parallel_loss, optimizer_shards, passes)
    r_mm, r_at, r_el = recompute if recompute is not None else (1.0 if w.recompute else 0.0,) * 3
    head_mm = peak_flops * cal.eta_matmul
    mm = (layer_matmul_flops if layer_matmul_flops is not None else peak_flops) * cal.eta_matmul
    at = (attention_flops if attention_flops is not None else peak_flops) * (
        cal.eta_attention if passes.flash_attention else cal.eta_matmul
    )
    el = hbm * cal.eta_elementwise
    fwd = w.matmul_flops_fwd_layer / mm + w.attn_flops_fwd_layer / at + w.elem_bytes_fwd_layer / el
    bwd = (
        (2.0 + r_mm) * w.matmul_flops_fwd_layer / mm
        + (2.0 + r_at) * w.attn_flops_fwd_layer / at
        + (r_el * w.elem_bytes_fwd_layer + w.elem_bytes_bwd_layer) / el
    )
    head_f = w.head_matmul_flops_fwd / head_mm + 0.5 * w.head_elem_bytes / el
    head_b = 2.0 * w.head_matmul_flops_fwd / head_mm + 0.5 * w.head_elem_bytes / el
    return ComputeTimes(
        layer_fwd_s=fwd * scale,
        layer_bwd_s=bwd * scale,
        head_fwd_s=head_f * scale,
        head_bwd_s=head_b * scale,
        optimizer_s=w.optimizer_bytes / (hbm * cal.eta_optimizer) * scale,
        fsdp_copy_s=w.fsdp_copy_bytes / (hbm * cal.eta_fsdp_copy) * scale,
        gap_fraction=cal.gap_fraction,
        layers=w.layers,
        microbatches=microbatches(spec),
        attn_fwd_s=w.attn_flops_fwd_layer / at * scale,
        attn_bwd_s=(2.0 + r_at) * w.attn_flops_fwd_layer / at * scale,
    )


def step_totals(spec: RunSpec, passes: ElementwisePasses = FUSED) -> dict:
    """A step's work on one GPU by category: FLOPs (gemm, attention) and nominal bytes."""
    w = work(spec, passes=passes)
    m = microbatches(spec)
    rec = 1.0 if w.recompute else 0.0
    return {
        "gemm": m * (w.layers * (3.0 + rec) * w.matmul_flops_fwd_layer + 3.0 * w.head_matmul_flops_fwd),
        "attention": m * w.layers * (3.0 + rec) * w.attn_flops_fwd_layer,
        "elementwise": m
        * (w.layers * ((1.0 + rec) * w.elem_bytes_fwd_layer + w.elem_bytes_bwd_layer) + w.head_elem_bytes),
        "optimizer": w.optimizer_bytes,
        "fsdp_copy": w.fsdp_copy_bytes,
    }


def calibrate(runs, gpu_hbm: dict[str, float] | None = None) -> ComputeCalibration:
    """Efficiencies from measured runs (perfmodel.measured.MeasuredRun) on one GPU each: the
    traced ones by kernel category (time-weighted over runs); without any trace, the hardware MFU."""
    ok = [r for r in runs if r.ok and r.spec.world_size == 1 and r.peak_flops]
    if not ok:
        raise ValueError("no complete one-GPU training run to calibrate the computation from")
    traced = [r for r in ok if r.kernels is not None]
    gpu = ok[0].device_name
    peak = float(ok[0].peak_flops)
    hbm = (gpu_hbm or {}).get(gpu) or catalog.gpu(gpu).memory_bytes_per_s
    if traced:
        sums = {c: 0.0 for c in ("gemm", "attention", "elementwise", "optimizer", "fsdp_copy")}
        work_sums = dict.fromkeys(sums, 0.0)
        busy = step = 0.0
        detail = {}
        for r in traced:
            totals = step_totals(r.spec)
            for c in sums:
                sums[c] += r.kernels.per_step_s[c]
                work_sums[c] += totals[c]
            busy += r.kernels.busy_s
            step += r.step_time_s
            detail[r.run_id] = {
                "kernel_s_per_step": r.kernels.per_step_s,
                "busy_s": r.kernels.busy_s,
                "step_time_s": r.step_time_s,
                "traced_steps": r.kernels.n_steps,
            }
        return ComputeCalibration(
            method="kernel categories",
            eta_matmul=work_sums["gemm"] / sums["gemm"] / peak,
            eta_attention=work_sums["attention"] / sums["attention"] / peak,
            eta_elementwise=work_sums["elementwise"] / sums["elementwise"] / hbm,
            eta_optimizer=work_sums["optimizer"] / sums["optimizer"] / hbm,
            eta_fsdp_copy=work_sums["fsdp_copy"] / sums["fsdp_copy"] / hbm,
            gap_fraction=max(0.0, 1.0 - busy / step),
            gpu=gpu,
            peak_flops=peak,
            hbm_bytes_per_s=hbm,
            run_ids=tuple(r.run_id for r in traced),
            detail=detail,
        )
    # one efficiency: hardware FLOPs over step time
    num = den = 0.0
    for r in ok:
        t = step_totals(r.spec)
        num += t["gemm"] + t["attention"]
        den += r.step_time_s
    eta = num / den / peak
    big = 1e9  # memory-bound work folded into the one efficiency
    return ComputeCalibration(
        method="mfu",
        eta_matmul=eta,
        eta_attention=eta,
        eta_elementwise=big,
        eta_optimizer=big,
        eta_fsdp_copy=big,
        gap_fraction=0.0,
        gpu=gpu,
        peak_flops=peak,
        hbm_bytes_per_s=hbm,
        run_ids=tuple(r.run_id for r in ok),
        detail={"hardware_mfu": eta},
    )


def single_gpu_step(
    spec: RunSpec, cal: ComputeCalibration, peak: float | None = None, hbm: float | None = None, scale: float = 1.0
) -> float:
    """Predicted step time of a one-GPU run (no communication): kernels / (1 - gap)."""
    ct = compute_times(spec, cal, peak or cal.peak_flops, hbm or cal.hbm_bytes_per_s, scale)
    return ct.kernels_s / (1.0 - ct.gap_fraction)
