"""How much communication the layout hides behind computation: a two-stream timeline of one step.

The compute stream runs, for each micro batch, the root's forward (embedding), each block's
forward, the head's forward and backward, each block's backward and the embedding's backward,
then the optimizer. Synchronous collectives (tensor parallelism, pipeline sends) sit on the
compute stream between the kernels that need them. FSDP's collectives run on their own streams:

- all-gathers (forward): the root's and the first block's are issued at the start; block i+1's is
  issued when block i+1-prefetch starts its forward (prefetch depth), and never before the
  previous all-gather ends; a block's forward waits for its all-gather;
- all-gathers (backward, reshard_after_forward only): likewise in reverse order;
- reduce-scatters (and HSDP's all-reduce after each, same stream): block i's after its
  backward, in order; the optimizer waits for the last.
Gradient sync happens on the last micro batch only (harness/trainer.py).

Exposed communication is what the trace analyser measures (scalestudy.measure.exposed_comm): the union of
communication intervals minus the union of computation intervals. Host overhead stretches every
computation kernel by 1 / (1 - gap_fraction), as measured on one GPU.

Overlap slowdown (`interference`, the value of ModelOptions.overlap_slowdown, s): computation that
runs while a collective of an FSDP stream is in flight progresses at 1 / (1 + s) of its rate (NCCL's
kernels hold SMs and take memory bandwidth: Lee et al., arXiv 2507.03114, measured an average
computational slowdown of 18.9% on 4-GPU nodes; options.py says what of it applies here). The
stretch is inside the timeline: a kernel that starts under a collective that ends before the
kernel would have, runs stretched until the collective ends and at full rate after it; the
stretched computation covers more of the collective, so exposed communication is what still
exceeds the stretched computation, and the extra time is computation (drawn at compute power by
perfmodel/power.py). `Timeline.slowdown_s` is the extra time. To know every collective a kernel
can overlap when it starts, a prefetched all-gather is issued when the block it is prefetched
behind starts (FSDP's order: block i + prefetch's when block i starts), not later.

Pipeline parallelism: the timeline above is run for one micro batch of the heaviest stage (the
FSDP all-gathers of the first and the reduce-scatters of the last micro batch); the other
micro batches and the schedule's bubble are added as computation and idle time: a pipeline of
m micro batches on p stages takes (m + p - 1) x (forward + backward of a micro batch) for
1F1B/GPipe ((m x v + p - 1) / v for interleaved 1F1B with v stages a rank). During the bubble a
rank's NCCL receive kernels wait, so a trace counts the bubble as exposed communication; the
model does the same and reports the bubble on its own too.

Data-parallel collectives under an interleaved pipeline (ModelOptions.overlap_dp_chunks): the
schedule runs the micro batches in rounds of pp a model chunk (Megatron's interleaved 1F1B:
warm-up forwards chunk 0, 1, ..., v - 1; the last round of backwards chunk v - 1, ..., 0). Each
chunk's gradients are reduced as soon as its last backward is done and its parameters gathered
before its first forward (Megatron-core's DistributedDataParallelConfig overlap_grad_reduce and
overlap_param_gather; NVIDIA/NeMo docs/source/features/optimizations/communication_overlap.rst:
"with pipeline-parallelism, the granularity of DP communication becomes the Transformer layers
per virtual pipeline stage"), one chunk after another on one stream. `chunked_exposure` gives what of them the other chunks' rounds do
not hide. Without the option the rank's layers are one unit: the collectives wait for the last
micro batch (before the first), as for a plain 1F1B pipeline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scalestudy.measure import intervals


@dataclass(frozen=True)
class StepInputs:
    layers: int
    microbatches: int  # forward/backward passes in the FSDP timeline (grad_accum)
    layer_fwd_s: float
    layer_bwd_s: float
    head_fwd_s: float
    head_bwd_s: float
    embed_s: float  # embedding forward and backward (tiny)
    tail_s: float  # optimizer and copies after the last reduce-scatter
    gap_fraction: float
    # synchronous collectives on the compute stream, one micro batch
    tp_layer_fwd_s: float = 0.0
    tp_layer_bwd_s: float = 0.0
    tp_head_fwd_s: float = 0.0
    tp_head_bwd_s: float = 0.0
    tp_embed_fwd_s: float = 0.0
    # FSDP collectives, one call each
    ag_root_s: float = 0.0
    ag_block_s: float = 0.0
    ag_bwd_block_s: float = 0.0  # 0 unless reshard_after_forward
    rs_root_s: float = 0.0  # reduce-scatter + HSDP all-reduce of the root
    rs_block_s: float = 0.0  # reduce-scatter + HSDP all-reduce of a block
    forward_prefetch: int = 1
    backward_prefetch: int = 1
    interference: float = 0.0
    ag_once: bool = False  # forward all-gathers before the first micro batch only (ZeRO-1's parameter
    #                        all-gather once a step after the optimizer), not before every pass (FSDP)


@dataclass(frozen=True)
class Timeline:
    step_s: float
    compute_s: float  # union of computation (stretched by host overhead and interference)
    comm_s: float  # summed communication time (each collective's own duration)
    exposed_comm_s: float  # union(comm) - union(compute)
    overlapped_s: float
    waits_s: float  # time the compute stream waited for an FSDP collective
    slowdown_s: float = 0.0  # computation's extra time while collectives overlapped it (interference)
    compute_bursts: int = 1  # stretches of computation between exposed waits (the power limiter's bursts)

    def as_dict(self) -> dict:
        return asdict(self)


def stretched_end(t: float, work_s: float, busy: list[tuple[float, float]], slowdown: float) -> float:
    """When computation of `work_s` seconds (at full rate) started at `t` ends, if it runs at
    1 / (1 + slowdown) of its rate inside the `busy` intervals (sorted, disjoint) and at full rate
    outside them."""
    cur, left = t, work_s
    if slowdown > 0:
        for a, b in busy:
            if b <= cur:
                continue
            if a > cur:  # full rate up to the next collective
                step = min(left, a - cur)
                cur, left = cur + step, left - step
                if left <= 0:
                    return cur
            cap = (b - cur) / (1.0 + slowdown)  # work done before the collective ends
            if left <= cap:
                return cur + left * (1.0 + slowdown)
            cur, left = b, left - cap
    return cur + left


def simulate(x: StepInputs) -> Timeline:
    k = 1.0 / (1.0 - x.gap_fraction)
    t = 0.0  # compute stream clock
    compute: list[tuple[float, float]] = []
    comm: list[tuple[float, float]] = []
    side: list[tuple[float, float]] = []  # FSDP-stream collectives that may still overlap computation
    comm_sum = 0.0
    waits = 0.0
    slowdown = 0.0
    L = x.layers
    ag_free = 0.0  # all-gather stream free at
    rs_free = 0.0

    def run(d: float) -> None:
        nonlocal t, slowdown, side
        if d > 0:
            w = d * k
            end = w + t
            if x.interference > 0 and side:
                side = [iv for iv in side if iv[1] > t]
                end = stretched_end(t, w, intervals.union(side), x.interference)
                slowdown += end - t - w
            compute.append((t, end))
            t = end

    def sync_comm(d: float) -> None:
        nonlocal t, comm_sum
        if d > 0:
            comm.append((t, t + d))
            comm_sum += d
            t += d

    def fsdp_comm(s: float, d: float) -> float:
        nonlocal comm_sum
        comm.append((s, s + d))
        side.append((s, s + d))
        comm_sum += d
        return s + d

    for mb in range(x.microbatches):
        last = mb == x.microbatches - 1
        # ---- forward ----
        ag_end = [0.0] * L
        gather = mb == 0 or not x.ag_once
        if x.ag_root_s > 0 and gather:
            ag_free = fsdp_comm(max(ag_free, t), x.ag_root_s)
            if t < ag_free:
                waits += ag_free - t
                t = ag_free
        run(x.embed_s / 2)
        sync_comm(x.tp_embed_fwd_s)
        P = max(x.forward_prefetch, 0)
        gathers = x.ag_block_s > 0 and gather

        def issue_fwd(i: int) -> None:  # block i's all-gather, issued now (at the compute clock)
            nonlocal ag_free
            ag_free = ag_end[i] = fsdp_comm(max(ag_free, t), x.ag_block_s)

        if gathers and P > 0:  # the first P at once
            for i in range(min(P, L)):
                issue_fwd(i)
        for i in range(L):
            if gathers:
                if P == 0:  # on demand
                    issue_fwd(i)
                if t < ag_end[i]:
                    waits += ag_end[i] - t
                    t = ag_end[i]
                if P > 0 and i + P < L:  # block i + P's, when block i starts its forward
                    issue_fwd(i + P)
            run(x.layer_fwd_s)
            sync_comm(x.tp_layer_fwd_s)
        run(x.head_fwd_s)
        sync_comm(x.tp_head_fwd_s)
        # ---- backward ----
        run(x.head_bwd_s)
        sync_comm(x.tp_head_bwd_s)
        Q = max(x.backward_prefetch, 0)
        ag_bwd_end = [0.0] * L
        regather = x.ag_bwd_block_s > 0

        def issue_bwd(i: int) -> None:
            nonlocal ag_free
            ag_free = ag_bwd_end[i] = fsdp_comm(max(ag_free, t), x.ag_bwd_block_s)

        if regather and Q > 0:  # blocks L-2 .. L-Q at once (block L-1 is still gathered)
            for i in range(L - 2, max(L - Q, 0) - 1, -1):
                issue_bwd(i)
        for i in reversed(range(L)):
            if regather and i < L - 1:
                if Q == 0:
                    issue_bwd(i)
                if t < ag_bwd_end[i]:
                    waits += ag_bwd_end[i] - t
                    t = ag_bwd_end[i]
            if regather and Q > 0 and 0 <= i - Q:  # block i - Q's, when block i starts its backward
                issue_bwd(i - Q)
            run(x.layer_bwd_s)
            sync_comm(x.tp_layer_bwd_s)
            if last and x.rs_block_s > 0:
                rs_free = fsdp_comm(max(rs_free, t), x.rs_block_s)
        run(x.embed_s / 2)
        if last and x.rs_root_s > 0:
            rs_free = fsdp_comm(max(rs_free, t), x.rs_root_s)
    if rs_free > t:
        waits += rs_free - t
        t = rs_free
    run(x.tail_s)
    u_comp, u_comm = intervals.union(compute), intervals.union(comm)
    exposed = intervals.total(intervals.subtract(u_comm, u_comp))
    overlapped = intervals.total(intervals.intersection(u_comm, u_comp))
    return Timeline(
        step_s=t,
        compute_s=intervals.total(u_comp),
        comm_s=comm_sum,
        exposed_comm_s=exposed,
        overlapped_s=overlapped,
        waits_s=waits,
        slowdown_s=slowdown,
        compute_bursts=max(1, len(u_comp)),
    )


def chunked_exposure(edge_s: float, per_chunk_s: float, round_s: float, chunks: int) -> float:
    """Exposed time of `chunks` collectives on one stream, one a model chunk, the i-th ready after
    i + 1 rounds of computation of `round_s` each (the last after the last round): the last
    chunk's own exposure `edge_s` (its collectives against its own blocks' computation, from
    `simulate`) plus the backlog of the earlier chunks that their rounds could not hide.
    Chunk i starts at max((i + 1) round, the stream free), so the last waits
    (chunks - 1) x max(0, per_chunk - round) behind its ready time."""
    if chunks <= 1:
        return edge_s
    return edge_s + (chunks - 1) * max(0.0, per_chunk_s - round_s)


def pipeline_time(
    mb_fwd_s: float, mb_bwd_s: float, pp: int, m: int, stages_per_rank: int = 1, interleaved: bool = False
) -> tuple[float, float]:
    """(pipeline time, bubble time) of m micro batches on pp stages; mb_* are one rank's time for
    one micro batch (all its stages)."""
    per = mb_fwd_s + mb_bwd_s
    if pp == 1:
        return m * per, 0.0
    if interleaved:
        bubble = (pp - 1) * per / stages_per_rank
    else:
        bubble = (pp - 1) * per
    return m * per + bubble, bubble
