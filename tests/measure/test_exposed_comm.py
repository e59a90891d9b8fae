import argparse
import gzip
import json
import math
import sys
from pathlib import Path

import pytest

from scalestudy.measure.exposed_comm import (
    CPU_GLOO_OPS,
    GPU_KERNELS,
    TraceError,
    analyse_trace,
    hta_overlap,
    load_trace,
    summarise,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
US = 1e-6
MAIN, GLOO = 100, 200  # thread ids of the CPU traces below


def kernel(name, ts, dur, stream=7, corr=None):
    args = {"stream": stream, "device": 0}
    if corr is not None:
        args["correlation"] = corr
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur, "args": args}


def launch(ts, corr):
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": MAIN,
        "ts": ts,
        "dur": 1,
        "args": {"correlation": corr},
    }


def step(n, ts, dur):
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": f"ProfilerStep#{n}",
        "pid": 1,
        "tid": MAIN,
        "ts": ts,
        "dur": dur,
    }


def op(name, ts, dur, tid=MAIN, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def trace(*events, **top):
    return {"traceEvents": list(events), **top}


# ---- GPU kernels ------------------------------------------------------------------------
def test_nested_and_overlapping_kernels_on_several_streams_partial_overlap():
    t = trace(
        kernel("ampere_bf16_gemm", 0, 10, stream=7),
        kernel("elementwise", 20, 10, stream=7),
        kernel("flash_fwd", 5, 20, stream=8),  # bridges the gap on stream 7: compute is [0, 30)
        kernel("tiny_kernel", 2, 2, stream=9),  # inside other compute: counted once
        kernel("ncclDevKernel_AllGather_RING_LL", 25, 15, stream=20),  # [25, 40): 5 hidden, 10 exposed
        kernel("ncclKernel_ReduceScatter", 30, 5, stream=21),  # inside the other comm kernel
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "pid": 0, "tid": 22, "ts": 30, "dur": 10},
    )
    r = analyse_trace(t)
    assert r.kind == GPU_KERNELS
    assert r.compute_s == pytest.approx(30 * US)
    assert r.comm_s == pytest.approx(15 * US)
    assert r.exposed_comm_s == pytest.approx(10 * US)
    assert r.overlap_fraction == pytest.approx(1 / 3)
    assert [s.step for s in r.per_step] == [None]
    assert r.per_step[0].wall_s == pytest.approx(40 * US)


def test_comm_fully_hidden():
    r = analyse_trace(
        trace(
            kernel("gemm", 0, 100, stream=7),
            kernel("gemm", 100, 50, stream=8),
            kernel("ncclDevKernel_AllReduce_Sum_f32", 40, 100, stream=20),
        )
    )
    assert r.exposed_comm_s == 0
    assert r.overlap_fraction == 1.0


def test_comm_alone_is_all_exposed_and_no_comm_gives_null_overlap():
    r = analyse_trace(trace(kernel("gemm", 0, 10), kernel("NCCLKernel_x", 10, 10, stream=20)))
    assert r.exposed_comm_s == pytest.approx(10 * US) and r.overlap_fraction == 0.0
    r = analyse_trace(trace(kernel("gemm", 0, 10)))
    assert r.comm_s == 0 and r.overlap_fraction is None


def test_per_step_split_by_profiler_step_assigns_kernels_to_their_launch_step():
    t = trace(
        step(5, 0, 100),
        step(6, 100, 100),
        # launched in step 5, runs after step 5's CPU window ended
        launch(90, corr=1),
        kernel("gemm", 105, 20, stream=7, corr=1),
        launch(95, corr=2),
        kernel("ncclDevKernel_AllGather", 110, 30, stream=20, corr=2),
        # step 6: comm exposed for 10 of its 20
        launch(150, corr=3),
        kernel("gemm", 160, 10, stream=7, corr=3),
        launch(151, corr=4),
        kernel("ncclDevKernel_ReduceScatter", 160, 20, stream=20, corr=4),
        kernel("gemm_without_correlation", 300, 5),  # after every step: left out
    )
    r = analyse_trace(t)
    s5, s6 = r.per_step
    assert (s5.step, s6.step) == (5, 6)
    assert s5.compute_s == pytest.approx(20 * US) and s5.comm_s == pytest.approx(30 * US)
    assert s5.exposed_comm_s == pytest.approx(15 * US)  # [125, 140)
    assert s6.exposed_comm_s == pytest.approx(10 * US) and s6.overlap_fraction == pytest.approx(0.5)
    assert s5.wall_s == pytest.approx(100 * US)
    assert r.exposed_comm_s == pytest.approx(25 * US)
    assert r.comm_s == pytest.approx(50 * US)
    assert r.overlap_fraction == pytest.approx(0.5)
    assert r.n_events_outside_steps == 1


# ---- CPU traces of the gloo backend --------------------------------------------------------
def test_cpu_gloo_classification():
    t = trace(
        step(1, 0, 1000),
        op("aten::mm", 0, 100),
        # a collective call: its copy is communication, not computation
        op("c10d::_allgather_base_", 100, 50),
        op("aten::copy_", 110, 30),
        op("gloo:all_gather", 150, 200, tid=GLOO, cat="user_annotation"),  # [150, 350)
        op("aten::copy_", 350, 20, tid=GLOO),  # gloo's own copy-out: communication
        op("aten::mm", 200, 50),  # overlaps the all-gather
        # an autograd node that sits blocked while the reduce runs: only its aten child computes
        op("autograd::engine::evaluate_function: RegisterPostBackwardFunctionBackward", 400, 500),
        op("aten::cat", 400, 50),
        op("gloo:all_reduce", 500, 300, tid=GLOO, cat="user_annotation"),  # [500, 800): exposed
        op("record_param_comms", 950, 10),
        distributedInfo={"backend": "gloo", "rank": 3, "world_size": 4},
    )
    r = analyse_trace(t)
    assert r.kind == CPU_GLOO_OPS and r.rank == 3
    assert r.compute_s == pytest.approx((100 + 50 + 50) * US)
    # comm: [100, 150) call + [150, 370) gloo thread + [500, 800) + [950, 960)
    assert r.comm_s == pytest.approx((50 + 220 + 300 + 10) * US)
    assert r.exposed_comm_s == pytest.approx((50 + 170 + 300 + 10) * US)
    assert "gloo" in r.measured


def test_cpu_comm_running_past_its_step_counts_within_the_step_only():
    # a gloo wait (PP send/recv) that starts in step 1 and ends in step 2: before, step 1 counted
    # all of it and its exposed communication exceeded the step's length (share > 100%)
    t = trace(
        step(1, 0, 100),
        step(2, 100, 100),
        op("aten::mm", 0, 40),
        op("gloo:recv", 60, 120, tid=GLOO, cat="user_annotation"),  # [60, 180): 40 in step 1
        op("aten::mm", 100, 50),
        distributedInfo={"backend": "gloo", "rank": 1, "world_size": 2},
    )
    s1, s2 = analyse_trace(t).per_step
    assert s1.comm_s == pytest.approx(40 * US) and s1.exposed_comm_s == pytest.approx(40 * US)
    assert s1.exposed_comm_s <= s1.wall_s and s2.exposed_comm_s <= s2.wall_s


def test_gloo_send_recv_on_the_training_thread_is_a_call_not_a_communication_thread():
    # pipeline parallelism on gloo: send/recv run on the training thread, which carries the
    # ProfilerStep; before, that made it a "gloo thread" and the whole step exposed communication
    t = trace(
        step(1, 0, 100),
        op("aten::mm", 0, 60),
        op("gloo:recv", 60, 30, cat="user_annotation"),  # [60, 90): blocked, exposed
        op("aten::add", 90, 10),
        distributedInfo={"backend": "gloo", "rank": 1, "world_size": 2},
    )
    r = analyse_trace(t)
    assert r.compute_s == pytest.approx(70 * US) and r.comm_s == pytest.approx(30 * US)
    assert r.exposed_comm_s == pytest.approx(30 * US)


def test_cpu_trace_without_comm():
    r = analyse_trace(trace(op("aten::mm", 0, 10)))
    assert r.kind == CPU_GLOO_OPS and r.comm_s == 0 and r.overlap_fraction is None


def test_nccl_trace_without_kernels_is_refused():
    with pytest.raises(TraceError, match="CUDA"):
        analyse_trace(trace(op("aten::mm", 0, 10), distributedInfo={"backend": "nccl", "rank": 0}))


# ---- files ----------------------------------------------------------------------------------
def test_load_plain_gzipped_and_bare_list(tmp_path):
    t = trace(kernel("gemm", 0, 10), kernel("ncclKernel", 5, 10, stream=20))
    (tmp_path / "a.json").write_text(json.dumps(t))
    with gzip.open(tmp_path / "b.json.gz", "wt") as f:
        json.dump(t, f)
    (tmp_path / "c.json").write_text(json.dumps(t["traceEvents"]))
    results = [analyse_trace(tmp_path / n) for n in ("a.json", "b.json.gz", "c.json")]
    assert [r.exposed_comm_s for r in results] == pytest.approx([5 * US] * 3)
    assert results[1].trace.endswith("b.json.gz")


def test_unreadable_traces_name_the_file(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TraceError, match="bad.json"):
        load_trace(tmp_path / "bad.json")
    (tmp_path / "bad.json.gz").write_bytes(b"not gzip")
    with pytest.raises(TraceError, match="bad.json.gz"):
        load_trace(tmp_path / "bad.json.gz")
    (tmp_path / "empty.json").write_text("{}")
    with pytest.raises(TraceError, match="traceEvents"):
        load_trace(tmp_path / "empty.json")


# ---- real CPU traces (torchrun, 2 ranks, gloo; see tests/fixtures/README.md) ---------------
def _sensible(r):
    assert r.kind == CPU_GLOO_OPS
    for v in (r.compute_s, r.comm_s, r.exposed_comm_s):
        assert math.isfinite(v) and v >= 0
    assert r.compute_s > 0 and r.comm_s > 0
    assert r.exposed_comm_s <= r.comm_s + 1e-12
    assert 0.0 <= r.overlap_fraction <= 1.0
    for s in r.per_step:
        # exposed time is disjoint from compute time; both lie (nearly) inside the step
        assert s.compute_s + s.exposed_comm_s <= 1.05 * s.wall_s


def test_real_fsdp2_trace():
    r = analyse_trace(FIXTURES / "gloo_fsdp2_tiny" / "rank-00000.json.gz")
    _sensible(r)
    assert r.rank == 0 and [s.step for s in r.per_step] == [2]
    # FSDP2 issues its all-gathers and reduce-scatters synchronously on CPU: nothing hides them
    assert r.overlap_fraction == pytest.approx(0.0, abs=0.05)


def test_real_async_allreduce_trace_shows_partial_overlap():
    r = analyse_trace(FIXTURES / "gloo_async_allreduce" / "rank-00000.json.gz")
    _sensible(r)
    assert [s.step for s in r.per_step] == [1, 2]
    assert 0.0 < r.overlap_fraction < 1.0


def test_summary_and_exposed_command(capsys):
    from scalestudy.cli.measure import register

    paths = sorted(str(p) for p in (FIXTURES / "gloo_fsdp2_tiny").glob("rank-*.json.gz"))
    results = [analyse_trace(p) for p in paths]
    s = summarise(results)
    assert s["n_traces"] == 2 and [r["rank"] for r in s["per_rank"]] == [0, 1]
    assert s["exposed_comm_s"] == pytest.approx(sum(r.exposed_comm_s for r in results))

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["exposed", *paths])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["comm_s"] == pytest.approx(s["comm_s"])
    assert {"compute_s", "comm_s", "exposed_comm_s", "overlap_fraction", "per_rank"} <= set(out)

    args = parser.parse_args(["exposed", str(FIXTURES / "missing.json.gz")])
    assert args.func(args) == 2
    assert "missing.json.gz" in capsys.readouterr().err


def test_summarise_refuses_mixed_kinds():
    gpu = analyse_trace(trace(kernel("gemm", 0, 10)))
    cpu = analyse_trace(trace(op("aten::mm", 0, 10)))
    with pytest.raises(ValueError, match="mix"):
        summarise([gpu, cpu])


def test_hta_overlap_without_hta(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "hta", None)
    monkeypatch.setitem(sys.modules, "hta.trace_analysis", None)
    with pytest.raises(ImportError, match="HolisticTraceAnalysis"):
        hta_overlap(tmp_path)


def test_hta_agrees_on_gpu_traces(tmp_path):
    pytest.importorskip("hta.trace_analysis")
    for rank, shift in ((0, 0), (1, 10)):
        events = [
            step(1, 0, 100),
            step(2, 100, 100),
            step(3, 200, 100),
            launch(10, 1),
            kernel("ampere_gemm", 10, 40, corr=1),
            launch(11, 2),
            kernel("ncclDevKernel_AllGather_RING_LL", 30 + shift, 40, stream=20, corr=2),
            launch(110, 3),
            kernel("ampere_gemm", 110, 10, corr=3),
            launch(111, 4),
            kernel("ncclDevKernel_ReduceScatter_RING", 115, 30, stream=20, corr=4),
            launch(210, 5),
            kernel("ampere_gemm", 210, 10, corr=5),
        ]  # HTA drops the last step
        for e in events:
            e.setdefault("args", {})["External id"] = 0
        t = trace(
            *events,
            distributedInfo={"backend": "nccl", "rank": rank, "world_size": 2},
            deviceProperties=[{"id": 0, "name": "NVIDIA H200"}],
        )
        with gzip.open(tmp_path / f"rank-{rank:05d}.json.gz", "wt") as f:
            json.dump(t, f)
    ours = {r.rank: r.overlap_fraction for r in (analyse_trace(p) for p in sorted(tmp_path.glob("*.json.gz")))}
    assert ours == pytest.approx({0: 5 / 14, 1: 3 / 14})
    assert hta_overlap(tmp_path) == pytest.approx(ours, abs=1e-4)
