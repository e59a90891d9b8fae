import pytest

from scalestudy.spec import rank_share
from scalestudy.spec.run import RunSpec, SpecError


def test_new_fields_leave_existing_config_ids_alone():
    base = RunSpec(model="tiny")
    d = base.to_dict()
    for k in ("comm", "emulate_rank", "device_memory_cap_gib"):
        d.pop(k)
    assert RunSpec.from_dict(d).config_id == base.config_id
    fake = base.replace(comm="fake")
    assert fake.config_id != base.config_id and fake.processes == 1 and base.processes == 1
    assert base.replace(device="cuda", device_memory_cap_gib=80.0).config_id != base.replace(device="cuda").config_id


def test_fake_spec_checks():
    s = RunSpec(model="tiny", nodes=4, procs_per_node=8, comm="fake", emulate_rank=31)
    assert (s.processes, s.launch_nodes, s.launch_procs_per_node, s.comm_backend) == (1, 1, 1, "fake")
    with pytest.raises(SpecError, match="emulate_rank"):
        RunSpec(model="tiny", nodes=4, procs_per_node=8, comm="fake", emulate_rank=32)
    with pytest.raises(SpecError, match="emulate_rank"):
        RunSpec(model="tiny", procs_per_node=2, emulate_rank=1)
    with pytest.raises(SpecError, match="device_memory_cap_gib"):
        RunSpec(model="tiny", device_memory_cap_gib=80.0)


def test_pipeline_step_and_stages():
    assert rank_share.pipeline_step_time([2.0, 3.0, 2.5], microbatches=6, pp=3) == pytest.approx(3.0 * 8 / 6)
    s = RunSpec(model="tiny", procs_per_node=8, tp=2, pp=4, comm="fake")
    kinds = rank_share.distinct_stages(s)
    assert [k.name for k in kinds] == ["first", "middle", "last"]
    ranks = [rank_share.rank_of(s, pp_rank=k.pp_rank) for k in kinds]
    assert ranks == [0, 2, 6] and [rank_share.stage_name(s, r) for r in ranks] == ["first", "middle", "last"]


def test_fake_stage_orders():
    torch = pytest.importorskip("torch")
    from scalestudy.harness.fake_comm import FakeStage

    s = RunSpec(model="tiny", procs_per_node=4, pp=4, pp_microbatches=6, comm="fake")
    order = FakeStage(torch.nn.Identity(), 1, s, torch.device("cpu"), None).order()
    assert [op for op, _ in order[:4]] == ["F", "F", "F", "B"]  # pp - stage = 3 forwards in flight
    assert sorted(order) == sorted([("F", i) for i in range(6)] + [("B", i) for i in range(6)])
    g = FakeStage(torch.nn.Identity(), 3, s.replace(pp_schedule="gpipe"), torch.device("cpu"), None).order()
    assert g == [("F", i) for i in range(6)] + [("B", i) for i in range(6)]


def test_rank_share_tables(tmp_path):
    from analysis_fixtures import make_study, planned, write_train_run

    from scalestudy.analysis import rank_shares
    from scalestudy.analysis.aggregate import build_tables

    base = dict(
        model="llama2-7b",
        device="cuda",
        seq_len=4096,
        procs_per_node=8,
        nodes=32,
        global_batch=512,
        comm="fake",
        device_memory_cap_gib=79.6,
        warmup_iters=1,
        measured_iters=2,
    )
    fsdp = RunSpec(**base)
    tppp = RunSpec(**base, tp=2, pp=2, pp_microbatches=4)
    pp4 = RunSpec(**base, pp=4, pp_microbatches=4)
    real = RunSpec(
        model="llama2-7b", device="cuda", n_layers=8, seq_len=4096, micro_batch=2, warmup_iters=1, measured_iters=2
    )
    runs = [
        planned(fsdp, ("tp_pp_grid",), "FSDP"),
        planned(real, ("agreement",), "FSDP"),
        planned(real.replace(comm="fake"), ("agreement",), "FSDP"),
    ]
    runs += [planned(tppp.replace(emulate_rank=r), ("tp_pp_grid",), "TP PP") for r in (0, 128)]
    runs += [planned(pp4.replace(emulate_rank=r), ("tp_pp_grid",), "PP") for r in (0, 64, 192)]
    study = make_study(tmp_path, runs, name="r")
    raw = study.raw_dir
    write_train_run(raw, fsdp, step_time_s=0.6, memory_bytes=50 << 30)
    write_train_run(raw, tppp, step_time_s=0.5, device_busy_s=0.2)
    write_train_run(raw, tppp.replace(emulate_rank=128), step_time_s=0.7, device_busy_s=0.3)
    write_train_run(raw, pp4, status="oom", memory_bytes=79 << 30)
    write_train_run(raw, real, step_time_s=0.366, power_w=687.0)
    write_train_run(raw, real.replace(comm="fake"), step_time_s=0.363, power_w=697.0)
    shares, configs = rank_shares.tables(study)
    assert all(r["label"] == rank_shares.rank_share.LABEL for r in shares if r["comm"] == "fake")
    by = {(c["tp"], c["pp"]): c for c in configs if c["world_size"] == 256}
    assert by[(1, 1)]["status"] == "ok" and by[(1, 1)]["rank_step_time_s"] == pytest.approx(0.6)
    assert by[(1, 1)]["fits_cap"] is True
    assert by[(2, 2)]["rank_step_time_s"] == pytest.approx(0.7 * 5 / 4)
    assert by[(2, 2)]["slowest_stage"] == "last"
    # the GPU's busy time beside the wall step, put together by the same pipeline rule
    assert by[(2, 2)]["stage_device_busy_s"] == [0.2, 0.3]
    assert by[(2, 2)]["rank_device_busy_step_s"] == pytest.approx(0.3 * 5 / 4)
    assert by[(1, 1)]["rank_device_busy_step_s"] is None  # a stage without it: none for the configuration
    assert by[(1, 4)]["status"] == "oom" and by[(1, 4)]["fits_cap"] is False
    assert by[(1, 4)]["stages_measured"] == 1 and by[(1, 4)]["stages_planned"] == 3
    assert [r["status"] for r in shares if r["pp"] == 4].count("planned") == 2
    agree = rank_shares.agreement(shares)
    assert agree["step_ratio"] == pytest.approx(0.363 / 0.366) and agree["fake_power_w"] == 697.0
    rows = {r["run_id"]: r for r in build_tables(study, allow_missing=True).runs}
    assert (
        rows[fsdp.run_id]["tokens_per_s"] is None
        and "communication not executed" in rows[fsdp.run_id]["throughput_reason"]
    )
    assert rows[fsdp.run_id]["peak_memory_bytes"] == 50 << 30
    from scalestudy.analysis.aggregate import aggregate
    from scalestudy.measure.csv_format import read_csv_rows
    from scalestudy.analysis.figures import render

    aggregate(study, allow_missing=True)
    rank_shares.write_tables(study)
    render("rank_grid", study, formats=("csv",))
    render("rank_memory", study, formats=("csv",))
    grid = read_csv_rows(study.figures_dir / "rank_grid.csv")
    oom = [r for r in grid if r["status"] == "oom"]
    assert oom and all(r["y"] == "" for r in oom if "time" in r["y_quantity"])
    busy = {r["x"] + r["series"]: r for r in grid if "GPU busy" in r["y_quantity"]}
    assert float(busy["2TP=2"]["y"]) == pytest.approx(0.3 * 5 / 4)
    assert busy["1TP=1"]["y"] == "" and "GPU busy time not measured" in busy["1TP=1"]["note"]
    assert {r["label"] for r in grid} == {rank_shares.rank_share.LABEL}


def test_a_pipeline_cell_with_some_stages_measured_says_how_many():
    from scalestudy.analysis.figures import rank_grid

    row = {
        "series": "TP=1",
        "x": 4,
        "status": "partial",
        "y": None,
        "panel": "p:\none rank's wall time per step (s)",
        "note": "1 of 3 stages measured",
    }
    assert rank_grid.cells([row])[0].status == "partial:\n1 of 3 stages"
    assert rank_grid.cells([{**row, "status": "planned"}])[0].status == "planned"


def test_prediction_takes_compute_and_memory_from_a_measured_share():
    from pathlib import Path

    from scalestudy.perfmodel.cluster import load_cluster
    from scalestudy.perfmodel.options import ModelOptions
    from scalestudy.perfmodel.predict import cached_calibration, predict
    from scalestudy.perfmodel.rank_shares import MeasuredShare, share_key

    # without the overlap slowdown, whose stretch is added to a measured share's computation (checked last)
    no_slowdown = ModelOptions(overlap_slowdown=0.0)
    repo = Path(__file__).resolve().parents[2]
    cal = cached_calibration([str(repo / "data" / "h200-reference" / "raw")], repo)
    h100 = load_cluster("h100-paper", repo)
    spec = RunSpec(
        model="llama2-7b",
        device="cuda",
        seq_len=4096,
        micro_batch=2,
        nodes=32,
        procs_per_node=8,
        warmup_iters=10,
        measured_iters=50,
    )
    plain = predict(spec, h100, cal, band=False, options=no_slowdown)
    assert plain.sources["inputs_from"]["compute"].startswith("the model")
    measured = plain.values["compute_s"] * 1.5
    shares = {
        share_key(
            spec.replace(comm="fake", device_memory_cap_gib=79.6, warmup_iters=2, measured_iters=3), "h100-sxm"
        ): MeasuredShare("paper-rank", "ok", measured, 52 << 30, 79.6, ("r0",))
    }
    moved = predict(spec, h100, cal, band=False, shares=shares, options=no_slowdown)
    assert moved.values["compute_s"] == pytest.approx(measured, rel=0.05)
    assert moved.values["step_time_s"] > plain.values["step_time_s"]
    assert moved.values["memory_measured_gib"] == 52 and moved.values["fits_memory"]
    assert "measured" in moved.sources["inputs_from"]["compute"]
    oom = {k: MeasuredShare("paper-rank", "oom", None, None, 79.6, ("r1",)) for k in shares}
    failed = predict(spec, h100, cal, band=False, shares=oom, options=no_slowdown)
    assert not failed.values["fits_memory"] and any(n.startswith("measured:") for n in failed.notes)
    assert failed.values["compute_s"] == plain.values["compute_s"]
    # a share ran with fake communication, so nothing overlapped it: the model's slowdown comes on top
    stretched = predict(spec, h100, cal, band=False, shares=shares)
    assert stretched.values["overlap_slowdown_s"] > 0
    extra = stretched.values["overlap_slowdown_s"]
    assert stretched.values["compute_s"] == pytest.approx(moved.values["compute_s"] + extra, rel=0.01)
    # keyed by the GPU kind the shares stand in for: an A100 cluster finds none
    a100 = load_cluster("a100-paper", repo)
    assert predict(spec, a100, cal, band=False, shares=shares).sources["inputs_from"]["compute"].startswith("the model")


def test_the_launcher_starts_one_process_for_a_rank_share(tmp_path):
    import json

    from scalestudy.launch.launcher import job_resources, launch

    s = RunSpec(
        model="tiny",
        nodes=4,
        procs_per_node=8,
        tp=2,
        pp=2,
        comm="fake",
        emulate_rank=31,
        seq_len=32,
        precision="fp32",
        warmup_iters=1,
        measured_iters=1,
    )
    assert job_resources(s)["threads"] == 1
    out = launch(s, tmp_path / s.run_id, time_limit_s=300)
    assert out.status == "ok"
    status = json.loads((tmp_path / s.run_id / "status.json").read_text())
    assert len(status["ranks"]) == 1
    run = json.loads((tmp_path / s.run_id / "run.json").read_text())
    assert run["rank_share"]["world_size_emulated"] == 32 and run["rank_share"]["rank_emulated"] == 31


def test_one_copy_collectives_cost_nothing_a_rank(monkeypatch):
    """torch's fake backend fills an all-gather's output with one copy a rank (the host cost behind the
    2048-GPU rank share, docs/rank-shares.md); the replacement fills all-gather and reduce-scatter
    outputs by the same rule with a few operators whatever the world size."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    from scalestudy.harness import fake_comm

    if dist.is_initialized():
        pytest.skip("this process already joined a process group")
    import torch.distributed._functional_collectives as funcol

    for module, names in (
        (dist, fake_comm._DIST_ALL_GATHER + fake_comm._DIST_REDUCE_SCATTER),
        (funcol, fake_comm._FUNCOL_ALL_GATHER + fake_comm._FUNCOL_REDUCE_SCATTER),
    ):
        for name in names:  # restored after the test
            if hasattr(module, name):
                monkeypatch.setattr(module, name, getattr(module, name))
    world = 2048
    spec = RunSpec(model="tiny", nodes=world // 8, procs_per_node=8, global_batch=world, comm="fake", emulate_rank=3)
    fake_comm.init_fake_process_group(spec)
    try:
        gen = torch.Generator().manual_seed(0)
        shard, full = torch.randn(3, generator=gen), torch.randn(world * 3, generator=gen)

        def aten_ops(collective, out, inp, **kw):  # operators one call dispatches, and what it returned
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                ret = collective(out, inp, **kw)
            return sum(e.count for e in prof.key_averages() if e.key.startswith("aten::")), ret

        ag_out, rs_out = torch.full((world * 3,), float("nan")), torch.full((3,), float("nan"))
        backend_ag, _ = aten_ops(dist.all_gather_single, ag_out, shard)
        assert backend_ag >= world  # torch stopped copying a rank: docs/rank-shares.md is stale
        replaced = fake_comm.start_record(spec, torch.device("cpu"))["one_copy_collectives"]  # as a run does
        assert {"torch.distributed.all_gather_single", "torch.distributed.reduce_scatter_single"} <= set(replaced)
        assert fake_comm.install_one_copy_collectives() == []
        ag_out.fill_(float("nan"))
        ag, ret_ag = aten_ops(dist.all_gather_single, ag_out, shard)
        rs, ret_rs = aten_ops(dist.reduce_scatter_single, rs_out, full)
        assert ag <= 10 and rs <= 10, (ag, rs)
        assert torch.equal(ag_out, shard.repeat(world)) and torch.equal(rs_out, full[9:12])
        assert ret_ag is None and ret_rs is None
        assert dist.all_gather_single(ag_out, shard, async_op=True).wait()
    finally:
        dist.destroy_process_group()
