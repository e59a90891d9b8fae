"""The collectives a parallel layout issues in one training step, with their message sizes, as
this package's harness issues them (harness/parallelize.py, harness/trainer.py, torch pipelining).

Ranks are laid out node-major (rank = node x gpus_per_node + local) on the mesh
(pp, dp_replicate, dp_shard, tp), tp innermost; a group's node span follows from its stride.

FSDP2 (one unit a transformer block plus a root unit: embedding, final norm, output head):
- all-gather of the unit's bf16 parameters (size: the gathered unit, 2 B a parameter) before its
  forward, once per micro batch (FSDP2 reshards after backward; under pipeline parallelism once
  per schedule step); again before its backward when reshard_after_forward (not the last block,
  not the root);
- reduce-scatter of the unit's fp32 gradients (size: the unsharded gradient, 4 B a parameter)
  after its backward, once per step (gradient sync on the last micro batch only; under pipeline
  parallelism once per schedule step);
- HSDP (dp_replicate > 1): an all-reduce of the reduce-scattered fp32 shard across the replicas
  after each reduce-scatter (in FSDP2's reduce-scatter stream).
Tensor parallelism (Megatron-style, synchronous DTensor collectives), activation A = micro batch x
sequence x width x 2 B: per layer, without sequence parallelism two all-reduces of A forward and
two backward; with it two all-gathers and two reduce-scatters of A each way; under full
activation checkpointing the forward's again in backward. Embedding (RowwiseParallel): one
all-reduce (reduce-scatter with SP) of A forward. Output head: an all-reduce (reduce-scatter with
SP) of A backward, with SP an all-gather of A forward, and the loss as ModelOptions.tp_loss says:
Megatron's vocab-parallel cross-entropy (three all-reduces of an fp32 number a token) or, as the
DTensor harness does (ColwiseParallel, replicated output), an all-gather of the bf16 logits.
DDP (dp_shard 1) with ModelOptions.distributed_optimizer (ZeRO-1): a reduce-scatter of each unit's fp32
gradients instead of the all-reduce, and an all-gather of its bf16 parameters once a step, before
the next forward (on the FSDP stream: overlapped as prefetched all-gathers are).
Pipeline parallelism: per micro batch, one send of the stage's output activation forward and one
of its gradient backward (A, or A / tp with sequence parallelism); the schedule's bubble is
(pp - 1) / (m + pp - 1) of the pipeline (m micro batches; m x stages per rank for interleaved).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scalestudy.measure.bandwidth import busbw_factor
from scalestudy.perfmodel.collectives import Group, group_of
from scalestudy.perfmodel.compute import layers_per_rank
from scalestudy.perfmodel.options import ModelOptions
from scalestudy.spec.catalog.models import parameter_counts
from scalestudy.spec.run import RunSpec

PARAM_BYTES = {"bf16": 2, "fp32": 4, "fp8": 1}
# parameters gathered and activations sent at this size: FP8 runs keep bf16 parameters and activations
# between layers (Transformer Engine casts inside each linear layer) [assumed: no FP8 parameter gather]
COMM_DTYPE = {"bf16": "bf16", "fp32": "fp32", "fp8": "bf16"}


@dataclass(frozen=True)
class Collective:
    name: str  # fsdp_all_gather, fsdp_all_gather_bwd, fsdp_reduce_scatter, hsdp_all_reduce, tp_*, pp_send
    op: str  # all_gather | reduce_scatter | all_reduce | send
    unit: str  # block | root | layer | embedding | head | stage
    size_bytes: float  # one call, as nccl-tests counts it
    group: Group
    calls: int  # a step, on one GPU
    phase: str  # forward | backward
    stream: str  # fsdp (a second stream, overlappable) | compute (synchronous, on the critical path) | cp
    # (context parallelism's exchanges, overlapped with the layer's attention)

    @property
    def bytes_per_step(self) -> float:
        return self.size_bytes * self.calls

    @property
    def bus_bytes_per_step(self) -> float:
        """What crosses one rank's busiest link (busbw_factor x size), per step."""
        if self.op == "send":
            return self.bytes_per_step
        return busbw_factor(self.op, self.group.n) * self.bytes_per_step if self.group.n > 1 else 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        d["group"] = self.group.as_dict()
        return d


@dataclass(frozen=True)
class UnitParams:
    block: float  # parameters of one transformer block on one TP rank
    root: float  # embedding + final norm + output head on one TP rank (the heaviest stage's root)
    blocks: int  # blocks on this rank


def unit_params(spec: RunSpec) -> UnitParams:
    cfg = spec.model_config()
    c = parameter_counts(cfg)
    d, t = cfg.dim, spec.tp
    block = (c["n_params_per_layer"] - 2 * d) / t + 2 * d
    vd = cfg.vocab_size * d / t
    root = (2 * vd if spec.pp == 1 else vd) + d  # pp > 1: the last stage holds the head and the norm
    return UnitParams(block, root, layers_per_rank(spec, cfg))


def groups(spec: RunSpec, gpus_per_node: int) -> dict[str, Group]:
    """Megatron's rank order with context parallelism: tp innermost, then cp, then the data-parallel
    ranks, then pp; the data-parallel collectives run over the data-parallel group with context
    parallelism (dp_shard x cp ranks: the weights are the same on every CP rank)."""
    t, s, r, c = spec.tp, spec.dp_shard, spec.dp_replicate, spec.cp
    return {
        "tp": group_of(t, 1, gpus_per_node),
        "cp": group_of(c, t, gpus_per_node),
        "dp_shard": group_of(s * c, t, gpus_per_node),
        "dp_replicate": group_of(r, t * s * c, gpus_per_node),
        "pp": group_of(spec.pp, t * s * r * c, gpus_per_node),
    }


def activation_bytes(spec: RunSpec) -> float:
    """One micro batch's activation on one rank (bf16): with context parallelism a rank's seq_len / cp."""
    return spec.micro_batch * spec.seq_len // spec.cp * spec.model_config().dim * PARAM_BYTES["bf16"]


def kv_bytes(spec: RunSpec) -> float:
    """One rank's keys and values of one layer and micro batch (bf16): what context parallelism's ring
    attention passes on at each of its cp - 1 steps."""
    cfg = spec.model_config()
    return (
        2 * spec.micro_batch * spec.seq_len // spec.cp * cfg.n_kv_heads * cfg.head_dim / spec.tp * PARAM_BYTES["bf16"]
    )


def layout_collectives(spec: RunSpec, gpus_per_node: int, options: ModelOptions = ModelOptions()) -> list[Collective]:
    """Every collective one GPU (of the heaviest pipeline stage) takes part in during a step."""
    g = groups(spec, gpus_per_node)
    u = unit_params(spec)
    pb = PARAM_BYTES[COMM_DTYPE[spec.precision]]
    if options.param_gather_dtype == "fp8" and spec.precision == "fp8":  # FP8 primary weights
        pb = PARAM_BYTES["fp8"]
    grad_bytes = PARAM_BYTES[options.grad_reduce_dtype]
    passes = spec.grad_accum  # FSDP forward passes a step: a micro batch, or a pipeline schedule step
    rs_calls = 1 if spec.pp == 1 else spec.grad_accum
    out: list[Collective] = []
    if spec.dp_shard > 1:
        fs = g["dp_shard"]
        out += [
            Collective("fsdp_all_gather", "all_gather", "root", u.root * pb, fs, passes, "forward", "fsdp"),
            Collective(
                "fsdp_all_gather", "all_gather", "block", u.block * pb, fs, passes * u.blocks, "forward", "fsdp"
            ),
            Collective(
                "fsdp_reduce_scatter",
                "reduce_scatter",
                "block",
                u.block * grad_bytes,
                fs,
                rs_calls * u.blocks,
                "backward",
                "fsdp",
            ),
            Collective(
                "fsdp_reduce_scatter", "reduce_scatter", "root", u.root * grad_bytes, fs, rs_calls, "backward", "fsdp"
            ),
        ]
        if spec.reshard_after_forward and u.blocks > 1:
            out.append(
                Collective(
                    "fsdp_all_gather_bwd",
                    "all_gather",
                    "block",
                    u.block * pb,
                    fs,
                    passes * (u.blocks - 1),
                    "backward",
                    "fsdp",
                )
            )
    if spec.dp_replicate > 1 and spec.dp_shard == 1 and options.distributed_optimizer:
        # ZeRO-1 (Megatron's distributed optimizer): the gradients reduce-scattered over the
        # data-parallel group, each rank updates its shard, the bf16 parameters all-gathered
        # before the next forward (overlapped with it); same bytes as the all-reduce in all
        rg = g["dp_replicate"]
        out += [
            Collective(
                "zero1_reduce_scatter",
                "reduce_scatter",
                "block",
                u.block * grad_bytes,
                rg,
                rs_calls * u.blocks,
                "backward",
                "fsdp",
            ),
            Collective(
                "zero1_reduce_scatter", "reduce_scatter", "root", u.root * grad_bytes, rg, rs_calls, "backward", "fsdp"
            ),
            Collective("zero1_all_gather", "all_gather", "block", u.block * pb, rg, u.blocks, "forward", "fsdp"),
            Collective("zero1_all_gather", "all_gather", "root", u.root * pb, rg, 1, "forward", "fsdp"),
        ]
    elif spec.dp_replicate > 1:
        rg = g["dp_replicate"]
        out += [
            Collective(
                "hsdp_all_reduce",
                "all_reduce",
                "block",
                u.block * grad_bytes / spec.dp_shard,
                rg,
                rs_calls * u.blocks,
                "backward",
                "fsdp",
            ),
            Collective(
                "hsdp_all_reduce",
                "all_reduce",
                "root",
                u.root * grad_bytes / spec.dp_shard,
                rg,
                rs_calls,
                "backward",
                "fsdp",
            ),
        ]
    m = spec.grad_accum * spec.pp_microbatches  # forward/backward passes of the stage's layers a step
    a = activation_bytes(spec)
    if spec.tp > 1:
        tg = g["tp"]
        per_layer = (2 + (2 if spec.activation_checkpointing == "full" else 0), 2)  # forward, backward
        first, last = True, True  # the heaviest stage is the last; with pp = 1 it is also the first
        if spec.pp > 1:
            first = False
        if spec.sequence_parallel:
            for op in ("all_gather", "reduce_scatter"):
                for phase, k in (("forward", per_layer[0]), ("backward", per_layer[1])):
                    out.append(Collective(f"tp_{op}", op, "layer", a, tg, m * u.blocks * k, phase, "compute"))
            if first:
                out.append(
                    Collective("tp_reduce_scatter", "reduce_scatter", "embedding", a, tg, m, "forward", "compute")
                )
            if last:
                out.append(Collective("tp_all_gather", "all_gather", "head", a, tg, m, "forward", "compute"))
                out.append(Collective("tp_reduce_scatter", "reduce_scatter", "head", a, tg, m, "backward", "compute"))
        else:
            for phase, k in (("forward", per_layer[0]), ("backward", per_layer[1])):
                out.append(
                    Collective("tp_all_reduce", "all_reduce", "layer", a, tg, m * u.blocks * k, phase, "compute")
                )
            if first:
                out.append(Collective("tp_all_reduce", "all_reduce", "embedding", a, tg, m, "forward", "compute"))
            if last:
                out.append(Collective("tp_all_reduce", "all_reduce", "head", a, tg, m, "backward", "compute"))
        if last and options.tp_loss == "gather_logits":
            cfg = spec.model_config()
            logits = spec.micro_batch * spec.seq_len * cfg.vocab_size * PARAM_BYTES["bf16"]
            out.append(Collective("tp_logits_all_gather", "all_gather", "head", logits, tg, m, "forward", "compute"))
        elif last:  # vocab-parallel cross-entropy: max, target logit, sum of exponentials, fp32 a token
            per_token = spec.micro_batch * spec.seq_len * 4
            out.append(
                Collective("tp_loss_all_reduce", "all_reduce", "head", per_token, tg, 3 * m, "forward", "compute")
            )
    if spec.cp > 1:
        # ring attention (Transformer Engine's p2p context parallelism, NeMo's default): each layer's
        # forward passes the rank's keys and values on cp - 1 times, its backward the keys and values
        # and their gradients; each exchange overlaps the attention of the chunk in hand
        cg = group_of(2, spec.tp, gpus_per_node)
        kv = kv_bytes(spec)
        out.append(Collective("cp_send", "send", "layer", kv, cg, m * u.blocks * (spec.cp - 1), "forward", "cp"))
        out.append(Collective("cp_send", "send", "layer", 2 * kv, cg, m * u.blocks * (spec.cp - 1), "backward", "cp"))
    if spec.pp > 1:
        size = a / spec.tp if spec.sequence_parallel else a
        pg = group_of(2, spec.dp_replicate * spec.dp_shard * spec.cp * spec.tp, gpus_per_node)
        # interior stages send both ways; the heaviest (last) stage sends gradients backward only,
        # the first activations forward only: count one send each way, as an interior stage does
        v = spec.pp_stages_per_rank
        out.append(Collective("pp_send", "send", "stage", size, pg, m * v, "forward", "compute"))
        out.append(Collective("pp_send", "send", "stage", size, pg, m * v, "backward", "compute"))
    return out


def volumes(spec: RunSpec, gpus_per_node: int) -> dict[str, float]:
    """Bytes a step (nccl-tests sizes x calls) by collective name, for one GPU."""
    out: dict[str, float] = {}
    for c in layout_collectives(spec, gpus_per_node):
        out[c.name] = out.get(c.name, 0.0) + c.bytes_per_step
    return out


def bubble_fraction(spec: RunSpec) -> float:
    """The idle share of a pipeline schedule: (pp - 1) / (m + pp - 1), m micro batches (m x stages
    a rank for interleaved 1F1B)."""
    if spec.pp == 1:
        return 0.0
    m = spec.pp_microbatches * (spec.pp_stages_per_rank if spec.pp_schedule == "interleaved_1f1b" else 1)
    return (spec.pp - 1) / (m + spec.pp - 1)
