"""The collectives benchmark: its command line, its plan of sizes, and real runs on gloo."""

import argparse
import json

import pytest
from conftest import child_env, status_of, warm_workers

from scalestudy.cli.collectives import collectives_spec_from_args, register
from scalestudy.measure import bandwidth, rawlog
from scalestudy.spec.collectives import OPS, CollectivesSpec


def parse(argv):
    parser = argparse.ArgumentParser(prog="scalestudy")
    register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["collectives", *argv])


def test_options_are_the_spec_fields():
    args = parse(
        [
            "--ops",
            "all_reduce,all_gather",
            "--min-bytes",
            "1K",
            "--max-bytes",
            "16M",
            "--iters",
            "7",
            "--warmup-iters",
            "0",
            "--dtype",
            "bfloat16",
            "--nodes",
            "4",
            "--procs-per-node",
            "8",
            "--seed",
            "3",
            "--step-factor",
            "4",
        ]
    )
    spec = collectives_spec_from_args(args)
    assert spec == CollectivesSpec(
        ops=("all_reduce", "all_gather"),
        min_bytes=1024,
        max_bytes=16 << 20,
        iters=7,
        warmup_iters=0,
        dtype="bfloat16",
        nodes=4,
        procs_per_node=8,
        seed=3,
        step_factor=4,
    )
    assert args.out_root == "runs" and args.run_dir is None and callable(args.func)
    assert collectives_spec_from_args(parse(["--ops", "all"])).ops == OPS
    assert collectives_spec_from_args(parse([])) == CollectivesSpec()


def test_spec_file_is_overridden_by_options(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"ops": ["all_to_all"], "max_bytes": 4096, "iters": 3}))
    spec = collectives_spec_from_args(parse(["--spec", str(f), "--iters", "9"]))
    assert (spec.ops, spec.max_bytes, spec.iters) == (("all_to_all",), 4096, 9)


def test_bad_size_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        parse(["--max-bytes", "12T"])
    assert "not a size" in capsys.readouterr().err


def test_plan_skips_sizes_that_round_to_nothing():
    from scalestudy.harness.collectives.bench import plan

    spec = CollectivesSpec(ops=("all_reduce", "all_gather"), min_bytes=16, max_bytes=128, procs_per_node=4)
    messages, skipped = plan(spec, 4)
    assert [(m.op, m.size_bytes) for m in messages] == [
        ("all_reduce", 16),
        ("all_reduce", 32),
        ("all_reduce", 64),
        ("all_reduce", 128),
        ("all_gather", 64),
        ("all_gather", 128),
    ]
    assert [(s["op"], s["requested_bytes"]) for s in skipped] == [("all_gather", 16), ("all_gather", 32)]
    assert "64 B" in skipped[0]["reason"]


def test_mismatches_are_counted_the_same_in_small_blocks(monkeypatch):
    import torch

    from scalestudy.harness.collectives import buffers

    monkeypatch.setattr(buffers, "_CHUNK_ELEMENTS", 7)
    a = torch.arange(50.0).view(5, 10)  # a[r, c] = 10 r + c
    assert buffers.count_mismatches(a, torch.arange(5.0).view(5, 1) * 10) == 45  # equal where c == 0
    assert buffers.count_mismatches(a, torch.arange(10.0).view(1, 10)) == 40  # equal where r == 0
    x = torch.arange(23.0) % 4
    assert buffers.periodic_mismatches(x, torch.arange(4.0)) == 0
    assert buffers.periodic_mismatches(x, torch.tensor([0.0, 1, 2, 9])) == 5


def launch(nproc, args, env=None):
    """`scalestudy collectives` on nproc ranks forked from a warm server (conftest.warm_workers): what
    the ranks measure is the subject here; how torchrun and the launcher start ranks is tested by the
    fault, launch and SLURM tests."""
    return warm_workers(nproc, ["collectives", "--procs-per-node", str(nproc), *args], env=env)


@pytest.mark.multiproc
@pytest.mark.parametrize("nproc", [2, 4])
def test_every_op_and_size_is_measured_and_correct(tmp_path, nproc):
    d = tmp_path / "run"
    res = launch(
        nproc,
        [
            "--ops",
            "all",
            "--min-bytes",
            "1K",
            "--max-bytes",
            "64K",
            "--warmup-iters",
            "1",
            "--iters",
            "3",
            "--run-dir",
            str(d),
        ],
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    run = rawlog.read_run(d)
    assert run.status["status"] == "ok"
    assert run.run["kind"] == "collectives" and run.run["launch"]["world_size"] == nproc
    spec = CollectivesSpec.from_dict(run.spec)
    assert run.run_id == spec.run_id and run.run["config_id"] == spec.config_id
    assert run.run["provenance"]["devices"]["count"] == nproc
    assert run.run["measurement"]["time_over_ranks"] == "mean" and run.run["measurement"]["skipped"] == []

    recs = [r for r in run.records if r["key"] == "collective"]
    assert {r["metadata"]["rank"] for r in recs} == {0}
    got = {(r["value"]["op"], r["value"]["size_bytes"]): r["value"] for r in recs}
    want = {(op, bandwidth.message(op, s, nproc, spec.dtype).size_bytes) for op in OPS for s in spec.sizes()}
    assert set(got) == want and len(recs) == len(want) == 4 * 7
    for (op, size), v in got.items():
        assert v["correct"] is True and v["wrong_elements"] == 0
        assert (v["world_size"], v["iters"], v["warmup"], v["dtype"]) == (nproc, 3, 1, "float32")
        assert v["count"] == bandwidth.message(op, v["requested_bytes"], nproc, "float32").count
        assert v["time_s_min_rank"] <= v["time_s"] <= v["time_s_max_rank"]
        assert v["algbw_GBps"] == pytest.approx(size / 1e9 / v["time_s"], rel=1e-12)
        assert v["busbw_GBps"] == pytest.approx(v["algbw_GBps"] * bandwidth.busbw_factor(op, nproc), rel=1e-12)
    # rank 0's progress table: one row per op and size, and the nccl-tests summary lines
    rows = [line.split() for line in res.stdout.splitlines() if line.strip() and line.split()[0].isdigit()]
    assert len(rows) == len(want) and all(row[-1] == "0" for row in rows)
    assert res.stdout.count("# Out of bounds values : 0 OK") == 4


@pytest.mark.multiproc
def test_comm_failure_is_classified_and_exits_0(tmp_path):
    d = tmp_path / "run"
    env = child_env(SCALESTUDY_INJECT_FAULT="comm_error:rank=1:step=1")
    res = launch(
        2,
        [
            "--ops",
            "all_reduce",
            "--min-bytes",
            "1K",
            "--max-bytes",
            "2K",
            "--iters",
            "2",
            "--run-dir",
            str(d),
            "--quiet",
        ],
        env=env,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    st = status_of(d)
    assert st["status"] == "comm_error" and 1 in st["culprit_ranks"]
    assert "injected fault" in st["ranks"][1]["error"]
    recs = [r for r in rawlog.read_run(d).records if r["key"] == "collective"]
    assert [r["value"]["size_bytes"] for r in recs] == [1024]
