"""predict(spec, cluster, calibration): time a step, tokens/s per device, MFU, exposed
communication and GPU power of a RunSpec on a described cluster, with an uncertainty band.

The band: the model is evaluated at every corner of a box of its uncertain inputs and the band is
the smallest and largest value over the corners (not a probability interval):
  compute       every computation time x (1 +- e), e = the largest held-out error of the compute
                model on measured runs (at least MIN_COMPUTE_ERROR)
  latency       collective latencies x (1 +- cluster uncertainty.ring_latency)
  intra_bw      NVLink bus bandwidth x (1 +- uncertainty.intra_bandwidth)
  inter_bw      network bus bandwidth x (1 +- uncertainty.inter_bandwidth)
  interference  options.overlap_slowdown x (1 +- uncertainty.interference)
  comm_power    the power of exposed communication above a gap's (measured, perfmodel/power.py CommPower;
                without that file the assumed HBM traffic power.hbm_bytes_per_bus_byte) x (1 +- uncertainty.comm_power)
                (power only)
`corners` keeps each corner's values in a fixed order (CORNERS) so that comparisons between two
predictions (a ratio, a difference) can be banded jointly: the same corner for both.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from scalestudy.measure.bandwidth import busbw_factor
from scalestudy.measure.metrics import flops_per_token
from scalestudy.perfmodel import MODEL_VERSION, achievable, gemm_rates
from scalestudy.perfmodel import compute as compute_mod
from scalestudy.perfmodel import power as power_mod
from scalestudy.perfmodel import rank_shares
from scalestudy.perfmodel import straggler as straggler_mod
from scalestudy.perfmodel.cluster import cluster_names, load_cluster
from scalestudy.perfmodel.collectives import CollectiveModel, Scales
from scalestudy.perfmodel.layout_comm import layout_collectives
from scalestudy.perfmodel.measured import digest, read_measured_dir
from scalestudy.perfmodel.options import ModelOptions
from scalestudy.perfmodel.overlap import StepInputs, chunked_exposure, pipeline_time, simulate
from scalestudy.perfmodel.rank_shares import gpu_kind
from scalestudy.spec import catalog
from scalestudy.spec.catalog.gpus import UnknownDeviceError
from scalestudy.spec.gemm import run_layout
from scalestudy.spec.memory_estimate import GIB, estimate_memory
from scalestudy.spec.run import RunSpec
from scalestudy.spec.studies import strategy_label

MIN_COMPUTE_ERROR = 0.03
DEFAULT_COMPUTE_ERROR = 0.10  # [assumed] when no run is held out
METRICS = (
    "step_time_s",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "mfu",
    "compute_s",
    "comm_s",
    "exposed_comm_s",
    "exposed_comm_share",
    "power_w_per_gpu",
    "power_w_total",
    "tokens_per_joule",
)
AXES = ("compute", "latency", "intra_bw", "inter_bw", "interference", "comm_power")
CORNERS = tuple(itertools.product((-1, 1), repeat=len(AXES)))


# ---- calibration ---------------------------------------------------------------------------
@dataclass
class Calibration:
    compute: compute_mod.ComputeCalibration
    power: power_mod.PowerModel | None
    compute_error: float  # relative half-width of the compute box
    compute_error_source: str
    fit_run_ids: tuple[str, ...]
    held_out: list[dict]  # per held-out run: measured and predicted step time and power
    runs: list  # perfmodel.measured.MeasuredRun, all read
    digest: str
    power_held_out: list[dict] = field(default_factory=list)  # measured training runs against the power fit
    step_cv: float = 0.0  # one GPU's step-to-step spread (perfmodel/straggler.py)
    step_cv_source: str = ""
    gemm: "gemm_rates.GemmRates | None" = None  # matrix products timed at layouts' shapes, where measured

    @property
    def fit_layouts(self) -> tuple[str, ...]:
        """The MODEL/TOKENS/TP layouts of the runs the compute model was fitted on."""
        return tuple(sorted({run_layout(r.spec) for r in self.runs if r.run_id in self.fit_run_ids}))

    def straggler(self, options) -> "straggler_mod.Straggler | None":
        if not options.straggler:
            return None
        return straggler_mod.Straggler(self.step_cv, self.step_cv_source, float(options.gpu_spread_cv))

    def provenance(self) -> dict:
        return {
            "fit_run_ids": list(self.fit_run_ids),
            "runs": [r.provenance() for r in self.runs],
            "digest": self.digest,
            "compute": self.compute.as_dict(),
            "power": self.power.as_dict() if self.power else None,
            "compute_error": self.compute_error,
            "compute_error_source": self.compute_error_source,
            "held_out": self.held_out,
            "power_held_out": self.power_held_out,
        }


def _tdp_of(gpu: str | None, root: Path | str) -> float:
    for name in cluster_names(root):
        c = load_cluster(name, root)
        if c.gpu == gpu:
            return c.v("tdp_w")
    raise ValueError(
        f"no cluster file describes {gpu!r}: its board power limit (tdp_w) is needed to carry "
        "measured power to other GPUs"
    )


def calibrate(raw_dirs, root: Path | str = ".", fit_run_ids: tuple[str, ...] | None = None) -> Calibration:
    """Calibrate from the training runs under raw_dirs. Fit set: `fit_run_ids`, or by default the
    traced runs (the compute model needs kernel categories); every other complete run is held
    out, predicted, and its error sets the compute box."""
    if isinstance(raw_dirs, (str, Path)):
        raw_dirs = [raw_dirs]
    runs = [r for d in raw_dirs for r in read_measured_dir(Path(root) / d, root)]
    # compiled runs and runs with allocator retries are neither fitted nor held out (MeasuredRun.modelled)
    ok = [r for r in runs if r.modelled]
    fit_ids = set(fit_run_ids) if fit_run_ids is not None else {r.run_id for r in ok if r.kernels is not None}
    if not fit_ids:
        fit_ids = {r.run_id for r in ok}
    fit = [r for r in ok if r.run_id in fit_ids]
    cc = compute_mod.calibrate(fit)
    util = {}
    for r in ok:
        if r.kernels is not None and r.run_id in fit_ids:
            util[r.run_id] = min(1.0, r.kernels.busy_s / r.step_time_s)
        else:
            util[r.run_id] = 1.0 - cc.gap_fraction
    pc = None
    try:
        tdp = _tdp_of(cc.gpu, root)
        pc = power_mod.load(cc.gpu, root)
    except (ValueError, FileNotFoundError, UnknownDeviceError):  # no cluster, power run or catalog entry
        tdp = None
    held, power_held = [], []
    for r in ok:
        if r.spec.world_size != 1:
            continue
        if pc is not None and r.mean_power_w:  # every run is held out from the power fit (duty cycles)
            p = pc.power_w(util[r.run_id], cap_w=tdp)
            power_held.append(
                {
                    "run_id": r.run_id,
                    "what": _describe(r.spec),
                    "u_compute": util[r.run_id],
                    "measured_power_w": r.mean_power_w,
                    "predicted_power_w": p,
                    "power_error": p / r.mean_power_w - 1.0,
                }
            )
        if r.run_id in fit_ids:
            continue
        pred = compute_mod.single_gpu_step(r.spec, cc)
        row = {
            "run_id": r.run_id,
            "what": _describe(r.spec),
            "measured_step_s": r.step_time_s,
            "predicted_step_s": pred,
            "step_error": pred / r.step_time_s - 1.0,
            "measured_power_w": r.mean_power_w,
            "predicted_power_w": None,
            "power_error": None,
        }
        if pc is not None and r.mean_power_w:
            p = pc.power_w(util[r.run_id], cap_w=tdp)
            row.update(predicted_power_w=p, power_error=p / r.mean_power_w - 1.0)
        held.append(row)
    if held:
        err = max(MIN_COMPUTE_ERROR, max(abs(h["step_error"]) for h in held))
        src = f"measured: largest held-out step-time error over {len(held)} runs"
    else:
        err, src = DEFAULT_COMPUTE_ERROR, "assumed: no run held out"
    step_cv, step_cv_source = straggler_mod.step_spread(ok)
    gemm = gemm_rates.read_gemm_rates(raw_dirs, root)
    if gemm is not None and gemm.gpu != cc.gpu:
        raise ValueError(
            f"the matrix-product runs of the calibration ran on {gemm.gpu}, its training runs on {cc.gpu}: "
            "shape factors need both on one GPU kind"
        )
    return Calibration(
        cc,
        pc,
        err,
        src,
        tuple(sorted(fit_ids)),
        held,
        runs,
        digest(runs) + (f"+gemm.{gemm.digest}" if gemm else ""),
        power_held,
        step_cv,
        step_cv_source,
        gemm,
    )


@lru_cache(maxsize=8)
def _cached(raw_dirs: tuple[str, ...], root: str) -> Calibration:
    return calibrate(list(raw_dirs), root)


def cached_calibration(raw_dirs, root: Path | str = ".") -> Calibration:
    if isinstance(raw_dirs, (str, Path)):
        raw_dirs = [raw_dirs]
    return _cached(tuple(str(d) for d in raw_dirs), str(Path(root).resolve()))


def _describe(spec: RunSpec) -> str:
    cfg = spec.model_config()
    layers = f"{cfg.n_layers}-layer slice of " if spec.n_layers else ""
    ac = "full activation checkpointing" if spec.activation_checkpointing == "full" else "no activation checkpointing"
    return f"{layers}{spec.model}, micro batch {spec.micro_batch}, seq {spec.seq_len}, {ac}"


# ---- prediction ----------------------------------------------------------------------------
@dataclass
class Prediction:
    run_id: str
    config_id: str
    cluster: str
    layout: str
    world_size: int
    label: str  # the strategy in words (scalestudy.spec.studies.strategy_label)
    spec: dict
    values: dict  # METRICS plus bubble_s, memory estimate
    band: dict  # metric -> [low, high]
    corners: dict  # metric -> [value at each CORNERS entry]
    collectives: list[dict]
    compute: dict
    sources: dict
    notes: list[str] = field(default_factory=list)

    def __getitem__(self, k):
        return self.values[k]

    def as_dict(self) -> dict:
        return asdict(self)


def _scales(cluster, cal: Calibration, corner: tuple[int, ...] | None, options: ModelOptions = ModelOptions()) -> dict:
    u = lambda k: cluster.v(f"uncertainty.{k}")  # noqa: E731
    c = dict(zip(AXES, corner)) if corner else dict.fromkeys(AXES, 0)
    kappa = float(options.overlap_slowdown)  # the cluster files' overlap.interference is no longer read
    return {
        "compute": 1.0 + c["compute"] * cal.compute_error,
        "coll": Scales(
            latency=1.0 + c["latency"] * u("ring_latency"),
            intra_bw=1.0 / (1.0 + c["intra_bw"] * u("intra_bandwidth")),
            inter_bw=1.0 / (1.0 + c["inter_bw"] * u("inter_bandwidth")),
        ),
        "interference": kappa * (1.0 + c["interference"] * u("interference")),
        "comm_power": cluster.v("power.hbm_bytes_per_bus_byte") * (1.0 + c["comm_power"] * u("comm_power")),
        "comm_scale": 1.0 + c["comm_power"] * u("comm_power"),
    }


def design_power_w(cluster) -> float:
    """The board power the cluster's GPU's clocks are designed for: the cluster's design_power_w
    (a part shipped with a lower limit than its silicon's), else the GPU kind's catalog power cap;
    never below the cluster's limit (tdp_w). A what-if on tdp_w alone thus lowers the limit of the
    same silicon."""
    cap = cluster.v("tdp_w")
    if "design_power_w" in cluster.values:
        design = cluster.v("design_power_w")
    else:
        try:
            design = catalog.gpu(cluster.gpu).power_cap_w or cap
        except UnknownDeviceError:
            design = cap
    return max(design, cap)


def clock_ratio(cluster, cal: Calibration) -> float:
    """Matrix-product rate on the cluster's GPU relative to the calibration GPU's, both held to their
    board limits (power-limit throttling, perfmodel/power.py); 1 without a power model."""
    if cal.power is None:
        return 1.0
    return cal.power.clock_ratio(cluster.v("tdp_w"), design_power_w(cluster))


def tensor_carry(cluster, cal: Calibration, dtype: str) -> achievable.TensorCarry:
    """The calibration GPU's tensor-core efficiencies carried to the cluster's GPU by their measured
    achievable matmul rates (perfmodel/achievable.py); a factor of 1 where either is unknown."""
    return achievable.tensor_carry(cluster.gpu, cal.compute.gpu, dtype)


def kernel_carry(
    cluster, cal: Calibration, dtype: str, options: ModelOptions = ModelOptions()
) -> achievable.KernelCarry:
    """The calibration's efficiencies carried to the cluster's GPU kernel class by kernel class
    (perfmodel/achievable.py KernelCarry): matrix products by the achievable-matmul ratio and the
    power-limit clock, attention by its kernel's published rate (the cluster's attention_kernel) or as
    the matrix products, times options.attention_carry, memory-bound work at the
    calibrated fractions of the cluster's HBM bandwidth."""
    return achievable.kernel_carry(
        cluster.gpu,
        cal.compute.gpu,
        dtype,
        clock_ratio(cluster, cal),
        float(options.attention_carry),
        cluster.hbm,
        cal.compute.hbm_bytes_per_s,
        cluster.attention_kernel,
    )


def _with_compute(sc: dict, factor: float) -> dict:
    return {**sc, "compute": sc["compute"] * factor}


def shape_factor_of(spec: RunSpec, cluster, cal: Calibration) -> "gemm_rates.ShapeFactor | None":
    """The measured shape factor of `spec`'s products (perfmodel/gemm_rates.py), where the calibration
    timed its layout and the cluster's GPU has achievable rates in the spec's precision and in bf16 to
    carry it with; None otherwise (the best-shape carry applies)."""
    dtype = spec.precision if spec.precision in compute_mod.LOW_PRECISION else "bf16"
    sf = gemm_rates.shape_factor(cal.gemm, run_layout(spec), dtype, cal.fit_layouts)
    if (
        sf is None
        or achievable.tensor_carry(cluster.gpu, cal.compute.gpu, dtype).missing
        or achievable.tensor_carry(cluster.gpu, cal.compute.gpu, "bf16").missing
    ):
        return None
    return sf


def matmul_rates(spec: RunSpec, cluster, cal: Calibration, carry: achievable.KernelCarry) -> tuple[float, float]:
    """(layers' products, output layer's) rates that eta_matmul is a fraction of: the measured shape
    factors carried to the cluster's GPU by its achievable fraction of peak in each precision over the
    calibration GPU's, x the power-limit clock ratio; else the best-shape carry (KernelCarry)."""
    sf = shape_factor_of(spec, cluster, cal)
    if sf is None:
        return cluster.peak_flops * carry.layer_matmul, cluster.peak_flops * carry.matmul
    dtype = spec.precision if spec.precision in compute_mod.LOW_PRECISION else "bf16"
    gpu = achievable.tensor_carry(cluster.gpu, cal.compute.gpu, dtype).factor * carry.clock_ratio
    gpu_bf16 = carry.tensor.factor * carry.clock_ratio
    return cluster.peak_flops * sf.layer * gpu, cluster.peak_flops * sf.head * gpu_bf16


def _compute_times(
    spec: RunSpec,
    cluster,
    cal: Calibration,
    options: ModelOptions,
    scale: float = 1.0,
    carry: achievable.KernelCarry | None = None,
    hbm: float | None = None,
) -> compute_mod.ComputeTimes:
    """`carry`: kernel_carry(...) of this cluster, calibration, precision and options, where the
    caller has it already; `hbm`: in place of the cluster's HBM bandwidth (math.inf: the clock-bound
    kernels alone)."""
    zero1 = options.distributed_optimizer and spec.dp_shard == 1 and spec.dp_replicate > 1
    carry = carry or kernel_carry(cluster, cal, spec.precision, options)
    layers, head = matmul_rates(spec, cluster, cal, carry)
    return compute_mod.compute_times(
        spec,
        cal.compute,
        head,
        cluster.hbm if hbm is None else hbm,
        scale,
        options.tp_loss == "vocab_parallel",
        options.recompute_fractions(spec.model_config()),
        spec.dp_replicate if zero1 else None,
        options.passes(),
        attention_flops=cluster.peak_flops * carry.attention,
        layer_matmul_flops=layers,
    )


def clock_bound_share(spec: RunSpec, cluster, cal: Calibration, options: ModelOptions = ModelOptions()) -> float:
    """The share of a step's kernel time that the board's clock sets: matrix products and attention
    (memory-bound work is not throttled, perfmodel/power.py)."""
    all_s = _compute_times(spec, cluster, cal, options).kernels_s
    return _compute_times(spec, cluster, cal, options, hbm=math.inf).kernels_s / all_s if all_s > 0 else 0.0


def burst_speedup(vals: dict, share: float, cluster, cal: Calibration) -> float:
    """The factor on a step's computation for bursts shorter than the power limiter's window: the
    clock-bound share runs burst_speed times faster (perfmodel/power.py: the bursts' full-clock
    share, within the window and the cap's average); 1 for back-to-back computation (no exposed
    wait) or without a power model."""
    if cal.power is None or not vals.get("compute_burst_s") or vals.get("full_clock_share") is None:
        return 1.0
    g = cal.power.burst_speed(vals["full_clock_share"], cluster.v("tdp_w"), design_power_w(cluster))
    return 1.0 - share * (1.0 - 1.0 / g)


def _evaluate(
    spec: RunSpec, cluster, cal: Calibration, cm: CollectiveModel, sc: dict, options: ModelOptions = ModelOptions()
) -> tuple[dict, list[dict]]:
    zero1 = options.distributed_optimizer and spec.dp_shard == 1 and spec.dp_replicate > 1
    carry = kernel_carry(cluster, cal, spec.precision, options)
    ct = _compute_times(spec, cluster, cal, options, sc["compute"], carry)
    colls = layout_collectives(spec, cluster.nvlink_domain, options)
    m_layer = spec.grad_accum * spec.pp_microbatches  # layer passes a step
    timed = []
    fsdp = {"ag_root": 0.0, "ag_block": 0.0, "ag_bwd_block": 0.0, "rs_root": 0.0, "rs_block": 0.0}
    tp = {"layer_fwd": 0.0, "layer_bwd": 0.0, "head_fwd": 0.0, "head_bwd": 0.0, "embed_fwd": 0.0}
    p2p = {"forward": 0.0, "backward": 0.0}
    cp = {"forward": 0.0, "backward": 0.0}  # context parallelism's exchanges of one layer and micro batch
    p2p_each: dict[str, tuple[float, float]] = {}  # phase -> (one send, sends a micro batch)
    for c in colls:
        if c.op == "send":
            t_each = cm.p2p_time(c.size_bytes, c.group.nodes == 1, sc["coll"])
        else:
            t_each = cm.time(c.op, c.size_bytes, c.group, sc["coll"])
        timed.append({**c.as_dict(), "time_each_s": t_each, "time_per_step_s": t_each * c.calls})
        if c.stream == "fsdp":
            key = {
                ("fsdp_all_gather", "root"): "ag_root",
                ("fsdp_all_gather", "block"): "ag_block",
                ("fsdp_all_gather_bwd", "block"): "ag_bwd_block",
                ("fsdp_reduce_scatter", "root"): "rs_root",
                ("fsdp_reduce_scatter", "block"): "rs_block",
                ("hsdp_all_reduce", "root"): "rs_root",
                ("hsdp_all_reduce", "block"): "rs_block",
                ("zero1_reduce_scatter", "root"): "rs_root",
                ("zero1_reduce_scatter", "block"): "rs_block",
                ("zero1_all_gather", "root"): "ag_root",
                ("zero1_all_gather", "block"): "ag_block",
            }[(c.name, c.unit)]
            fsdp[key] += t_each
        elif c.stream == "cp":
            cp[c.phase] += t_each * c.calls / (m_layer * ct.layers)
        elif c.op == "send":
            p2p[c.phase] += t_each * c.calls / m_layer
            p2p_each[c.phase] = (t_each, c.calls / m_layer)
        elif c.unit == "layer":
            tp["layer_fwd" if c.phase == "forward" else "layer_bwd"] += t_each * c.calls / (m_layer * ct.layers)
        elif c.unit == "head":
            tp["head_fwd" if c.phase == "forward" else "head_bwd"] += t_each * c.calls / m_layer
        elif c.unit == "embedding":
            tp["embed_fwd"] += t_each * c.calls / m_layer
    tail = ct.optimizer_s + ct.fsdp_copy_s
    k = 1.0 / (1.0 - ct.gap_fraction)
    # ring attention hides each exchange behind the attention of the chunk in hand: what exceeds the
    # layer's attention waits, on the critical path as a TP collective does
    p2p_hidden = 0.0
    if options.pp_comm_overlap and spec.pp_schedule == "interleaved_1f1b" and spec.pp > 1:
        # each send overlaps the next model chunk's forward (backward): what exceeds it waits
        v = spec.pp_stages_per_rank
        for phase, chunk in (("forward", ct.microbatch_fwd_s * k / v), ("backward", ct.microbatch_bwd_s * k / v)):
            t_each, n = p2p_each.get(phase, (0.0, 0.0))
            p2p[phase] = n * max(0.0, t_each - chunk)
            p2p_hidden += n * min(t_each, chunk) * m_layer
    cp_hidden = 0.0
    for phase, key, attn in (("forward", "layer_fwd", ct.attn_fwd_s), ("backward", "layer_bwd", ct.attn_bwd_s)):
        tp[key] += max(0.0, cp[phase] - attn * k)
        cp_hidden += min(cp[phase], attn * k) * ct.layers * m_layer
    tp_hidden = 0.0  # TP communication hidden behind the layer's matrix products (tp_comm_overlap)
    if options.tp_comm_overlap:
        for key, comp in (("layer_fwd", ct.layer_fwd_s * k), ("layer_bwd", ct.layer_bwd_s * k)):
            hidden = min(tp[key], comp)
            tp[key] -= hidden
            tp_hidden += hidden * ct.layers * m_layer
    base = dict(
        layers=ct.layers,
        layer_fwd_s=ct.layer_fwd_s,
        layer_bwd_s=ct.layer_bwd_s,
        head_fwd_s=ct.head_fwd_s,
        head_bwd_s=ct.head_bwd_s,
        embed_s=0.0,
        gap_fraction=ct.gap_fraction,
        tp_layer_fwd_s=tp["layer_fwd"],
        tp_layer_bwd_s=tp["layer_bwd"],
        tp_head_fwd_s=tp["head_fwd"],
        tp_head_bwd_s=tp["head_bwd"],
        tp_embed_fwd_s=tp["embed_fwd"],
        ag_root_s=fsdp["ag_root"],
        ag_block_s=fsdp["ag_block"],
        ag_bwd_block_s=fsdp["ag_bwd_block"],
        rs_root_s=fsdp["rs_root"],
        rs_block_s=fsdp["rs_block"],
        forward_prefetch=spec.fsdp_forward_prefetch,
        backward_prefetch=spec.fsdp_backward_prefetch,
        interference=sc["interference"],
        ag_once=zero1,
    )
    bubble = 0.0
    if spec.pp == 1:  # the overlap slowdown stretches computation inside the timeline (overlap.py)
        tl = simulate(StepInputs(microbatches=spec.grad_accum, tail_s=tail, **base))
        step, compute_s, comm_s, exposed = tl.step_s, tl.compute_s, tl.comm_s, tl.exposed_comm_s
        slowdown_s, bursts = tl.slowdown_s, tl.compute_bursts
        dp_wait = tl.waits_s
    else:  # the pipeline is a formula, not a timeline: the slowdown is added (s x overlapped), not absorbed
        base = {**base, "interference": 0.0}
        one = simulate(StepInputs(microbatches=1, tail_s=0.0, **base))
        mb_compute = (ct.microbatch_fwd_s + ct.microbatch_bwd_s) * k
        mb_sync = (
            ct.layers * (tp["layer_fwd"] + tp["layer_bwd"])
            + tp["head_fwd"]
            + tp["head_bwd"]
            + tp["embed_fwd"]
            + p2p["forward"]
            + p2p["backward"]
        )
        per_fwd = (
            ct.microbatch_fwd_s * k + ct.layers * tp["layer_fwd"] + tp["head_fwd"] + tp["embed_fwd"] + p2p["forward"]
        )
        per_bwd = ct.microbatch_bwd_s * k + ct.layers * tp["layer_bwd"] + tp["head_bwd"] + p2p["backward"]
        pipe, bubble = pipeline_time(
            per_fwd,
            per_bwd,
            spec.pp,
            spec.pp_microbatches,
            spec.pp_stages_per_rank,
            spec.pp_schedule == "interleaved_1f1b",
        )
        slow = sc["interference"] * one.overlapped_s
        fsdp_wait = one.waits_s
        v = spec.pp_stages_per_rank if spec.pp_schedule == "interleaved_1f1b" else 1
        if options.overlap_dp_chunks and v > 1:
            fsdp_wait, overlapped = _chunked_dp_wait(
                base, ct.layers // v, v, min(spec.pp, spec.pp_microbatches), per_fwd / v, per_bwd / v
            )
            slow = sc["interference"] * overlapped
        slowdown_s = spec.grad_accum * slow
        step = spec.grad_accum * (pipe + fsdp_wait + slow) + tail * k
        compute_s = spec.grad_accum * (spec.pp_microbatches * mb_compute + slow) + tail * k
        fsdp_comm = sum(t["time_per_step_s"] for t in timed if t["stream"] == "fsdp")
        comm_s = fsdp_comm + spec.grad_accum * spec.pp_microbatches * mb_sync
        exposed = spec.grad_accum * (spec.pp_microbatches * mb_sync + bubble + fsdp_wait)
        dp_wait = spec.grad_accum * fsdp_wait
        bursts = spec.grad_accum * spec.pp_microbatches * one.compute_bursts  # each micro batch as one alone
    # computation under the TP, context-parallel and pipeline exchanges it hides runs slower by the same
    # overlap slowdown as under FSDP's collectives (the source measured TP and FSDP inside a node), added
    hidden_sync = tp_hidden + cp_hidden + p2p_hidden
    slow_sync = sc["interference"] * hidden_sync
    step += slow_sync
    compute_s += slow_sync
    slowdown_s += slow_sync
    comm_s += hidden_sync
    tokens = spec.tokens_per_step
    tps = tokens / step
    per_dev = tps / spec.world_size
    fpt = flops_per_token(spec.model_config(), spec.seq_len)["flops_per_token"]
    vals = {
        "step_time_s": step,
        "tokens_per_s": tps,
        "tokens_per_s_per_device": per_dev,
        "mfu": per_dev * fpt / cluster.peak_flops,
        "compute_s": compute_s,
        "comm_s": comm_s,
        "clock_ratio": carry.clock_ratio,
        "tensor_carry": carry.tensor.factor,
        "attention_carry": carry.attention,
        "exposed_comm_s": exposed,
        "exposed_comm_share": exposed / step,
        "bubble_s": bubble * spec.grad_accum,
        "overlap_slowdown": sc["interference"],
        "overlap_slowdown_s": slowdown_s,
        "tail_s": tail * k,
        "dp_wait_s": dp_wait,  # the optimizer and copies after the last pass; DP waits
        "u_compute": min(1.0, compute_s / step),
        "u_exposed": min(1.0, exposed / step),
        "compute_burst_s": compute_s / bursts if exposed > 0 else None,
    }  # None: back to back
    if cal.power is not None:
        coll_s = sum(t["time_per_step_s"] for t in timed if t["op"] != "send")
        bus_rate = (
            sum(
                busbw_factor(t["op"], t["group"]["n"]) * t["size_bytes"] * t["calls"]
                for t in timed
                if t["op"] != "send" and t["group"]["n"] > 1
            )
            / coll_s
            if coll_s > 0
            else 0.0
        )
        vals["comm_hbm_fraction"] = min(1.0, sc["comm_power"] * bus_rate / cluster.hbm)
        vals["comm_gbps"] = bus_rate / 1e9
        period = dict(
            cap_w=cluster.v("tdp_w"),
            u_comm=vals["u_exposed"],
            comm_hbm_fraction=vals["comm_hbm_fraction"],
            design_w=design_power_w(cluster),
            comm_gbps=vals["comm_gbps"],
            comm_blocks=_channels(cluster),
            comm_scale=sc["comm_scale"],
            burst_s=vals["compute_burst_s"] or math.inf,
        )
        p = cal.power.power_w(vals["u_compute"], **period)
        vals.update(
            power_w_per_gpu=p,
            power_w_total=p * spec.world_size,
            tokens_per_joule=tps / (p * spec.world_size),
            full_clock_share=cal.power.burst_full_clock_share(vals["u_compute"], **period),
        )
    else:
        vals.update(power_w_per_gpu=None, power_w_total=None, tokens_per_joule=None, full_clock_share=None)
    return vals, timed


def _channels(cluster) -> float:
    """NCCL's channels of a collective (collectives.channels; 16 where the cluster does not say)."""
    return cluster.values["collectives.channels"].value if "collectives.channels" in cluster.values else 16.0


def _chunked_dp_wait(
    base: dict, chunk_layers: int, chunks: int, round_mbs: int, chunk_fwd_s: float, chunk_bwd_s: float
) -> tuple[float, float]:
    """(exposed, overlapped) data-parallel collectives of one pipeline pass when each of a rank's
    `chunks` model chunks gathers and reduces on its own (options.overlap_dp_chunks,
    perfmodel/overlap.py): the edges from one chunk's timeline, the backlog from chunked_exposure
    with rounds of `round_mbs` micro batches of one chunk."""
    edge = simulate(StepInputs(microbatches=1, tail_s=0.0, **{**base, "layers": chunk_layers}))
    ag = base["ag_block_s"] * chunk_layers
    rs = base["rs_block_s"] * chunk_layers
    exposed = chunked_exposure(edge.waits_s, ag, round_mbs * chunk_fwd_s, chunks) + chunked_exposure(
        0.0, rs, round_mbs * chunk_bwd_s, chunks
    )
    total = chunks * (ag + rs) + base["ag_root_s"] + base["rs_root_s"]
    return exposed, max(0.0, total - exposed)


def sources(
    cluster, cal: Calibration, cm: CollectiveModel, dtype: str = "bf16", options: ModelOptions = ModelOptions()
) -> dict:
    vals = cluster.sources()
    by: dict[str, list[str]] = {}
    for k, v in vals.items():
        by.setdefault(v["source"].split(":")[0].strip(), []).append(k)
    return {
        "calibrated_from_measurements": {
            "compute": f"{cal.compute.method} of runs {', '.join(cal.compute.run_ids)} on {cal.compute.gpu}",
            "compute_error": f"{cal.compute_error:.4f} ({cal.compute_error_source})",
            "power": (
                f"{cal.power.source}: fit RMS {cal.power.rel_rms:.1%}, worst {cal.power.rel_max:.1%} over "
                f"{cal.power.n_phases} phases"
                + (
                    f", products in bursts shorter than the limiter's window ({1e3 * cal.power.limiter_tau_s:.0f} ms) "
                    f"at full clock ({cal.power.compute_w:.0f} W)"
                    if cal.power.limiter_tau_s
                    else ""
                )
                + "; carried to other GPUs as fractions of the "
                f"{cal.power.cap_w:g} W board limit [assumed]"
            )
            if cal.power
            else None,
            "communication_power": (
                f"{cal.power.comm.source}: above the idle board {cal.power.comm.const_w:.1f} W + "
                f"{cal.power.comm.per_block_w:.3f} W a channel + {cal.power.comm.per_gbps_w:.3f} W per GB/s reduced "
                f"(fit RMS {cal.power.comm.rel_rms:.1%} over {cal.power.comm.n_phases} phases), added to a gap's "
                "power while only communication runs; NIC and NVSwitch power not included"
            )
            if cal.power and cal.power.comm
            else "assumed: an exposed collective draws a warm gap's power plus its HBM traffic's share of the copy power",
            "power_limit_throttling": (
                f"matrix products at {clock_ratio(cluster, cal):.3f} x the calibrated rate: clock under the "
                f"{cluster.v('tdp_w'):g} W limit (design power {design_power_w(cluster):g} W) over the measured "
                f"GPU's under its {cal.power.cap_w:g} W, from the duty-cycle fit and P_dynamic ~ clock^"
                f"{power_mod.DVFS_EXPONENT:g} [published: Le Sueur and Heiser, HotPower 2010]"
            )
            if cal.power
            else None,
            "burst_speedup": (
                f"clock-bound work (matrix products, attention) in bursts of computation shorter than the limiter's "
                f"window ({1e3 * cal.power.limiter_tau_s:.0f} ms) runs at full clock, up to "
                f"{1 / cal.power.clock_factor(cluster.v('tdp_w'), design_power_w(cluster)):.3f} x the calibrated rate "
                "(measured at the limit); the prediction value burst_speedup is the factor on its computation "
                "(checked on an H100: data/burst-rate)"
                if options.burst_speedup
                else "off (option burst_speedup: false): computation at the calibrated rate whatever its bursts"
            )
            if cal.power and cal.power.limiter_tau_s
            else None,
            "tensor_core_carry": tensor_carry(
                cluster, cal, achievable.CALIBRATION_DTYPE if dtype in compute_mod.LOW_PRECISION else dtype
            ).describe(),
            "kernel_class_carry": kernel_carry(cluster, cal, dtype, options).describe(),
        },
        "overlap_slowdown": (
            f"computation overlapping an FSDP collective runs {1 + float(options.overlap_slowdown):.3f} x slower for "
            "the overlapped part, inside the step's timeline (exposed communication is what exceeds the stretched "
            "computation; the stretch drawn at compute power); option overlap_slowdown, default 0.189: the average "
            "computational slowdown measured by Lee et al., arXiv 2507.03114 (4-GPU A100/H100/MI250/MI210 nodes, "
            "intra-node; across nodes less memory traffic contends) [published, carried beyond its setting]; "
            "prediction value overlap_slowdown_s is the extra time a step"
            + ("" if options.overlap_slowdown else " (off)")
        ),
        "collectives": cm.sources()["rules"],
        "published": ["inter-node all-reduce: " + (cm.panel.source if cm.panel else "none")],
        "cluster_values_by_source": {k: sorted(v) for k, v in sorted(by.items())},
        "assumed_model_choices": [
            "efficiencies measured on one GPU's shapes carry over to other shapes, micro batches and layouts, and to "
            "other GPUs as fractions of their datasheet peak and HBM bandwidth; the tensor-core ones (matrix products, "
            "attention) by the ratio of measured achievable matmul rates where the catalog has both (achievable.py)",
            "FSDP all-gather/reduce-scatter across nodes: ring; network hop latency from the panel's tree fit, "
            "bus bandwidth from the published H100 node-count fit (NVIDIA/nccl #1229) scaled by the rails",
            "pipeline sends are not overlapped (synchronous); tensor-parallel collectives as options.tp_comm_overlap says",
        ],
        "cluster_file": cluster.source_file,
        "cluster_overrides": dict(cluster.overrides),
    }


BURST_ITERATIONS = 20


def predict(
    spec: RunSpec,
    cluster,
    cal: Calibration,
    cm: CollectiveModel | None = None,
    *,
    band: bool = True,
    options: ModelOptions = ModelOptions(),
    shares: dict | None = None,
) -> Prediction:
    """`shares`: measured rank shares by perfmodel.rank_shares.share_key (their compute and memory
    replace the model's where one matches this spec on this cluster's GPU kind)."""
    if spec.world_size > cluster.max_gpus:
        raise ValueError(f"{spec.run_id} needs {spec.world_size} GPUs; cluster {cluster.name} has {cluster.max_gpus}")
    if spec.procs_per_node != cluster.gpus_per_node and spec.nodes > 1:
        raise ValueError(
            f"{spec.run_id} runs {spec.procs_per_node} processes a node; cluster {cluster.name} has "
            f"{cluster.gpus_per_node} GPUs a node"
        )
    cm = cm or CollectiveModel.for_cluster(cluster)
    central = _scales(cluster, cal, None, options)
    vals, timed = _evaluate(spec, cluster, cal, cm, central, options)
    share = (shares or {}).get(rank_shares.share_key(spec, cluster.gpu))
    carry = share_carry(spec, cluster, cal, share, options)
    # a share ran without real collectives: it is met by the computation without the overlap slowdown
    factor = rank_shares.compute_factor(share, (vals["compute_s"] - vals["overlap_slowdown_s"]) / carry)
    slowest = cal.straggler(options)
    wait = slowest.factor(spec.world_size) if slowest else 1.0
    mean_compute_s = vals["compute_s"] * factor  # one rank's mean: the measured share where there is one
    factor *= wait  # the slowest of the W ranks (perfmodel/straggler.py), after the share
    if factor != 1.0:
        vals, timed = _evaluate(spec, cluster, cal, cm, _with_compute(central, factor), options)
    speed = 1.0  # bursts shorter than the limiter's window run faster, and a faster burst is shorter: to a fixed point
    if options.burst_speedup and vals.get("compute_burst_s"):
        clock_share = clock_bound_share(spec, cluster, cal, options)
        for _ in range(BURST_ITERATIONS):
            new = burst_speedup(vals, clock_share, cluster, cal)
            if abs(new - speed) < 1e-6:
                break
            speed = new
            vals, timed = _evaluate(spec, cluster, cal, cm, _with_compute(central, factor * speed), options)
        factor *= speed
    vals["burst_speedup"] = speed
    vals["straggler_factor"] = wait
    vals["straggler_s"] = vals["compute_s"] - mean_compute_s * speed  # waiting for the slowest rank, a step
    mem = memory_bytes(spec, options)
    vals["memory_estimate_gib"] = mem / GIB
    vals["fits_memory"] = mem <= cluster.v("memory_gib") * GIB
    corners: dict[str, list] = {m: [] for m in METRICS}
    bands: dict[str, list] = {}
    if band:
        for corner in CORNERS:
            cv, _ = _evaluate(
                spec, cluster, cal, cm, _with_compute(_scales(cluster, cal, corner, options), factor), options
            )
            for m in METRICS:
                corners[m].append(cv.get(m))
        for m in METRICS:
            xs = [x for x in corners[m] + [vals.get(m)] if x is not None]
            bands[m] = [min(xs), max(xs)] if xs else [None, None]
    notes = []
    if share is not None and share.caveat and share.status in ("ok", "oom"):  # taken, known artefact and all
        notes.append(share.caveat_note())
    rank_shares.apply_memory(vals, notes, share)
    if not vals["fits_memory"] and share is None:
        notes.append(
            f"the memory estimate ({vals['memory_estimate_gib']:.0f} GiB) exceeds the GPU's "
            f"{cluster.v('memory_gib'):g} GiB: the run would likely fail with oom"
        )
    cfg = spec.model_config()
    measured_shapes = {(r.spec.model_config().dim, r.spec.model_config().ffn_dim) for r in cal.runs if r.ok}
    carried = tensor_carry(
        cluster, cal, achievable.CALIBRATION_DTYPE if spec.precision in compute_mod.LOW_PRECISION else spec.precision
    )
    shapes = shape_factor_of(spec, cluster, cal)
    if shapes is not None:
        notes.append(f"matrix products at measured shapes ({cal.gemm.describe()}): {shapes.describe()}")
    elif cal.gemm is not None:
        notes.append(
            f"the products of {run_layout(spec)} were not timed in {spec.precision} with the calibration's "
            "(or the GPU lacks an achievable rate to carry them): the best-shape carry applies"
        )
    if carried.missing:
        notes.append(
            f"no measured achievable {spec.precision} matmul rate for {' or '.join(carried.missing)}: "
            f"the calibration's tensor-core efficiencies are carried to {cluster.gpu} unchanged"
        )
    if (cfg.dim, cfg.ffn_dim) not in measured_shapes:
        notes.append(
            f"{spec.model}'s layer shape was not measured: its efficiencies are extrapolated from "
            + ", ".join(sorted({r.spec.model for r in cal.runs if r.ok}))
        )
    return Prediction(
        run_id=spec.run_id,
        config_id=spec.config_id,
        cluster=cluster.name,
        layout=spec.layout,
        world_size=spec.world_size,
        label=strategy_label(spec),
        spec=spec.to_dict(),
        values=vals,
        band=bands,
        corners=corners,
        collectives=timed,
        compute=asdict(_compute_times(spec, cluster, cal, options)),
        sources={
            **sources(cluster, cal, cm, spec.precision, options),
            "options": options.as_dict(),
            "straggler": (
                slowest.describe(spec.world_size)
                if slowest
                else "off (option straggler: false): one rank's mean computation"
            ),
            "inputs_from": rank_shares.inputs_from(
                share, factor, f"runs {', '.join(cal.compute.run_ids)} on {cal.compute.gpu}", carry, cluster.gpu
            ),
            **({"measured_share": {"study": share.study, "run_ids": list(share.run_ids)}} if share is not None else {}),
        },
        notes=notes,
    )


def share_carry(spec: RunSpec, cluster, cal: Calibration, share, options: ModelOptions = ModelOptions()) -> float:
    """A measured rank share's computation carried from the GPU it ran on to the cluster's: the
    model's kernel time of `spec` on the cluster's GPU over that on the share's (calibrated
    efficiencies at each one's dense peak, HBM bandwidth, achievable-rate carry and power-limit clock); 1 without a share
    or where the share ran on the cluster's GPU kind."""
    if share is None or not share.measured_on or share.measured_on == rank_shares_gpu(cluster.gpu):
        return 1.0
    try:
        g = catalog.gpu(share.measured_on)
    except UnknownDeviceError:
        return 1.0
    peak = g.peak_flops_per_s.get(spec.precision) or cal.compute.peak_flops
    ratio = cal.power.clock_ratio(g.power_cap_w) if cal.power is not None else 1.0
    kw = dict(
        vocab_parallel_loss=options.tp_loss == "vocab_parallel",
        recompute=options.recompute_fractions(spec.model_config()),
        passes=options.passes(),
    )
    ratio *= achievable.tensor_carry(share.measured_on, cal.compute.gpu, spec.precision).factor
    # the share's GPU ran the calibration's attention kernel: option attention_carry is the cluster's only
    there = compute_mod.compute_times(spec, cal.compute, peak * ratio, g.memory_bytes_per_s, **kw).kernels_s
    carry = kernel_carry(cluster, cal, spec.precision, options)
    here = compute_mod.compute_times(
        spec,
        cal.compute,
        cluster.peak_flops * carry.matmul,
        cluster.hbm,
        **kw,
        attention_flops=cluster.peak_flops * carry.attention,
    ).kernels_s
    return here / there


def rank_shares_gpu(name: str) -> str:
    return gpu_kind(name)


def memory_bytes(spec: RunSpec, options: ModelOptions = ModelOptions()) -> int:
    """The memory estimate (scalestudy.spec.memory_estimate) with what the options change: the
    vocab-parallel loss keeps a TP rank's slice of the logits (1/tp of them; the estimate holds
    them whole, as the harness's gathered logits); ZeRO-1 where options.distributed_optimizer
    applies (DDP layouts): the fp32 master weights and AdamW's two moments (12 bytes a parameter)
    sharded over the data-parallel group, bf16 parameters and fp32 gradients kept whole
    [Megatron-LM docs/distrib_optimizer.md: 6 + 12/d bytes a parameter with bf16 parameters and fp32
    gradients]; the activations the option `recompute` keeps, where it is set."""
    est = estimate_memory(spec, checkpointing=options.recompute)
    total = est.total_bytes
    if options.distributed_optimizer and spec.dp_shard == 1 and spec.dp_replicate > 1:
        total -= (est.params_bytes + est.optimizer_bytes) * (1.0 - 1.0 / spec.dp_replicate)
    if options.tp_loss == "vocab_parallel" and spec.tp > 1:  # each TP rank holds its slice of the logits
        total -= est.logits_bytes * (1.0 - 1.0 / spec.tp)
    return int(total)


def joint_band(a: Prediction, b: Prediction, metric: str, how: str = "ratio") -> tuple[float, float, float]:
    """(central, low, high) of b/a - 1 ('ratio') or b - a ('difference'), each corner evaluated
    for both predictions together."""

    def f(x, y):
        return y / x - 1.0 if how == "ratio" else y - x

    central = f(a.values[metric], b.values[metric])
    xs = [f(x, y) for x, y in zip(a.corners[metric], b.corners[metric]) if x is not None and y is not None]
    xs.append(central)
    return central, min(xs), max(xs)


MODEL_ID = MODEL_VERSION
