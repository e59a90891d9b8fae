"""An alpha-beta model of NCCL collectives: time = latency(algorithm, ranks, nodes) + bytes / bandwidth.

Conventions follow nccl-tests (scalestudy.measure.bandwidth): a collective of `size_bytes` (the all-reduce
buffer, the all-gather output, the reduce-scatter input) over n ranks moves busbw_factor(op, n) x
size_bytes through each rank's busiest link, so its time is

    t = latency + busbw_factor(op, n) * size_bytes / bus_bandwidth.

Algorithms (NCCL's, for the sizes FSDP and TP issue):
- ring (all-gather, reduce-scatter; all-reduce inside a node): n-1 steps (2(n-1) for all-reduce),
  each paying a per-step latency that is NVLink's inside a node and the network's where the ring
  crosses nodes; NCCL picks the cheaper of its Simple and LL128 protocols.
- tree (all-reduce across nodes): latency a0 + a1 * log2(nodes).
Bus bandwidth: inside a node, NVLink x an efficiency; across nodes, the NICs of the group's GPUs in
a node (rails) x an efficiency, at most the intra-node figure.

Where the numbers come from, in order of preference:
1. `collective` records of raw logs (a collectives benchmark): `fit_records` fits alpha and the
   bus bandwidth per (op, scope) by least squares on relative error (numpy lstsq);
2. for the inter-node all-reduce: the published panel of the paper's Fig 2 (PUBLISHED_ALL_REDUCE_PANEL,
   source `published panel`); its latency per doubling of nodes, over the two network crossings
   of a tree level, is the one network-hop latency that rings use too (~40.6 us);
3. rings across nodes: the bus bandwidth published for H100 clusters as a function of the node
   count (RING_BUSBW_LOG_FIT, NVIDIA/nccl issue #1229), scaled by the rails;
4. NVLink steps: NCCL's own tuning model (per-step latency), datasheet link rates (cluster file,
   marked assumed).

Channels: NCCL splits a ring collective over its channels (one thread block each), each carrying
its share of every step; the bus bandwidth above is that of all of the communicator's channels
(cluster `collectives.channels`: 16 on the H100 clusters, as NCCL's log in NVIDIA/nccl #1453
shows). For a small message NCCL uses fewer channels: its ring/tree channel tuning removes a
channel while the bytes a rank contributes (count x type size: the shard for all-gather and
reduce-scatter, the buffer for all-reduce) are below channels x threads x threshold
[NCCL src/enqueue.cc, "Ring/Tree channel tuning": while (nBytes < nc*nt*threadThreshold) nc--;
thresholds from src/include/comm.h: NCCL_SIMPLE_THREAD_THRESHOLD 64, NCCL_LL128_THREAD_THRESHOLD 8
bytes a thread; threads NCCL_SIMPLE_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640]: a channel per
32 KiB (Simple) or 5 KiB (LL128) of a rank's message, and the bandwidth in proportion to the
channels used [assumed: every channel carries the same rate]. At 2048 ranks an FSDP block's
all-gather shard is ~200 KB: 6 of 16 channels under Simple, all 16 under LL128 (which the model
then picks).

PAT (NCCL 2.23+): all-gather and reduce-scatter of a communicator with one rank a node may run
as Parallel Aggregated Trees (Simple protocol only), which NCCL's tuning model costs as
base + log2(nodes) x interLat / 3.5 + 2.8 us x ranks and 0.75 x the ring's bus bandwidth
[NCCL src/graph/tuning.cc, ncclTopoTuneModel: "if (a == NCCL_ALGO_PAT) busBw *= .75" and the
PAT latency line]; interLat here is the one network-hop latency. The model takes the cheaper of
ring and PAT, as NCCL's tuner does (FSDP over nodes under TP=8).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from scalestudy.measure.bandwidth import busbw_factor
from scalestudy.measure.rawlog import RawLogError, find_runs, read_run

MIB, GIB = 1 << 20, 1 << 30
# (size_bytes, nodes, all-reduce bus bandwidth GB/s), 8 GPUs a node: nccl-tests all_reduce read off
# a published copy of the paper's Fig 2 (STUDY.md). The 16 GiB values are given as "340 to 360
# for all node counts": 360 is assigned to 4 nodes and 340 to 512 [assumed].
PUBLISHED_ALL_REDUCE_PANEL = (
    (16 * MIB, 4, 115.0),
    (16 * MIB, 512, 40.0),
    (128 * MIB, 4, 255.0),
    (128 * MIB, 512, 165.0),
    (16 * GIB, 4, 360.0),
    (16 * GIB, 512, 340.0),
)
PANEL_GPUS_PER_NODE = 8
PANEL_NIC_GBPS = 50.0  # the NIC a GPU of the cluster the panel was measured on [assumed: 400 Gb/s NDR]
PANEL_SOURCE = (
    "published panel: nccl-tests all_reduce bus bandwidth read off a published copy of the paper's "
    "Fig 2 (STUDY.md), 4 and 512 nodes of 8 GPUs; 16 GiB points read from '340 to 360 GB/s' [assumed]"
)
PROTOCOLS = ("simple", "ll128")
# Ring bus bandwidth across nodes falls with the node count: nccl-tests reduce_scatter on an H100
# cluster (8 GPUs and 8 x 400 Gb/s NICs a node), 360, 345, 320, 300, 280, 260 GB/s at 4, 8, 16, 32, 64,
# 128 nodes (NVIDIA/nccl issue #1229); least squares in log2(nodes): 402.8 - 20.4 x log2(nodes) GB/s.
# NVIDIA/nccl issue #1218 (all_gather, 32 H100 nodes, 16 channels: ~200 GB/s at 2 GB) lies below
# this line: the fit is the optimistic published case. Scaled to another fabric by its rails.
RING_BUSBW_LOG_FIT = (402.8, -20.4)
RING_BUSBW_RAILS_GBPS = 8 * 50.0  # the NICs of a node of that cluster
RING_BUSBW_SOURCE = (
    "published: NVIDIA/nccl issue #1229, nccl-tests reduce_scatter bus bandwidth on H100 "
    "clusters, 4 to 128 nodes; log2 fit 402.8 - 20.4 log2(nodes) GB/s"
)
HOPS_PER_TREE_LEVEL = 2  # a tree all-reduce crosses the network twice a level (reduce up, broadcast down)
# bytes of a rank's message a channel needs before NCCL adds another: threads x bytes a thread
# [NCCL src/include/comm.h thread thresholds x src/include/device.h maximum threads]
CHANNEL_BYTES = {"simple": 512 * 64, "ll128": 640 * 8, "ll": 512 * 8}
# NCCL's own latency model (src/graph/tuning.cc, the same in v2.18.5 to v2.28.3 but for the notes):
# (baseLat, hwLat NVLink, hwLat NET) in us per algorithm and protocol. A ring step inside a node pays
# the NVLink latency, one across nodes the NET latency; a tree all-reduce pays
# base + 2 ((ranks a node - 1) NVLink + log2(nodes) NET) ("2 * ((nRanks/nNodes-1) * intraLat +
# log2i(nNodes) * interLat)"). Tree Simple's NVLink latency is 4.0 (28 in v2.21.5) and its base 8.4 (0
# before v2.26). Checked against published measurements: nccl-tests all_reduce_perf of small
# messages on 2 and 4 nodes of 8 H100s (NVIDIA/nccl-tests issue #309: 24.9 and 34.5 us at 16 B)
# against the tree LL model's 25.2 and 35.2 us; NCCL's own tuner log in NVIDIA/nccl issue #1453
# prints 25.2 us for 16 B on 2 nodes.
NCCL_LATENCY_US = {
    "ring": {"ll": (6.6, 0.6, 2.7), "ll128": (14.0, 1.9, 4.0), "simple": (8.4, 3.4, 14.0)},
    "tree": {"ll": (6.8, 0.6, 5.0), "ll128": (14.0, 1.25, 8.5), "simple": (8.4, 4.0, 14.0)},
}
NCCL_LATENCY_SOURCE = (
    "published: NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc baseLat and hwLat, "
    "v2.18.5-v2.28.3), checked on nccl-tests all_reduce of 16 B at 2 and 4 H100 nodes "
    "(NVIDIA/nccl-tests #309: 24.9 and 34.5 us against the model's 25.2 and 35.2)"
)
# NCCL's bandwidth refinements per algorithm and protocol (tuning.cc, "Various model refinements"): ring
# LL x 1/4 across nodes (1/3 inside one), ring LL128 x 0.92 (0.7 with one rank a node), tree x 0.92,
# tree LL x 1/3.8 of that
NCCL_PROTOCOLS = ("ll", "ll128", "simple")
PAT_BW_FACTOR = 0.75  # [NCCL src/graph/tuning.cc]
PAT_HOP_DIVISOR = 3.5  # log2(nodes) x interLat / 3.5 [NCCL src/graph/tuning.cc]
PAT_US_PER_RANK = 2.8  # "still a linear part" [NCCL src/graph/tuning.cc]


@dataclass(frozen=True)
class Group:
    """A communicator: n ranks over `nodes` nodes, n/nodes ranks in each."""

    n: int
    nodes: int

    @property
    def per_node(self) -> int:
        return max(1, self.n // max(1, self.nodes))

    def as_dict(self) -> dict:
        return {"n": self.n, "nodes": self.nodes, "per_node": self.per_node}


def group_of(size: int, stride: int, gpus_per_node: int) -> Group:
    """The group of `size` ranks spaced `stride` apart (rank = node * gpus_per_node + local)."""
    nodes = len({(i * stride) // gpus_per_node for i in range(size)})
    return Group(size, nodes)


# ---- fits -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fit:
    """t = sum(coef_i * feature_i): latency coefficients in seconds, then seconds per bus byte."""

    op: str
    scope: str  # "intra" | "inter"
    algorithm: str  # "ring" | "tree"
    latency_s: tuple[float, ...]  # ring: (per step,), tree: (a0, a1 per doubling of nodes)
    bus_GBps: float
    rel_rms: float
    rel_max: float
    n_points: int
    source: str
    run_ids: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return asdict(self)


def latency_features(op: str, algorithm: str, group: Group) -> list[float]:
    if algorithm == "tree":
        return [1.0, math.log2(max(group.nodes, 1))]
    steps = group.n - 1
    return [2.0 * steps if op == "all_reduce" else float(steps)]


def fit_points(
    op: str,
    scope: str,
    algorithm: str,
    points: list[tuple[int, Group, float]],
    source: str,
    run_ids: Iterable[str] = (),
) -> Fit:
    """Least-squares fit of latency and bus bandwidth to (size_bytes, group, time_s) points,
    weighted by 1/time (relative error). Needs at least as many distinct points as unknowns."""
    rows, y = [], []
    for size, group, t in points:
        rows.append(latency_features(op, algorithm, group) + [busbw_factor(op, group.n) * size])
        y.append(t)
    a, y = np.asarray(rows, float), np.asarray(y, float)
    if len(y) < a.shape[1]:
        raise ValueError(f"{op} {scope}: {len(y)} points cannot fit {a.shape[1]} parameters")
    w = 1.0 / y
    coef, *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
    if coef[-1] <= 0:
        raise ValueError(
            f"{op} {scope}: the fit gives a non-positive time per byte; the sizes do not span the bandwidth-bound range"
        )
    rel = (a @ coef - y) / y
    return Fit(
        op=op,
        scope=scope,
        algorithm=algorithm,
        latency_s=tuple(float(c) for c in coef[:-1]),
        bus_GBps=float(1.0 / coef[-1] / 1e9),
        rel_rms=float(np.sqrt(np.mean(rel**2))),
        rel_max=float(np.max(np.abs(rel))),
        n_points=int(len(y)),
        source=source,
        run_ids=tuple(sorted(set(run_ids))),
    )


def panel_fit() -> Fit:
    """The inter-node all-reduce (tree) fitted to the published panel."""
    points = []
    for size, nodes, busbw in PUBLISHED_ALL_REDUCE_PANEL:
        g = Group(nodes * PANEL_GPUS_PER_NODE, nodes)
        points.append((size, g, busbw_factor("all_reduce", g.n) * size / (busbw * 1e9)))
    return fit_points("all_reduce", "inter", "tree", points, PANEL_SOURCE)


def collective_records(raw_dirs: Iterable[Path | str]) -> list[dict]:
    """The `collective` records (value plus run_id) of every complete ok run under raw_dirs."""
    out = []
    for raw in raw_dirs:
        for d in find_runs(raw):
            try:
                log = read_run(d)
            except RawLogError:
                continue
            if log.status.get("status") != "ok":
                continue
            for r in log.records:
                if r["key"] == "collective" and r["value"].get("correct", True):
                    out.append({**r["value"], "run_id": log.run_id})
    return out


def fit_records(records: list[dict], min_bytes: int = 0) -> dict[tuple[str, str], Fit]:
    """Fits per (op, scope) from `collective` records (scope intra: one node; inter: several).
    Ring latency per step for all ops inside a node and for all-gather/reduce-scatter across
    nodes; tree for the all-reduce across nodes (when two or more node counts are present)."""
    by: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        if r["size_bytes"] < min_bytes:
            continue
        scope = "intra" if int(r["nodes"]) == 1 else "inter"
        by.setdefault((r["op"], scope), []).append(r)
    fits = {}
    for (op, scope), recs in sorted(by.items()):
        algorithm = "tree" if (op == "all_reduce" and scope == "inter") else "ring"
        points = [
            (int(r["size_bytes"]), Group(int(r["world_size"]), int(r["nodes"])), float(r["time_s"])) for r in recs
        ]
        if algorithm == "tree" and len({p[1].nodes for p in points}) < 2:
            algorithm = "ring"
        try:
            fits[(op, scope)] = fit_points(
                op, scope, algorithm, points, "measured: collective records", (r["run_id"] for r in recs)
            )
        except ValueError:
            continue
    return fits


# ---- the model -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Scales:
    """Multipliers of the uncertainty box (1.0: central)."""

    latency: float = 1.0
    intra_bw: float = 1.0
    inter_bw: float = 1.0


@dataclass
class CollectiveModel:
    cluster: object  # perfmodel.cluster.Cluster
    panel: Fit | None = None
    measured: dict = field(default_factory=dict)  # (op, scope) -> Fit

    @classmethod
    def for_cluster(cls, cluster, root: Path | str = ".") -> "CollectiveModel":
        measured = {}
        if cluster.collectives_fit == "raw":
            measured = fit_records(collective_records(Path(root) / d for d in cluster.raw_dirs))
        return cls(cluster, panel_fit(), measured)

    # ---- parameters ----
    def _c(self, key: str) -> float:
        return self.cluster.v(key)

    def intra_bus_GBps(self, s: Scales = Scales()) -> float:
        return self._c("intra_node_GBps") * self._c("collectives.bus_efficiency_intra") * s.intra_bw

    def net_efficiency(self) -> float:
        """The panel's large-message bus bandwidth over the NICs of its 8 GPUs a node (PANEL_NIC_GBPS
        each): the fraction of the rails' rate NCCL reaches across nodes."""
        return self.panel.bus_GBps / (PANEL_GPUS_PER_NODE * PANEL_NIC_GBPS)

    def inter_bus_GBps(self, group: Group, s: Scales = Scales()) -> float:
        """The tree all-reduce across nodes: the panel's bus bandwidth per rail."""
        rails = group.per_node * self._c("inter_node_GBps") * self.net_efficiency()
        return min(self.intra_bus_GBps(s), rails * s.inter_bw)

    def ring_bus_GBps(self, group: Group, s: Scales = Scales()) -> float:
        """A ring across nodes: the node-count-dependent published fit (RING_BUSBW_LOG_FIT),
        scaled by the group's rails against the cluster it was measured on."""
        a, b = RING_BUSBW_LOG_FIT
        fit = max(a + b * math.log2(max(group.nodes, 2)), 0.1 * a)
        rails = group.per_node * self._c("inter_node_GBps") / RING_BUSBW_RAILS_GBPS
        return min(self.intra_bus_GBps(s), fit * rails * s.inter_bw)

    @property
    def nccl_latency(self) -> bool:
        """Latencies from NCCL's own tuning model (NCCL_LATENCY_US) rather than the panel's tree fit."""
        return getattr(self.cluster, "latency_model", "nccl_tuning") == "nccl_tuning"

    def net_hop_latency_us(self) -> float:
        """One network hop (Simple protocol): NCCL's tuning model's NET latency, or, with the cluster's
        `collectives.latency: published_panel`, the panel's tree fit: its latency per doubling of
        nodes over the two network crossings of a tree level, used by rings and trees alike."""
        scale = self.cluster.values.get("collectives.net_hop_latency_scale")
        hop = (
            NCCL_LATENCY_US["ring"]["simple"][2]
            if self.nccl_latency
            else self.panel.latency_s[1] * 1e6 / HOPS_PER_TREE_LEVEL
        )
        return hop * (scale.value if scale else 1.0)

    def _nccl_latency(self, algorithm: str, proto: str) -> tuple[float, float, float]:
        scale = self.cluster.values.get("collectives.net_hop_latency_scale")
        base, nvl, net = NCCL_LATENCY_US[algorithm][proto]
        return base, nvl, net * (scale.value if scale else 1.0)

    def _nccl_ring_time(self, op: str, size_bytes: float, group: Group, bw: float, s: Scales) -> float:
        """A ring by NCCL's own model: the cheapest of its three protocols, each with its latencies and
        bandwidth refinement, on the channels a message of this size uses."""
        steps = group.n - 1
        inter = group.nodes - 1 if group.nodes > 1 else 0
        if op == "all_reduce":
            steps, inter = 2 * steps, 2 * inter
        best = math.inf
        for proto in NCCL_PROTOCOLS:
            base, nvl, net = self._nccl_latency("ring", proto)
            lat = (base + (steps - inter) * nvl + inter * net) * 1e-6 * s.latency
            f = {
                "simple": 1.0,
                "ll128": 0.92 if group.per_node > 1 else 0.7,
                "ll": 0.25 if group.nodes > 1 or op == "all_reduce" else 1.0 / 3.0,
            }[proto]
            f *= self.channels(op, size_bytes, group, proto) / self._c("collectives.channels")
            best = min(best, lat + busbw_factor(op, group.n) * size_bytes / (bw * f * 1e9))
        return best

    def _nccl_tree_time(self, size_bytes: float, group: Group, s: Scales) -> float:
        """An all-reduce as NCCL's tree across nodes (the cheapest protocol), x NCCL's tree refinement,
        at a bus bandwidth that does not fall with the node count (NCCL's tuning model has no node-count
        term for the tree: channels x per-channel network bandwidth x 0.92): the published ring fit's
        at two nodes, scaled by the group's rails [assumed]."""
        bw = self.ring_bus_GBps(Group(2 * group.per_node, 2), s)
        best = math.inf
        for proto in NCCL_PROTOCOLS:
            base, nvl, net = self._nccl_latency("tree", proto)
            lat = (base + 2 * ((group.per_node - 1) * nvl + math.log2(group.nodes) * net)) * 1e-6 * s.latency
            f = 0.92 / (3.8 if proto == "ll" else 1.0)
            best = min(best, lat + busbw_factor("all_reduce", group.n) * size_bytes / (bw * f * 1e9))
        return best

    def _ring_latency(self, op: str, group: Group, proto: str, s: Scales) -> float:
        k = "collectives.ring_latency_us."
        nvl, net = self._c(f"{k}nvlink_{proto}"), self.net_hop_latency_us()
        steps = group.n - 1
        inter_steps = group.nodes - 1 if group.nodes > 1 else 0
        if op == "all_reduce":
            steps, inter_steps = 2 * steps, 2 * inter_steps
        return (self._c(f"{k}base") + (steps - inter_steps) * nvl + inter_steps * net) * 1e-6 * s.latency

    def channels(self, op: str, size_bytes: float, group: Group, proto: str = "simple") -> int:
        """The channels NCCL runs a ring collective of `size_bytes` (nccl-tests convention) on."""
        most = int(self._c("collectives.channels"))
        per_rank = size_bytes / group.n if op in ("all_gather", "reduce_scatter") else size_bytes
        return max(1, min(most, int(per_rank // CHANNEL_BYTES[proto])))

    def time(self, op: str, size_bytes: float, group: Group, s: Scales = Scales()) -> float:
        """Seconds for one collective of `size_bytes` (nccl-tests convention) over `group`."""
        if group.n <= 1 or size_bytes <= 0:
            return 0.0
        bus_bytes = busbw_factor(op, group.n) * size_bytes
        scope = "intra" if group.nodes == 1 else "inter"
        fit = self.measured.get((op, scope))
        if fit is not None:
            feats = latency_features(op, fit.algorithm, group)
            lat = sum(c * f for c, f in zip(fit.latency_s, feats)) * s.latency
            bw = fit.bus_GBps * (s.intra_bw if scope == "intra" else s.inter_bw)
            return max(lat, 0.0) + bus_bytes / (bw * 1e9)
        if self.nccl_latency:
            bw = self.intra_bus_GBps(s) if scope == "intra" else self.ring_bus_GBps(group, s)
            best = self._nccl_ring_time(op, size_bytes, group, bw, s)
            if scope == "inter" and op == "all_reduce":
                best = min(best, self._nccl_tree_time(size_bytes, group, s))
            if scope == "inter" and op in ("all_gather", "reduce_scatter") and group.per_node == 1:
                best = min(best, self._pat_time(op, size_bytes, group, bw, s))
            return best
        if scope == "inter" and op == "all_reduce":
            a0, a1 = self.panel.latency_s
            hop_scale = self.net_hop_latency_us() / (a1 * 1e6 / HOPS_PER_TREE_LEVEL)
            lat = (a0 + a1 * hop_scale * math.log2(group.nodes)) * s.latency
            return lat + bus_bytes / (self.inter_bus_GBps(group, s) * 1e9)
        bw = self.intra_bus_GBps(s) if scope == "intra" else self.ring_bus_GBps(group, s)
        best = math.inf
        for proto in PROTOCOLS:
            f = 1.0 if proto == "simple" else self._c("collectives.ll128_bw_factor")
            f *= self.channels(op, size_bytes, group, proto) / self._c("collectives.channels")
            best = min(best, self._ring_latency(op, group, proto, s) + bus_bytes / (bw * f * 1e9))
        if scope == "inter" and op in ("all_gather", "reduce_scatter") and group.per_node == 1:
            best = min(best, self._pat_time(op, size_bytes, group, bw, s))
        return best

    def _pat_time(self, op: str, size_bytes: float, group: Group, ring_bw: float, s: Scales) -> float:
        """NCCL's PAT (one rank a node, Simple protocol) by NCCL's own cost model."""
        lat = (
            (
                self._c("collectives.ring_latency_us.base")
                + math.log2(group.nodes) * self.net_hop_latency_us() / PAT_HOP_DIVISOR
                + PAT_US_PER_RANK * group.n
            )
            * 1e-6
            * s.latency
        )
        bw = ring_bw * PAT_BW_FACTOR * self.channels(op, size_bytes, group, "simple") / self._c("collectives.channels")
        return lat + busbw_factor(op, group.n) * size_bytes / (bw * 1e9)

    def busbw_GBps(self, op: str, size_bytes: float, group: Group, s: Scales = Scales()) -> float:
        t = self.time(op, size_bytes, group, s)
        return busbw_factor(op, group.n) * size_bytes / t / 1e9 if t > 0 else math.inf

    def p2p_time(self, size_bytes: float, same_node: bool, s: Scales = Scales()) -> float:
        """One point-to-point send (pipeline stages): one link, NVLink or one NIC."""
        if size_bytes <= 0:
            return 0.0
        if same_node:
            bw = self.intra_bus_GBps(s)
            lat = self._c("collectives.ring_latency_us.nvlink_simple")
        else:
            bw = self._c("inter_node_GBps") * self.net_efficiency() * s.inter_bw
            lat = self.net_hop_latency_us()
        return (self._c("collectives.ring_latency_us.base") + lat) * 1e-6 * s.latency + size_bytes / (bw * 1e9)

    def sources(self) -> dict:
        out = {
            "panel": self.panel.as_dict() if self.panel else None,
            "measured": {f"{op}/{scope}": f.as_dict() for (op, scope), f in sorted(self.measured.items())},
            "latency": (
                NCCL_LATENCY_SOURCE
                if self.nccl_latency
                else f"published panel: network hop {self.net_hop_latency_us():.1f} us from the tree fit to the "
                "paper's Fig 2 (cluster collectives.latency: published_panel)"
            ),
            "rules": {
                "all_reduce/inter": (
                    "measured fit"
                    if ("all_reduce", "inter") in self.measured
                    else "NCCL's tree or ring, the cheaper, with NCCL's latencies and the ring's bus bandwidth"
                    if self.nccl_latency
                    else "tree fitted to the published panel"
                ),
                "all_gather,reduce_scatter/inter": (
                    "measured fit"
                    if any(k[1] == "inter" and k[0] != "all_reduce" for k in self.measured)
                    else "ring: NCCL's latencies per step and protocol (LL, LL128, Simple); bus bandwidth "
                    f"{RING_BUSBW_SOURCE}"
                    if self.nccl_latency
                    else f"ring: network hop latency {self.net_hop_latency_us():.1f} us from the panel's tree fit "
                    f"(per doubling of nodes / {HOPS_PER_TREE_LEVEL} hops), NVLink steps NCCL's [assumed]; "
                    f"bus bandwidth {RING_BUSBW_SOURCE}"
                ),
                "intra": (
                    "measured fit"
                    if any(k[1] == "intra" for k in self.measured)
                    else "ring: NCCL per-step latencies [assumed] + NVLink x efficiency [assumed]"
                ),
            },
        }
        return out
