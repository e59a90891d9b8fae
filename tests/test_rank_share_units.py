import pytest

from scalestudy import rank_share
from scalestudy.spec import RunSpec, SpecError


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
