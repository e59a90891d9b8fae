"""Computation time of a training step per GPU, calibrated from measured runs.

The measured kernel time of a traced run, by category (measured.py), fixes an efficiency for each
kind of work, relative to the GPU that ran it:

  gemm        model matrix-product FLOPs (6 x non-embedding matrix parameters a token, plus the
              forward again under full activation checkpointing) / time  ->  eta_matmul x peak
  attention   attention FLOPs (12 L d s a token, counted in full as metrics.FLOPS_FORMULA does,
              plus the recomputed forward) / time                        ->  eta_attention x peak
  elementwise nominal bytes of the norm, residual, RoPE and SwiGLU element-wise work (ELEMENTWISE_*
              below, 2 bytes an element; one pass forward, two backward, one more under
              checkpointing) / time                                     ->  eta_elementwise x HBM
  optimizer   28 bytes a local parameter (fused AdamW in fp32) / time     ->  eta_optimizer x HBM
  fsdp_copy   12 nominal bytes a locally unsharded parameter / time       ->  eta_fsdp_copy x HBM
  gap         1 - busy kernel time / measured step time (host overhead)   ->  gap_fraction

A prediction for another shape, layout or GPU re-counts the FLOPs and bytes for that spec (per
GPU: tensor parallelism divides matrix products, attention heads and the TP-sharded element-wise
work; sequence parallelism also the norms and residuals; pipeline parallelism the layers) and
divides by the efficiencies times the target GPU's datasheet peak and memory bandwidth. That
the efficiencies carry over to other matrix shapes, micro batches and GPUs is an assumption
(named in every prediction); the held-out validation (validate.py) measures how well they carry
over between the measured runs.

Without a traced run the model falls back to one efficiency: the measured hardware MFU (FLOPs
including recomputation over the step time), applied to all FLOPs (method `mfu`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from scalestudy.llama_configs import ModelConfig, parameter_counts
from scalestudy.spec import RunSpec

ADAMW_BYTES_PER_PARAM = 28  # fused AdamW, fp32: read param, grad, m, v; write param, m, v
FSDP_COPY_BYTES_PER_PARAM = 12  # nominal: bf16 all-gather copy-out and fp32 reduce-scatter copy-in
BYTES_PER_ELEMENT = 2  # nominal (bf16)
# Element-wise work a token and layer in the forward pass, in elements touched (reads + writes),
# counted from the ops of harness/llama.py [assumed]: two RMSNorms (~6 passes over d each) and two
# residual adds (3 x d each) on the model width, RoPE on q and k (~4 passes), SwiGLU (~5 passes
# over the FFN width).
ELEMENTWISE_NORM_RESIDUAL = 18  # x dim       (sharded by TP only with sequence parallelism)
ELEMENTWISE_ROPE = 4  # x (dim + kv_dim)           (sharded by TP)
ELEMENTWISE_SWIGLU = 5  # x ffn_dim                (sharded by TP)
# A GELU MLP (GPT shapes, mlp: gelu) has one activation between its two matrices: its bias add
# and GELU read the FFN-wide input once and write the output once (Megatron-LM's fused
# bias-GELU kernel, megatron/model/fused_bias_gelu.py) - 2 passes over the FFN width where
# SwiGLU makes 5 (SiLU read and write, the product's two reads and one write).
ELEMENTWISE_GELU = 2  # x ffn_dim                  (sharded by TP)
ELEMENTWISE_LOSS = 6  # x vocab: softmax and cross-entropy, forward and backward (replicated under TP
#                      unless the loss is vocab-parallel)


@dataclass(frozen=True)
class StepWork:
    """FLOPs and nominal bytes of one GPU's share of one micro batch (forward and backward) or step."""

    matmul_flops_fwd_layer: float  # one layer, one micro batch
    attn_flops_fwd_layer: float
    elem_bytes_fwd_layer: float
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
# in full; "op" saves the outputs of every other matrix product and of attention (SDPA) and
# recomputes the rest of the forward.
RECOMPUTE = {"none": (0.0, 0.0, 0.0), "full": (1.0, 1.0, 1.0), "selective_layer": (0.5, 0.5, 0.5),
             "selective_op": (0.5, 0.0, 1.0)}


def layers_per_rank(spec: RunSpec, cfg: ModelConfig) -> int:
    return cfg.n_layers // (spec.pp * spec.pp_stages_per_rank) * spec.pp_stages_per_rank


def work(spec: RunSpec, vocab_parallel_loss: bool = False, optimizer_shards: int | None = None) -> StepWork:
    cfg = spec.model_config()
    counts = parameter_counts(cfg)
    d, f, kv, t = cfg.dim, cfg.ffn_dim, cfg.n_kv_heads * cfg.head_dim, spec.tp
    sp = t if spec.sequence_parallel else 1
    tokens = spec.micro_batch * spec.seq_len
    layer_matmul_params = counts["n_params_per_layer"] - 2 * d
    matmul = 2.0 * layer_matmul_params / t * tokens
    attn = 4.0 * d * spec.seq_len / t * tokens
    mlp = ELEMENTWISE_GELU if cfg.mlp == "gelu" else ELEMENTWISE_SWIGLU
    elems = (ELEMENTWISE_NORM_RESIDUAL * d / sp + ELEMENTWISE_ROPE * (d + kv) / t + mlp * f / t)
    layers = layers_per_rank(spec, cfg)
    # the heaviest pipeline stage: the last holds the output head (and the loss) besides its layers
    local_params = (layers * counts["n_params_per_layer"] + counts["n_params_embedding"]) / t
    return StepWork(
        matmul_flops_fwd_layer=matmul, attn_flops_fwd_layer=attn,
        elem_bytes_fwd_layer=elems * tokens * BYTES_PER_ELEMENT,
        head_matmul_flops_fwd=2.0 * cfg.vocab_size * d / t * tokens,
        head_elem_bytes=ELEMENTWISE_LOSS * cfg.vocab_size * tokens * BYTES_PER_ELEMENT / (t if vocab_parallel_loss else 1),
        optimizer_bytes=ADAMW_BYTES_PER_PARAM * local_params / (optimizer_shards or spec.dp_shard),
        fsdp_copy_bytes=FSDP_COPY_BYTES_PER_PARAM * local_params if spec.dp_shard * spec.dp_replicate >= 1 else 0.0,
        layers=layers, has_head=True, recompute=spec.activation_checkpointing == "full")


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


def compute_times(spec: RunSpec, cal: ComputeCalibration, peak_flops: float, hbm: float,
                  scale: float = 1.0, vocab_parallel_loss: bool = False,
                  recompute: tuple[float, float, float] | None = None,
                  optimizer_shards: int | None = None) -> ComputeTimes:
    """Computation of `spec` on a GPU of `peak_flops` and `hbm` bytes/s; `scale` multiplies every
    kernel time (the uncertainty box); vocab_parallel_loss: the loss's element-wise work is split
    over the TP ranks (Megatron) instead of replicated; recompute: the fractions of the forward's
    (matrix products, attention, element-wise work) recomputed in backward, instead of the spec's
    activation checkpointing (selective checkpointing, RECOMPUTE)."""
    w = work(spec, vocab_parallel_loss, optimizer_shards)
    r_mm, r_at, r_el = recompute if recompute is not None else (1.0 if w.recompute else 0.0,) * 3
    mm = peak_flops * cal.eta_matmul
    at = peak_flops * cal.eta_attention
    el = hbm * cal.eta_elementwise
    fwd = w.matmul_flops_fwd_layer / mm + w.attn_flops_fwd_layer / at + w.elem_bytes_fwd_layer / el
    bwd = (2.0 + r_mm) * w.matmul_flops_fwd_layer / mm + (2.0 + r_at) * w.attn_flops_fwd_layer / at \
        + (2.0 + r_el) * w.elem_bytes_fwd_layer / el
    head_f = w.head_matmul_flops_fwd / mm + 0.5 * w.head_elem_bytes / el
    head_b = 2.0 * w.head_matmul_flops_fwd / mm + 0.5 * w.head_elem_bytes / el
    return ComputeTimes(layer_fwd_s=fwd * scale, layer_bwd_s=bwd * scale, head_fwd_s=head_f * scale,
                        head_bwd_s=head_b * scale, optimizer_s=w.optimizer_bytes / (hbm * cal.eta_optimizer) * scale,
                        fsdp_copy_s=w.fsdp_copy_bytes / (hbm * cal.eta_fsdp_copy) * scale,
                        gap_fraction=cal.gap_fraction, layers=w.layers, microbatches=microbatches(spec))


def step_totals(spec: RunSpec) -> dict:
    """A step's work on one GPU by category: FLOPs (gemm, attention) and nominal bytes."""
    w = work(spec)
    m = microbatches(spec)
    rec = 1.0 if w.recompute else 0.0
    return {
        "gemm": m * (w.layers * (3.0 + rec) * w.matmul_flops_fwd_layer + 3.0 * w.head_matmul_flops_fwd),
        "attention": m * w.layers * (3.0 + rec) * w.attn_flops_fwd_layer,
        "elementwise": m * (w.layers * (3.0 + rec) * w.elem_bytes_fwd_layer + w.head_elem_bytes),
        "optimizer": w.optimizer_bytes,
        "fsdp_copy": w.fsdp_copy_bytes,
    }


def calibrate(runs, gpu_hbm: dict[str, float] | None = None) -> ComputeCalibration:
    """Efficiencies from measured runs (perfmodel.measured.MeasuredRun) on one GPU each: the
    traced ones by kernel category (time-weighted over runs); without any trace, the hardware MFU."""
    from scalestudy.hardware import gpu_spec

    ok = [r for r in runs if r.ok and r.spec.world_size == 1 and r.peak_flops]
    if not ok:
        raise ValueError("no complete one-GPU training run to calibrate the computation from")
    traced = [r for r in ok if r.kernels is not None]
    gpu = ok[0].device_name
    peak = float(ok[0].peak_flops)
    hbm = (gpu_hbm or {}).get(gpu) or gpu_spec(gpu).memory_bytes_per_s
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
            detail[r.run_id] = {"kernel_s_per_step": r.kernels.per_step_s, "busy_s": r.kernels.busy_s,
                                "step_time_s": r.step_time_s, "traced_steps": r.kernels.n_steps}
        return ComputeCalibration(
            method="kernel categories", eta_matmul=work_sums["gemm"] / sums["gemm"] / peak,
            eta_attention=work_sums["attention"] / sums["attention"] / peak,
            eta_elementwise=work_sums["elementwise"] / sums["elementwise"] / hbm,
            eta_optimizer=work_sums["optimizer"] / sums["optimizer"] / hbm,
            eta_fsdp_copy=work_sums["fsdp_copy"] / sums["fsdp_copy"] / hbm,
            gap_fraction=max(0.0, 1.0 - busy / step), gpu=gpu, peak_flops=peak, hbm_bytes_per_s=hbm,
            run_ids=tuple(r.run_id for r in traced), detail=detail)
    # one efficiency: hardware FLOPs over step time
    num = den = 0.0
    for r in ok:
        t = step_totals(r.spec)
        num += t["gemm"] + t["attention"]
        den += r.step_time_s
    eta = num / den / peak
    big = 1e9  # memory-bound work folded into the one efficiency
    return ComputeCalibration(method="mfu", eta_matmul=eta, eta_attention=eta, eta_elementwise=big,
                              eta_optimizer=big, eta_fsdp_copy=big, gap_fraction=0.0, gpu=gpu, peak_flops=peak,
                              hbm_bytes_per_s=hbm, run_ids=tuple(r.run_id for r in ok),
                              detail={"hardware_mfu": eta})


def single_gpu_step(spec: RunSpec, cal: ComputeCalibration, peak: float | None = None, hbm: float | None = None,
                    scale: float = 1.0) -> float:
    """Predicted step time of a one-GPU run (no communication): kernels / (1 - gap)."""
    ct = compute_times(spec, cal, peak or cal.peak_flops, hbm or cal.hbm_bytes_per_s, scale)
    return ct.kernels_s / (1.0 - ct.gap_fraction)
