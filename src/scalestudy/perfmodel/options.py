"""Choices of how a layout runs that a RunSpec does not carry (the harness has one way each; the
paper's Megatron-inspired framework and Megatron-LM another). A study states them under
`prediction: {options: {...}}`; `scalestudy model predict` takes them as flags.

tp_loss          vocab_parallel: Megatron's vocab-parallel cross-entropy (each TP rank keeps its
                 slice of the logits; three all-reduces of one fp32 number a token: max, target
                 logit, sum of exponentials) [Megatron-LM, core/tensor_parallel/cross_entropy.py];
                 gather_logits: the full bf16 logits all-gathered on every TP rank (this package's
                 DTensor harness: ColwiseParallel output head with replicated output).
recompute        None: as the spec's activation_checkpointing says; else one of compute.RECOMPUTE
                 (none, full, selective_layer, selective_op: torchtitan's selective checkpointing),
                 which the RunSpec cannot express.
distributed_optimizer  ZeRO-1 for DDP layouts (dp_shard 1): optimizer states sharded over the
                 data-parallel group, gradients reduce-scattered and parameters all-gathered
                 instead of all-reduced (Megatron's --use-distributed-optimizer).
elementwise      fused: the element-wise kernels of the harness in eager mode (F.rms_norm, RoPE and SwiGLU
                 each one generated kernel, the chunked loss), which the calibration runs ran, and
                 Megatron's fused kernels (bias-GELU, fused norms); unfused: plain PyTorch ops, one
                 kernel each (torchtitan's published runs). compute.ELEMENTWISE holds the counts.
tp_comm_overlap  False: TP collectives run between the matrix products that need them (synchronous);
                 True: overlapped with the layer's matrix products (Megatron's TP communication
                 overlap): only what exceeds the layer's computation is exposed.
straggler        True: a step's computation at W ranks is the expected maximum of W ranks'
                 (perfmodel/straggler.py: the step-to-step spread measured on the calibration runs);
                 False: one rank's mean.
overlap_dp_chunks  True (the default): under an interleaved pipeline each model chunk's data-parallel
                 gradient reduction and parameter all-gather run as soon as the chunk is done (before
                 it starts), hidden behind the other chunks' micro batches (Megatron-core's
                 --overlap-grad-reduce and --overlap-param-gather, which NeMo's and MLPerf's GPT-3
                 configurations set; perfmodel/overlap.py); False: the rank's chunks as one unit,
                 the collectives after the pipeline's last micro batch (before its first). Plain
                 1F1B and GPipe pipelines are the same either way.
pp_comm_overlap  False (the default): pipeline sends wait on the critical path; True: under an interleaved
                 pipeline each send overlaps the computation of the next model chunk (Megatron-core's
                 overlap_p2p_comm, which NeMo's MLPerf GPT-3 and Llama 3.1 configurations set: conf/custom.yaml
                 OVERLAP_P2P_COMM, default True): only what exceeds a chunk's forward or backward is exposed.
grad_reduce_dtype  the data-parallel gradient reduction's element type: fp32 (the default: this package's
                 FSDP2 MixedPrecisionPolicy reduce_dtype) or bf16 (Megatron's grad_reduce_in_fp32=False,
                 NeMo's grad_sync_dtype bf16: the MLPerf configurations).
param_gather_dtype  the data-parallel parameter all-gather's element type: bf16 (the default) or fp8 (NeMo's
                 FP8_PARAMS / FP8_PARAM_GATHER: FP8 primary weights gathered at one byte a parameter).
burst_speedup    True (the default): computation in bursts shorter than the board power limiter's window
                 (between exposed waits) runs its clock-bound kernels (matrix products, attention) at up
                 to full clock, faster than the calibrated rates, which were measured at the limit
                 (perfmodel/power.py burst_speed: the limiter window and the clock at the limit from the
                 H200 duty-cycle fit; checked, not fitted, on an H100's bursts, data/burst-rate); False:
                 the calibrated rate whatever the bursts (before 2026-12-05; power still follows the bursts).
attention_carry  a factor on the attention carry (perfmodel/achievable.py KernelCarry), which is the ratio
                 of the published rates of the cluster's attention kernel and the calibration's
                 (spec/catalog/attention.yaml; the matrix products' carry where the cluster names no
                 kernel): 1, the default, takes that carry as it is; a user with a rate of their own
                 kernel at their shapes states the ratio to it here.
gpu_spread_cv    the GPU-to-GPU spread of one GPU model, as a coefficient of variation (0: none, the
                 default; perfmodel/straggler.py cites the one published figure we know and why it
                 is not the default).
overlap_slowdown s: computation that overlaps an FSDP collective runs at 1 / (1 + s) of its rate for
                 the overlapped part (NCCL's kernels hold SMs and take memory bandwidth), inside the
                 step's timeline (perfmodel/overlap.py): the stretched computation hides more of the
                 collective, exposed communication is what still exceeds it, and the stretch is
                 computation, drawn at compute power. Source: Lee, Oh, Kim, Go, Park, Mahajan,
                 "Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
                 Learning: Performance and Power Implications", arXiv 2507.03114v1 (2025), abstract:
                 "overlapping computation and communication can result in an average computational
                 slowdown of 18.9%, with a maximum of 40.0% slowdown. This slowdown is in comparison to
                 the scenario when no communication was happening with the compute"; the HTML version's
                 opening: "across state-of-the-art GPT and LLaMA models, across 4 A100s, H100s, MI250,
                 and MI210" (one node: NVLink / Infinity Fabric). Default 0.189, that average: it is
                 the only published measurement we have, on the GPU generations modelled here, and its
                 sign is not in doubt across nodes (a collective's NCCL kernels hold one SM a channel,
                 16 of an H100's 132, for the whole collective, which across nodes lasts longer, not
                 shorter), so 0 is the one value the evidence rules out. Caveat: what may not carry to
                 inter-node FSDP is the memory-bandwidth contention, which across nodes is smaller (a
                 ring at a 50 GB/s NIC moves ~150 GB/s through HBM at the model's 3 bytes a bus byte,
                 4.5% of an H100's 3.35 TB/s, against several hundred GB/s a GPU over NVLink): 0.189 is
                 the published value of a setting that contends more, not a measurement of ours, and
                 no per-GPU (H100, A100) value of the paper was available to us (the stored copy gives
                 its opening only). The band spans [0, 2 s] (cluster uncertainty.interference); 0 turns
                 the mechanism off. Nothing is fitted to C1-C4 or the external ledger. Replaces the
                 cluster files' additive `overlap.interference` (0.15, assumed, no source), which is no
                 longer read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from scalestudy.perfmodel.compute import ELEMENTWISE, RECOMPUTE, recompute_fractions

TP_LOSSES = ("vocab_parallel", "gather_logits")
GRAD_REDUCE_DTYPES = ("fp32", "bf16")
PARAM_GATHER_DTYPES = ("bf16", "fp8")


@dataclass(frozen=True)
class ModelOptions:
    tp_loss: str = "vocab_parallel"
    tp_comm_overlap: bool = False
    recompute: str | None = None
    distributed_optimizer: bool = False
    elementwise: str = "fused"
    straggler: bool = True
    overlap_dp_chunks: bool = True
    gpu_spread_cv: float = 0.0
    attention_carry: float = 1.0
    overlap_slowdown: float = 0.189
    burst_speedup: bool = True
    pp_comm_overlap: bool = False
    grad_reduce_dtype: str = "fp32"
    param_gather_dtype: str = "bf16"

    def __post_init__(self):
        if self.elementwise not in ELEMENTWISE:
            raise ValueError(f"elementwise {self.elementwise!r} is not one of {', '.join(ELEMENTWISE)}")

        for name, allowed in (("grad_reduce_dtype", GRAD_REDUCE_DTYPES), ("param_gather_dtype", PARAM_GATHER_DTYPES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        if self.tp_loss not in TP_LOSSES:
            raise ValueError(f"tp_loss {self.tp_loss!r} is not one of {', '.join(TP_LOSSES)}")
        if not (0.0 <= float(self.gpu_spread_cv) < 1.0):
            raise ValueError(f"gpu_spread_cv {self.gpu_spread_cv!r} must be a fraction in [0, 1)")
        if not (0.0 < float(self.attention_carry) <= 10.0):
            raise ValueError(f"attention_carry {self.attention_carry!r} must be a ratio in (0, 10]")
        if not (0.0 <= float(self.overlap_slowdown) <= 1.0):
            raise ValueError(f"overlap_slowdown {self.overlap_slowdown!r} must be a fraction in [0, 1]")
        if self.recompute is not None and self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute {self.recompute!r} is not one of {', '.join(RECOMPUTE)}")

    def recompute_fractions(self, cfg) -> tuple[float, float, float] | None:
        """The recomputed fractions of the forward for model shape `cfg` (a ModelConfig); None: the spec's."""
        return recompute_fractions(self.recompute, cfg) if self.recompute else None

    def passes(self):
        return ELEMENTWISE[self.elementwise]

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "ModelOptions":
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        bad = set(d) - known
        if bad:
            raise ValueError(f"unknown model option(s) {', '.join(sorted(bad))}; known: {', '.join(sorted(known))}")
        return cls(**d)


MEANING = {  # one line each, for the command line (the module docstring has the whole story)
    "tp_loss": "how the TP layouts' loss is computed: Megatron's vocab-parallel cross-entropy, or full "
    "logits gathered on every TP rank (this package's harness)",
    "tp_comm_overlap": "overlap TP collectives with the layer's matrix products (Megatron's TP communication overlap)",
    "recompute": "activation recomputation (torchtitan's selective checkpointing included), in place of the "
    "spec's activation_checkpointing",
    "distributed_optimizer": "ZeRO-1 for DDP layouts: optimizer states sharded over the data-parallel group "
    "(Megatron's --use-distributed-optimizer)",
    "elementwise": "the element-wise kernels counted: fused (the harness in eager mode, Megatron's fused "
    "kernels), unfused (plain PyTorch ops) or megatron-2021",
    "straggler": "a step's computation at W ranks is the expected maximum of W ranks' (the step-to-step spread "
    "measured on the calibration runs), not one rank's mean",
    "overlap_dp_chunks": "interleaved pipelines: each model chunk's data-parallel collectives overlapped with the other "
    "chunks' micro batches (Megatron-core's --overlap-grad-reduce/--overlap-param-gather)",
    "gpu_spread_cv": "the GPU-to-GPU speed spread of one GPU model as a coefficient of variation, added to the "
    "straggler term [unit: fraction; allowed: 0 <= x < 1]",
    "attention_carry": "a factor on the attention carry, the ratio of the published rates of the cluster's attention "
    "kernel and the calibration's (1: that carry as it is) [unit: ratio; allowed: 0 < x <= 10]",
    "burst_speedup": "computation in bursts shorter than the power limiter's window (between exposed waits) runs its "
    "matrix products and attention at up to full clock, faster than the calibrated rate measured at "
    "the limit",
    "pp_comm_overlap": "interleaved pipelines: each send overlaps the next model chunk's computation (Megatron-core's "
    "overlap_p2p_comm)",
    "grad_reduce_dtype": "element type of the data-parallel gradient reduction (fp32: FSDP2's reduce_dtype; bf16: "
    "Megatron's grad_reduce_in_fp32=False)",
    "param_gather_dtype": "element type of the data-parallel parameter all-gather (fp8: NeMo's FP8 primary weights)",
    "overlap_slowdown": "computation overlapping an FSDP collective runs 1 + s times slower for the overlapped part "
    "(NCCL kernels take SMs and memory bandwidth); default 0.189, the average computational "
    "slowdown Lee et al. (arXiv 2507.03114) measured on 4-GPU A100/H100/MI250/MI210 nodes, "
    "intra-node (across nodes less memory traffic contends); 0: off [unit: fraction; "
    "allowed: 0 <= x <= 1]",
}


def choices() -> dict[str, tuple[str, ...] | type | None]:
    """Each option's allowed values (None: a yes/no option; float: a number), for the command line."""
    allowed = {
        "tp_loss": TP_LOSSES,
        "recompute": tuple(RECOMPUTE),
        "elementwise": tuple(ELEMENTWISE),
        "gpu_spread_cv": float,
        "attention_carry": float,
        "grad_reduce_dtype": GRAD_REDUCE_DTYPES,
        "param_gather_dtype": PARAM_GATHER_DTYPES,
        "overlap_slowdown": float,
    }
    return {f.name: (None if f.type in (bool, "bool") else allowed[f.name]) for f in fields(ModelOptions)}


HARNESS = ModelOptions(tp_loss="gather_logits", tp_comm_overlap=False)
