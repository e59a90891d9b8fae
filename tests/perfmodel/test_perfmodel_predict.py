"""Predictions: the timeline, monotonicity in GPU count, bands, clusters, what-ifs, the CLI."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scalestudy.perfmodel.cluster import ClusterError, cluster_from_dict, load_cluster, with_overrides
from scalestudy.perfmodel.options import ModelOptions
from scalestudy.perfmodel.overlap import StepInputs, simulate
from scalestudy.perfmodel.predict import burst_speedup, cached_calibration, clock_bound_share, joint_band, predict
from scalestudy.perfmodel.validate import fsdp, hsdp, model_parallel
from scalestudy.spec.run import RunSpec

REPO = Path(__file__).resolve().parents[2]
CAL = "data/h200-reference/raw"


@pytest.fixture(scope="module")
def cal():
    return cached_calibration(CAL, REPO)


@pytest.fixture(scope="module")
def h100():
    return load_cluster("h100-paper", REPO)


def test_clusters_load_with_sources():
    h, a, n = (load_cluster(x, REPO) for x in ("h100-paper", "a100-paper", "h200-node"))
    assert h.max_gpus == 2048 and h.gpus_per_node == 8
    assert h.values["inter_node_GBps"].value == 50 and h.values["inter_node_GBps"].source == "assumed"
    assert a.values["inter_node_GBps"].value == 25 and a.values["inter_node_GBps"].source == "assumed"
    assert h.values["peak_flops_per_s"].source == "datasheet" and a.peak_flops == 312e12
    assert n.hbm == 4.8e12 and n.max_gpus == 8
    assert "inter_node_GBps" in h.assumed()
    w = with_overrides(h, {"inter_node_GBps": 100})
    assert w.v("inter_node_GBps") == 100 and w.values["inter_node_GBps"].source == "what-if"
    with pytest.raises(ClusterError):
        with_overrides(h, {"no_such_value": 1})
    with pytest.raises(ClusterError):
        cluster_from_dict({"name": "x"})


def test_timeline_without_comm_is_compute_over_host_share():
    x = StepInputs(
        layers=4,
        microbatches=2,
        layer_fwd_s=1.0,
        layer_bwd_s=2.0,
        head_fwd_s=0.5,
        head_bwd_s=0.5,
        embed_s=0.0,
        tail_s=1.0,
        gap_fraction=0.2,
    )
    tl = simulate(x)
    assert tl.step_s == pytest.approx((2 * (4 * 3 + 1) + 1) / 0.8)
    assert tl.comm_s == 0 and tl.exposed_comm_s == 0


def test_timeline_hides_small_collectives_and_exposes_large_ones():
    kw = dict(
        layers=8,
        microbatches=1,
        layer_fwd_s=1.0,
        layer_bwd_s=2.0,
        head_fwd_s=0.0,
        head_bwd_s=0.0,
        embed_s=0.0,
        tail_s=0.0,
        gap_fraction=0.0,
    )
    small = simulate(StepInputs(ag_block_s=0.5, rs_block_s=1.0, **kw))
    # only the first all-gather and the last reduce-scatter stick out
    assert small.exposed_comm_s == pytest.approx(0.5 + 1.0)
    assert small.step_s == pytest.approx(24 + 1.5)
    big = simulate(StepInputs(ag_block_s=3.0, rs_block_s=1.0, **kw))
    assert big.exposed_comm_s > 8 * 2.0 and big.step_s > small.step_s
    no_prefetch = simulate(StepInputs(ag_block_s=0.5, rs_block_s=1.0, forward_prefetch=0, **kw))
    assert no_prefetch.exposed_comm_s == pytest.approx(8 * 0.5 + 1.0)
    # the overlap slowdown stretches computation inside the timeline (test_perfmodel_overlap_slowdown.py):
    # at most s x the overlapped time longer, and the stretch is the extra time
    slowed = simulate(StepInputs(ag_block_s=0.5, rs_block_s=1.0, interference=0.1, **kw))
    assert small.step_s < slowed.step_s <= small.step_s + 0.1 * small.overlapped_s + 1e-12
    assert slowed.slowdown_s == pytest.approx(slowed.compute_s - small.compute_s)


def test_fsdp_monotone_in_gpu_count(cal, h100):
    ps = [predict(fsdp(n), h100, cal, band=False).values for n in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    glob = [p["tokens_per_s"] for p in ps]
    comm = [p["comm_s"] for p in ps]
    exposed = [p["exposed_comm_s"] for p in ps]
    assert all(b > a for a, b in zip(glob, glob[1:]))
    assert all(b >= a for a, b in zip(comm, comm[1:]))
    assert all(b >= a * 0.999 for a, b in zip(exposed, exposed[1:]))
    # per GPU: the sharded optimizer makes small scales slightly faster; from 64 GPUs on it only falls
    per = [p["tokens_per_s_per_device"] for p in ps][3:]
    assert all(b <= a for a, b in zip(per, per[1:]))
    assert ps[-1]["tokens_per_s_per_device"] < ps[4]["tokens_per_s_per_device"]


def test_band_contains_central_and_joint_band(cal, h100):
    a, b = predict(fsdp(16), h100, cal), predict(fsdp(256), h100, cal)
    for p in (a, b):
        for m, (lo, hi) in p.band.items():
            if p.values.get(m) is not None:
                assert lo <= p.values[m] <= hi, m
        assert len(p.corners["step_time_s"]) == 64
    c, lo, hi = joint_band(a, b, "tokens_per_s_per_device")
    assert lo <= c <= hi < 0.01
    assert p.sources["calibrated_from_measurements"]["compute"].startswith("kernel categories")


def test_layouts_and_memory(cal, h100):
    hs = predict(hsdp(256), h100, cal, band=False)
    assert hs.values["fits_memory"] and hs.label == "HSDP 8x256"
    tp = predict(model_parallel(256, 2, 1), h100, cal, band=False)
    pp = predict(model_parallel(256, 1, 4), h100, cal, band=False)
    assert pp.values["bubble_s"] > 0 and pp.values["exposed_comm_s"] >= pp.values["bubble_s"]
    assert tp.values["tokens_per_s"] > 0 and 0 < tp.values["mfu"] < 1
    big = predict(
        RunSpec(model="llama2-70b", nodes=1, procs_per_node=8, seq_len=4096, micro_batch=2), h100, cal, band=False
    )
    assert not big.values["fits_memory"] and any("oom" in n for n in big.notes)
    assert any("extrapolated" in n for n in big.notes)
    with pytest.raises(ValueError):
        predict(fsdp(512), h100, cal)


def test_faster_interconnect_and_newer_gpu_what_ifs(cal, h100):
    base = predict(fsdp(256), h100, cal, band=False).values
    fast = predict(fsdp(256), with_overrides(h100, {"inter_node_GBps": 100}), cal, band=False).values
    assert fast["comm_s"] < base["comm_s"]
    a100 = predict(fsdp(1), load_cluster("a100-paper", REPO), cal, band=False).values
    h = predict(fsdp(1), h100, cal, band=False).values
    assert a100["tokens_per_s_per_device"] < h["tokens_per_s_per_device"] and a100["mfu"] > h["mfu"]


def test_tensor_core_efficiencies_carry_by_achievable_rates_only_where_both_are_known(cal):
    import dataclasses

    a100 = dataclasses.replace(load_cluster("a100-paper", REPO), attention_kernel=None)  # attention as the GEMMs
    carried = predict(fsdp(8), a100, cal, band=False)
    assert carried.values["tensor_carry"] == pytest.approx((271.2 / 312) / (806.55 / 989.4))
    assert "x 1.066" in carried.sources["calibrated_from_measurements"]["tensor_core_carry"]
    # the same silicon without a measured rate in the catalog (the A100 PCIe is not filled): unchanged
    pcie = dataclasses.replace(a100, gpu="NVIDIA A100 80GB PCIe")
    plain = predict(fsdp(8), pcie, cal, band=False)
    assert plain.values["tensor_carry"] == 1.0
    assert any("carried to NVIDIA A100 80GB PCIe unchanged" in n for n in plain.notes)
    ratio = carried.compute["layer_fwd_s"] / plain.compute["layer_fwd_s"]
    assert 1 / carried.values["tensor_carry"] < ratio < 1.0  # element-wise work is not carried
    assert predict(fsdp(1), load_cluster("h200-node", REPO), cal, band=False).values["tensor_carry"] == 1.0


def test_attention_carries_by_its_kernels_published_rates(cal):
    """A cluster that names its attention kernel gets the calibration's attention efficiency times
    the ratio of the two kernels' published fractions of peak (spec/catalog/attention.yaml): the
    H100 running FlashAttention-2 at 0.62x the calibration's cuDNN, the A100's FA2 at 1.15x."""
    import dataclasses

    from scalestudy.perfmodel.achievable import attention_rate
    from scalestudy.perfmodel.cluster import ClusterError, cluster_from_dict
    from scalestudy.perfmodel.predict import kernel_carry

    cudnn = attention_rate("NVIDIA H200", "cudnn")
    for name, rate in (("a100-paper", 173 / 312), ("h100-paper", 294 / 989.4)):
        cl = load_cluster(name, REPO)
        k = kernel_carry(cl, cal, "bf16")
        assert cl.attention_kernel == "flash2" and k.attention_by_kernel_rates
        assert k.attention == pytest.approx(rate / cudnn.fraction * k.clock_ratio, rel=1e-3)
        assert "flash2" in k.describe() and "flash-attention" in k.describe()
        plain = kernel_carry(dataclasses.replace(cl, attention_kernel=None), cal, "bf16")
        assert plain.attention == plain.matmul and "no published rate" in plain.describe()
        slow = predict(fsdp(8), cl, cal, band=False).values["step_time_s"]
        fast = predict(fsdp(8), dataclasses.replace(cl, attention_kernel=None), cal, band=False).values["step_time_s"]
        assert (slow > fast) == (name == "h100-paper")  # FA2 is slow on the H100 only
    h200 = kernel_carry(load_cluster("h200-node", REPO), cal, "bf16")
    assert h200.attention == pytest.approx(h200.matmul)  # the calibration's own kernel on its own GPU
    data = yaml.safe_load((REPO / "workflow/clusters/h100-paper.yaml").read_text())
    data["attention_kernel"] = {"value": "flash9", "source": "assumed: x"}
    with pytest.raises(ClusterError, match="flash9.*flash2"):
        cluster_from_dict(data, "bad.yaml")


def test_cli_predict_and_clusters(tmp_path):
    env_cmd = [
        sys.executable,
        "-c",
        "import sys, argparse; from scalestudy.cli import model as m; p = argparse.ArgumentParser(); "
        "s = p.add_subparsers(dest='c'); m.register(s); a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))",
    ]
    out = subprocess.run(
        env_cmd
        + [
            "model",
            "predict",
            "--cluster",
            "h100-paper",
            "--json",
            "--model",
            "llama2-7b",
            "--seq-len",
            "4096",
            "--micro-batch",
            "2",
            "--nodes",
            "2",
            "--procs-per-node",
            "8",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["cluster"] == "h100-paper" and d["values"]["tokens_per_s"] > 0
    assert d["band"]["mfu"][0] <= d["values"]["mfu"]
    assert d["calibration"]["fit_run_ids"]
    text = subprocess.run(
        env_cmd
        + [
            "model",
            "predict",
            "--cluster",
            "h100-paper",
            "--set",
            "inter_node_GBps=100",
            "--model",
            "llama2-7b",
            "--nodes",
            "2",
            "--procs-per-node",
            "8",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert text.returncode == 0 and "PREDICTED" in text.stdout and "what-if values: inter_node_GBps=100" in text.stdout
    bad = subprocess.run(
        env_cmd + ["model", "predict", "--cluster", "nope", "--model", "llama2-7b"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "no cluster file" in bad.stderr


def test_zero1_gathers_parameters_once_a_step_not_every_pass():
    kw = dict(
        layers=4,
        microbatches=4,
        layer_fwd_s=1.0,
        layer_bwd_s=2.0,
        head_fwd_s=0.0,
        head_bwd_s=0.0,
        embed_s=0.0,
        tail_s=0.0,
        gap_fraction=0.0,
        ag_block_s=0.5,
        ag_root_s=0.25,
    )
    fsdp, zero1 = simulate(StepInputs(**kw)), simulate(StepInputs(ag_once=True, **kw))
    assert fsdp.comm_s == pytest.approx(4 * (4 * 0.5 + 0.25))
    assert zero1.comm_s == pytest.approx(4 * 0.5 + 0.25)
    assert zero1.step_s < fsdp.step_s


def test_chunked_exposure_hides_earlier_chunks_behind_later_rounds():
    from scalestudy.perfmodel.overlap import chunked_exposure

    assert chunked_exposure(0.2, 1.0, 3.0, 1) == 0.2  # one chunk: only its own edge
    assert chunked_exposure(0.2, 1.0, 3.0, 4) == 0.2  # each chunk's collective fits the next rounds
    assert chunked_exposure(0.2, 5.0, 3.0, 4) == pytest.approx(0.2 + 3 * 2.0)  # a backlog of 2 s a chunk


def test_interleaved_chunks_overlap_data_parallel_collectives_where_the_option_says(cal, h100):
    def spec(schedule, v):
        return RunSpec(
            model="llama2-70b",
            device="cuda",
            precision="bf16",
            seq_len=4096,
            nodes=256,
            procs_per_node=8,
            micro_batch=1,
            tp=8,
            pp=4,
            pp_stages_per_rank=v,
            pp_schedule=schedule,
            pp_microbatches=8,
            dp_shard=64,
            activation_checkpointing="full",
        )

    on, off = ModelOptions(overlap_dp_chunks=True), ModelOptions(overlap_dp_chunks=False)
    inter = spec("interleaved_1f1b", 5)
    a, b = (predict(inter, h100, cal, options=o, band=False) for o in (on, off))
    assert a["step_time_s"] < b["step_time_s"] and a["exposed_comm_s"] < b["exposed_comm_s"]
    plain = spec("1f1b", 1)  # one chunk a rank: the option changes nothing
    c, d = (predict(plain, h100, cal, options=o, band=False) for o in (on, off))
    assert c["step_time_s"] == d["step_time_s"]


def test_a_new_gpu_needs_only_its_catalog_entry(fresh_catalog, cal):
    from scalestudy.perfmodel.cluster import load_cluster, with_gpu
    from scalestudy.spec import catalog

    catalog.add_catalog_file(REPO / "examples/catalog/my-hardware.yaml")
    c = load_cluster(str(REPO / "examples/clusters/my-gpu-node.yaml"), REPO)
    base = load_cluster("h100-paper", REPO)
    assert c.gpu == "NVIDIA RTX 6000 Ada Generation" and c.max_gpus == 32
    assert c.peak_flops == 364.2e12 and c.v("memory_gib") == 48 and c.v("tdp_w") == 300
    assert c.values["hbm_bytes_per_s"].source.startswith("datasheet: catalog")
    assert c.v("inter_node_GBps") == base.v("inter_node_GBps") and c.gpus_per_node == 8
    spec = RunSpec(
        model="llama2-7b", device="cuda", nodes=1, procs_per_node=8, micro_batch=1, activation_checkpointing="full"
    )
    assert predict(spec, c, cal, band=False)["tokens_per_s_per_device"] > 0
    h200 = with_gpu(base, "NVIDIA H200")
    assert h200.hbm == 4.8e12 and h200.v("memory_gib") == 141 and h200.v("inter_node_GBps") == 50


@pytest.fixture(scope="module")
def h100_fig2():
    """h100-paper with the Fig 2 fit's network hop: FSDP at 2048 GPUs is bound by its collectives there."""
    from scalestudy.perfmodel.cluster import load_cluster

    return load_cluster("h100-paper-fig2", REPO)


def test_overlap_slowdown_in_the_breakdown(cal, h100_fig2):
    off = ModelOptions(overlap_slowdown=0.0)
    for n in (16, 256):
        on_v = predict(fsdp(n), h100_fig2, cal, band=False).values
        off_v = predict(fsdp(n), h100_fig2, cal, band=False, options=off).values
        assert on_v["overlap_slowdown"] == pytest.approx(0.189) and off_v["overlap_slowdown_s"] == 0.0
        assert on_v["overlap_slowdown_s"] > 0
        assert on_v["step_time_s"] >= off_v["step_time_s"] - 1e-12
        assert on_v["exposed_comm_s"] <= off_v["exposed_comm_s"] + 1e-12  # the stretch hides communication
        assert on_v["power_w_per_gpu"] >= off_v["power_w_per_gpu"] - 1e-9  # ... and is drawn at compute power


def test_power_follows_the_compute_bursts_between_exposed_waits(cal, h100_fig2):
    """perfmodel/power.py: the limiter holds an average, so products between exposed waits shorter
    than its window draw more than the cap while the waits draw less; back to back they are held at it."""
    small, large = (predict(fsdp(nodes), h100_fig2, cal, band=False).values for nodes in (16, 256))  # 128, 2048 GPUs
    assert small["compute_burst_s"] is None or small["compute_burst_s"] > 2 * cal.power.limiter_tau_s
    assert small["power_w_per_gpu"] == pytest.approx(700.0, rel=0.01)
    assert 0.0 < large["compute_burst_s"] < cal.power.limiter_tau_s
    p_burst = cal.power.burst_w(large["compute_burst_s"])
    assert p_burst > 700.0 > large["power_w_per_gpu"]


def test_short_bursts_between_exposed_waits_run_faster_than_the_calibrated_rate(cal, h100_fig2):
    """Option burst_speedup: the clock-bound share of computation in bursts shorter than the limiter's
    window runs at up to full clock; back-to-back computation keeps the calibrated rate."""
    import dataclasses

    off = dataclasses.replace(ModelOptions(), burst_speedup=False)
    for nodes in (1, 256):
        on_v, off_v = (
            predict(fsdp(nodes), h100_fig2, cal, band=False, options=o).values for o in (ModelOptions(), off)
        )
        assert off_v["burst_speedup"] == 1.0
        if off_v["compute_burst_s"] is None:
            assert on_v["burst_speedup"] == 1.0 and on_v["step_time_s"] == pytest.approx(off_v["step_time_s"])
            continue
        assert on_v["compute_burst_s"] < off_v["compute_burst_s"]  # a faster burst is a shorter one
        assert on_v["burst_speedup"] == pytest.approx(
            burst_speedup(on_v, clock_bound_share(fsdp(nodes), h100_fig2, cal), h100_fig2, cal), rel=1e-5
        )  # a fixed point
        assert on_v["compute_s"] < off_v["compute_s"] and on_v["step_time_s"] <= off_v["step_time_s"] + 1e-12
    large = predict(fsdp(256), h100_fig2, cal, band=False).values
    assert 1 / cal.power.clock_factor() - 1e-9 > 1 / large["burst_speedup"] > 1.02
