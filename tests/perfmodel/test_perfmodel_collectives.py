"""The alpha-beta collectives model: fits recover known parameters; group geometry; the panel fit."""

import math
from pathlib import Path

import numpy as np
import pytest

from scalestudy.measure.bandwidth import busbw_factor
from scalestudy.perfmodel import collectives as C
from scalestudy.perfmodel.cluster import load_cluster, with_overrides

REPO = Path(__file__).resolve().parents[2]


def _records(op, nodes_list, per_node, alpha, bus_GBps, tree=None, noise=0.0, seed=0):
    """Synthetic `collective` record values as the benchmark writes them."""
    rng = np.random.default_rng(seed)
    out = []
    for nodes in nodes_list:
        n = nodes * per_node
        g = C.Group(n, nodes)
        for size in [1 << k for k in range(16, 31, 2)]:
            if tree is not None:
                lat = tree[0] + tree[1] * math.log2(nodes)
            else:
                lat = alpha * (2 * (n - 1) if op == "all_reduce" else n - 1)
            t = lat + busbw_factor(op, n) * size / (bus_GBps * 1e9)
            t *= 1 + noise * rng.standard_normal()
            out.append(
                {
                    "op": op,
                    "size_bytes": size,
                    "world_size": g.n,
                    "nodes": nodes,
                    "time_s": t,
                    "run_id": f"synthetic-{op}-{nodes}",
                    "correct": True,
                }
            )
    return out


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_ring_fit_recovers_alpha_and_bandwidth(op):
    recs = _records(op, [1], 8, alpha=4e-6, bus_GBps=300.0) + _records(op, [1], 4, alpha=4e-6, bus_GBps=300.0)
    fit = C.fit_records(recs)[(op, "intra")]
    assert fit.algorithm == "ring"
    assert fit.latency_s[0] == pytest.approx(4e-6, rel=1e-6)
    assert fit.bus_GBps == pytest.approx(300.0, rel=1e-6)
    assert fit.rel_max < 1e-9
    assert fit.source.startswith("measured")
    assert fit.run_ids == ("synthetic-%s-1" % op,)


def test_tree_fit_across_nodes_recovers_parameters_with_noise():
    recs = _records("all_reduce", [2, 4, 16, 64], 8, alpha=None, bus_GBps=350.0, tree=(30e-6, 80e-6), noise=0.02)
    fit = C.fit_records(recs)[("all_reduce", "inter")]
    assert fit.algorithm == "tree"
    a0, a1 = fit.latency_s
    assert a1 == pytest.approx(80e-6, rel=0.15)
    assert fit.bus_GBps == pytest.approx(350.0, rel=0.05)
    assert fit.rel_rms < 0.04


def test_fit_needs_enough_points():
    with pytest.raises(ValueError):
        C.fit_points("all_gather", "intra", "ring", [(1 << 20, C.Group(8, 1), 1e-4)], "x")


def test_published_panel_fit_is_marked_and_close():
    fit = C.panel_fit()
    assert fit.source.startswith("published panel")
    assert fit.n_points == len(C.PUBLISHED_ALL_REDUCE_PANEL)
    assert fit.rel_max < 0.08
    assert 300 < fit.bus_GBps < 380
    cm = C.CollectiveModel.for_cluster(load_cluster("h100-paper-fig2"))
    # the model reproduces the panel's points within the fit's residuals
    for size, nodes, busbw in C.PUBLISHED_ALL_REDUCE_PANEL:
        got = cm.busbw_GBps("all_reduce", size, C.Group(8 * nodes, nodes))
        assert got == pytest.approx(busbw, rel=0.08)
    # all-reduce (tree) holds up with node count better than all-gather (ring), as the paper says
    size = 128 << 20
    ar = [cm.busbw_GBps("all_reduce", size, C.Group(8 * k, k)) for k in (4, 512)]
    ag = [cm.busbw_GBps("all_gather", size, C.Group(8 * k, k)) for k in (4, 512)]
    assert ar[1] / ar[0] > ag[1] / ag[0]


def test_group_geometry():
    assert C.group_of(8, 1, 8) == C.Group(8, 1)
    assert C.group_of(8, 2, 8) == C.Group(8, 2)  # FSDP over 8 with TP=2 inside: two nodes
    assert C.group_of(256, 8, 8) == C.Group(256, 256)  # HSDP replicas: one a node
    assert C.group_of(2048, 1, 8).per_node == 8
    assert C.group_of(1, 1, 8) == C.Group(1, 1)


def test_collective_time_properties():
    cm = C.CollectiveModel.for_cluster(load_cluster("h100-paper"))
    g = C.Group(64, 8)
    assert cm.time("all_gather", 1 << 20, C.Group(1, 1)) == 0.0
    t1, t2 = cm.time("all_gather", 1 << 24, g), cm.time("all_gather", 1 << 28, g)
    assert 0 < t1 < t2
    # more ranks, same message: a ring takes longer
    assert cm.time("all_gather", 1 << 28, C.Group(2048, 256)) > cm.time("all_gather", 1 << 28, C.Group(128, 16))
    # inside a node NVLink; across nodes the NICs (one rail a GPU of the group)
    assert cm.time("all_reduce", 1 << 28, C.Group(8, 1)) < cm.time("all_reduce", 1 << 28, C.Group(16, 16))
    # the uncertainty scales move the time the right way
    s = C.Scales(latency=1.5, inter_bw=0.8)
    assert cm.time("all_gather", 1 << 28, g, s) > cm.time("all_gather", 1 << 28, g)


def test_measured_fit_takes_precedence(tmp_path):
    cm = C.CollectiveModel.for_cluster(load_cluster("h200-node"))
    recs = _records("all_gather", [1], 8, alpha=10e-6, bus_GBps=100.0)
    cm.measured = C.fit_records(recs)
    t = cm.time("all_gather", 1 << 28, C.Group(8, 1))
    assert t == pytest.approx(7 * 10e-6 + busbw_factor("all_gather", 8) * (1 << 28) / 100e9, rel=1e-6)
    assert cm.sources()["rules"]["intra"] == "measured fit"


def test_one_network_hop_latency_for_rings_and_trees():
    """The named alternative (collectives.latency: published_panel): the hop of the Fig 2 tree fit."""
    cm = C.CollectiveModel.for_cluster(load_cluster("h100-paper-fig2"))
    a0, a1 = cm.panel.latency_s
    # the panel's tree: ~81 us a doubling of nodes, two network crossings a level
    assert 75e-6 < a1 < 90e-6 and cm.net_hop_latency_us() == pytest.approx(a1 * 1e6 / 2)
    # a ring over 256 nodes crosses the network 255 times: latency-bound for a per-block gather
    g = C.Group(2048, 256)
    small = cm.time("all_gather", 1 << 20, g)
    assert small > 255 * cm.net_hop_latency_us() * 1e-6
    what_if = C.CollectiveModel.for_cluster(
        with_overrides(load_cluster("h100-paper-fig2"), {"collectives.net_hop_latency_scale": 0.5})
    )
    assert what_if.time("all_gather", 1 << 20, g) < small


def test_ring_bus_bandwidth_falls_with_nodes_as_published():
    cm = C.CollectiveModel.for_cluster(load_cluster("h100-paper"))
    published = {4: 360, 8: 345, 16: 320, 32: 300, 64: 280, 128: 260}  # NVIDIA/nccl #1229, GB/s
    for nodes, busbw in published.items():
        assert cm.ring_bus_GBps(C.Group(8 * nodes, nodes)) == pytest.approx(busbw, rel=0.03)
    # fewer GPUs of a node in the group: fewer rails
    assert cm.ring_bus_GBps(C.Group(2 * 16, 16)) == pytest.approx(cm.ring_bus_GBps(C.Group(8 * 16, 16)) / 4)
    # large messages approach it: a 16 GiB reduce-scatter over 32 nodes
    assert cm.busbw_GBps("reduce_scatter", 16 << 30, C.Group(256, 32)) == pytest.approx(300, rel=0.05)


def test_small_messages_run_on_fewer_channels_as_nccl_tunes_them():
    cm = C.CollectiveModel.for_cluster(load_cluster("h100-paper"))
    g = C.Group(2048, 256)
    assert cm._c("collectives.channels") == 16
    # NCCL drops a channel while a rank's bytes < channels x threads x threshold (Simple 512 x 64)
    shard = 200_000  # an FSDP block's all-gather shard at 2048 ranks
    assert cm.channels("all_gather", shard * 2048, g) == shard // (512 * 64) == 6
    assert cm.channels("all_gather", shard * 2048, g, "ll128") == 16  # 640 x 8 bytes a channel
    assert cm.channels("all_reduce", 100_000, C.Group(16, 2)) == 3  # all-reduce: the whole buffer
    assert cm.channels("all_gather", 1 << 30, g) == 16 and cm.channels("all_gather", 64, g) == 1
    # bandwidth follows the channels: a bandwidth-bound 8-GPU all-gather of 64 KiB shards runs slower
    # per byte than one of 4 MiB shards
    n = C.Group(8, 1)
    assert cm.busbw_GBps("all_gather", 8 * (64 << 10), n) < 0.5 * cm.busbw_GBps("all_gather", 8 * (4 << 20), n)


def test_pat_only_with_one_rank_a_node_and_by_nccls_cost_model():
    cm = C.CollectiveModel.for_cluster(load_cluster("h100-paper-fig2"))
    g = C.Group(256, 256)
    ring_bw = cm.ring_bus_GBps(g)
    pat = cm._pat_time("all_gather", 1 << 20, g, ring_bw, C.Scales())
    lat = (cm._c("collectives.ring_latency_us.base") + 8 * cm.net_hop_latency_us() / 3.5 + 2.8 * 256) * 1e-6
    assert pat == pytest.approx(
        lat
        + busbw_factor("all_gather", 256)
        * (1 << 20)
        / (ring_bw * 0.75 * cm.channels("all_gather", 1 << 20, g) / 16 * 1e9)
    )
    # latency-bound at 256 nodes: PAT's log2 beats 255 network steps of a ring
    assert cm.time("all_gather", 1 << 20, g) == pytest.approx(pat)
    # eight ranks a node: rings only
    g8 = C.Group(2048, 256)
    assert cm.time("all_gather", 1 << 20, g8) > 255 * cm.net_hop_latency_us() * 1e-6


def test_nccl_tuning_latencies_are_the_default_and_meet_the_published_small_all_reduce():
    """NCCL's own latency model (tuning.cc) is every cluster's default; its tree all-reduce of 16 B meets
    nccl-tests on 2 and 4 nodes of 8 H100s (NVIDIA/nccl-tests #309: 24.9 and 34.5 us) within 5%."""
    h100 = load_cluster("h100-paper")
    assert h100.latency_model == "nccl_tuning" and load_cluster("h100-paper-fig2").latency_model == "published_panel"
    cm = C.CollectiveModel.for_cluster(h100)
    assert cm.net_hop_latency_us() == 14.0 and cm.sources()["latency"].startswith("published: NCCL's tuning model")
    for nodes, measured_us in ((2, 24.9), (4, 34.5)):
        assert cm.time("all_reduce", 16, C.Group(8 * nodes, nodes)) * 1e6 == pytest.approx(measured_us, rel=0.05)
    # a small ring across 256 nodes pays NCCL's per-step latencies: LL's 2.7 us a network step, 0.6 an NVLink one
    g = C.Group(2048, 256)
    assert cm.time("all_gather", 2048 * 8, g) * 1e6 == pytest.approx(6.6 + 255 * 2.7 + 1792 * 0.6, rel=0.01)
    # the tree's log2 latency keeps a mid-size all-reduce across many nodes cheaper than an all-gather
    size = 16 << 20
    ar = [cm.busbw_GBps("all_reduce", size, C.Group(8 * k, k)) for k in (4, 512)]
    ag = [cm.busbw_GBps("all_gather", size, C.Group(8 * k, k)) for k in (4, 512)]
    assert ar[1] / ar[0] > ag[1] / ag[0]


def test_a_cluster_file_with_an_unknown_latency_model_is_refused():
    import yaml

    from scalestudy.perfmodel.cluster import ClusterError, cluster_from_dict

    data = yaml.safe_load((REPO / "workflow/clusters/h100-paper.yaml").read_text())
    data["collectives"]["latency"] = "guess"
    with pytest.raises(ClusterError, match="collectives.latency must be one of nccl_tuning, published_panel"):
        cluster_from_dict(data, "h100-paper.yaml")
