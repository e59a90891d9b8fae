"""Studies: the schema, the grid expansion, the labels, and the four studies of the workflow."""

import copy
import json
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from scalestudy.spec.collectives import OPS, CollectivesSpec
from scalestudy.spec.run import DEVICES, PP_SCHEDULES, PRECISIONS, RunSpec
from scalestudy.spec.studies import (
    ALL_FIGURES,
    FIGURES,
    RANK_FIGURES,
    StudyError,
    load_study,
    resolve_spec,
    strategy_label,
    study_from_dict,
    study_names,
)

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "workflow" / "schemas" / "study.schema.json").read_text())


def minimal(**changes) -> dict:
    d = {
        "description": "a test study",
        "hardware": "CPU",
        "seeds": [0, 1],
        "defaults": {"model": "tiny", "device": "cpu", "precision": "fp32", "warmup_iters": 1, "measured_iters": 2},
        "experiments": [{"name": "weak_scaling", "grid": {"procs_per_node": [1, 2]}}],
    }
    d.update(changes)
    return d


def plan(d: dict, name: str = "t"):
    return study_from_dict(name, d, root=REPO)


# ---- the schema ------------------------------------------------------------------------------
def test_schema_lists_every_spec_field():
    run_fields = {f.name for f in fields(RunSpec)} - {"seed"}
    props = SCHEMA["$defs"]["fields"]["properties"]
    assert set(props) == run_fields | {"global_batch_per_gpu"}
    assert set(SCHEMA["$defs"]["grid"]["properties"]) == set(props)
    assert props["device"]["enum"] == list(DEVICES)
    assert props["precision"]["enum"] == list(PRECISIONS)
    assert props["pp_schedule"]["enum"] == list(PP_SCHEDULES)
    coll = SCHEMA["$defs"]["collectives"]["properties"]
    assert set(coll) == ({f.name for f in fields(CollectivesSpec)} - {"seed"}) | {"world_sizes", "seeds"}
    assert coll["ops"]["items"]["enum"] == list(OPS)


@pytest.mark.parametrize(
    "mutate, where, words",
    [
        (lambda d: d["defaults"].update(precision="fp16"), "defaults.precision", "'fp16'"),
        (
            lambda d: d["experiments"][0]["grid"].update(tp=[1, "two"]),
            "experiments[0] (weak_scaling).grid.tp[1]",
            "'two'",
        ),
        (lambda d: d["defaults"].update(tp_degree=2), "defaults", "tp_degree"),
        (lambda d: d.update(seeds=[]), "seeds", "non-empty"),
        (lambda d: d.pop("hardware"), "(top level)", "'hardware' is a required property"),
        (
            lambda d: d["experiments"][0].update(name="Weak Scaling"),
            "experiments[0] (Weak Scaling).name",
            "does not match",
        ),
        (lambda d: d.update(collectives={"ops": ["broadcast"], "world_sizes": [2]}), "collectives.ops[0]", "broadcast"),
        (lambda d: d["defaults"].update(dp_replicate="all"), "defaults.dp_replicate", "rest"),
        (lambda d: d["defaults"].update(seed=3), "defaults", "seed"),
        (
            lambda d: d["experiments"][0]["grid"].update(nodes=[]),
            "experiments[0] (weak_scaling).grid.nodes",
            "non-empty",
        ),
    ],
)
def test_schema_rejects_bad_values_naming_the_field(mutate, where, words):
    d = minimal()
    mutate(d)
    with pytest.raises(StudyError) as e:
        plan(d)
    msg = str(e.value)
    assert msg.startswith("study 't': ")
    assert f"{where}: " in msg and words in msg, msg
    assert e.value.problems and e.value.problems[0][0] == where


def test_schema_reports_every_bad_field_at_once():
    d = minimal()
    d["defaults"]["precision"] = "fp16"
    d["seeds"] = [-1]
    with pytest.raises(StudyError) as e:
        plan(d)
    assert {f for f, _ in e.value.problems} == {"defaults.precision", "seeds[0]"}


# ---- run specs that cannot work -----------------------------------------------------------------
def test_impossible_spec_names_study_experiment_point_and_field():
    d = minimal(experiments=[{"name": "tp_pp_grid", "set": {"procs_per_node": 4}, "grid": {"tp": [2, 4]}}])
    with pytest.raises(StudyError) as e:
        plan(d, "mystudy")
    err = e.value
    assert (err.study, err.experiment, err.point) == ("mystudy", "tp_pp_grid", {"tp": 4})
    assert "tp" in {f for f, _ in err.problems}
    assert str(err).startswith("study 'mystudy', experiment 'tp_pp_grid' (tp=4): tp: ")
    assert "key/value heads of tiny are not divisible by tp=4" in str(err)


def test_skip_infeasible_drops_and_lists_the_points():
    d = minimal(
        experiments=[
            {"name": "tp_pp_grid", "set": {"procs_per_node": 4}, "grid": {"tp": [2, 4]}, "skip_infeasible": True}
        ]
    )
    s = plan(d)
    assert {r.spec.tp for r in s.runs} == {2}
    assert len(s.dropped) == 1 and s.dropped[0].point == {"tp": 4} and "tp=4" in s.dropped[0].reason


def test_memory_check_drops_layouts_that_do_not_fit():
    d = minimal(
        device_memory_gib=80,
        defaults={"device": "cuda", "precision": "bf16", "seq_len": 4096, "procs_per_node": 8, "micro_batch": 1},
        experiments=[
            {
                "name": "model_sizes",
                "layouts": [{"model": "llama-1b"}, {"model": "llama2-70b"}],
                "skip_infeasible": True,
            }
        ],
    )
    s = plan(d)
    assert {r.spec.model for r in s.runs} == {"llama-1b"}
    assert "memory estimate" in s.dropped[0].reason and "exceeds device_memory_gib 80" in s.dropped[0].reason


def test_collectives_error_names_the_field():
    d = minimal(collectives={"world_sizes": [2], "min_bytes": "1M", "max_bytes": "1K"})
    with pytest.raises(StudyError) as e:
        plan(d)
    assert "collectives.max_bytes" in str(e.value)
    with pytest.raises(StudyError, match="either nodes"):
        plan(minimal(collectives={"ops": ["all_reduce"]}))


def test_grid_and_layout_may_not_set_the_same_field():
    d = minimal(experiments=[{"name": "x", "grid": {"tp": [1]}, "layouts": [{"tp": 2}]}])
    with pytest.raises(StudyError, match="tp: set by both the grid and a layout"):
        plan(d)


# ---- planning values ----------------------------------------------------------------------------
def test_planning_values():
    s = resolve_spec({"procs_per_node": 4, "global_batch_per_gpu": 2, "micro_batch": 2})
    assert s.global_batch == 8 and s.grad_accum == 1
    s = resolve_spec({"nodes": 4, "procs_per_node": 8, "dp_shard": 8, "dp_replicate": "rest"})
    assert (s.dp_replicate, s.dp_shard, s.layout) == (4, 8, "hsdp")
    s = resolve_spec({"procs_per_node": 4, "pp": 2, "global_batch": 8, "pp_microbatches": "fill"})
    assert (s.dp, s.pp_microbatches, s.grad_accum) == (2, 4, 1)
    assert resolve_spec({"procs_per_node": 2, "pp_microbatches": "fill"}).pp_microbatches == 1
    with pytest.raises(Exception, match="pp_microbatches"):
        resolve_spec({"procs_per_node": 4, "pp": 4, "global_batch": 2, "pp_microbatches": "fill"})


def test_explicit_global_batch_overrides_a_per_gpu_default():
    d = minimal(
        experiments=[{"name": "strong_scaling", "set": {"global_batch": 4}, "grid": {"procs_per_node": [1, 2]}}]
    )
    d["defaults"]["global_batch_per_gpu"] = 1
    assert {r.spec.global_batch for r in plan(d).runs} == {4}


# ---- expansion --------------------------------------------------------------------------------
def test_a_run_shared_by_experiments_appears_once_with_every_name():
    d = minimal(
        experiments=[
            {"name": "weak_scaling", "also": ["power"], "grid": {"procs_per_node": [1, 2]}},
            {"name": "strong_scaling", "set": {"global_batch": 2}, "grid": {"procs_per_node": [1, 2]}},
        ]
    )
    s = plan(d)
    assert len(s.run_ids) == len(set(s.run_ids)) == 2 * 3  # 3 configurations x 2 seeds
    shared = [r for r in s.runs if r.spec.world_size == 2]
    assert len(shared) == 2 and all(r.experiments == ("weak_scaling", "power", "strong_scaling") for r in shared)
    assert s.experiments_by_run_id()[shared[0].run_id] == shared[0].experiments
    assert s.figures == ("weak_scaling", "strong_scaling", "power")


def test_experiment_seeds_override_the_study_seeds():
    d = minimal(experiments=[{"name": "x", "seeds": [7], "grid": {"procs_per_node": [1]}}])
    assert [r.spec.seed for r in plan(d).runs] == [7]


@pytest.mark.parametrize(
    "changes, label",
    [
        ({"procs_per_node": 4}, "FSDP"),
        ({"procs_per_node": 1}, "FSDP"),
        ({"nodes": 32, "procs_per_node": 8, "dp_shard": 8, "dp_replicate": 32}, "HSDP 8x32"),
        ({"nodes": 32, "procs_per_node": 8, "model": "llama2-7b", "tp": 2, "pp": 4}, "TP=2, PP=4, FSDP over 32"),
        ({"procs_per_node": 4, "tp": 2, "sequence_parallel": True}, "TP=2+SP, FSDP over 2"),
        ({"procs_per_node": 2, "pp": 2, "pp_schedule": "gpipe"}, "PP=2 GPipe"),
        (
            {
                "procs_per_node": 2,
                "pp": 2,
                "pp_schedule": "interleaved_1f1b",
                "pp_stages_per_rank": 2,
                "pp_microbatches": 2,
            },
            "PP=2 interleaved x2",
        ),
        ({"procs_per_node": 4, "dp_replicate": 4, "dp_shard": 1}, "DDP over 4"),
        ({"procs_per_node": 8, "tp": 2, "dp_replicate": 2, "dp_shard": 2}, "TP=2, HSDP 2x2"),
        ({"procs_per_node": 2, "activation_checkpointing": "full"}, "FSDP, full AC"),
    ],
)
def test_labels(changes, label):
    assert strategy_label(RunSpec.from_dict(changes)) == label


# ---- the studies of the workflow ----------------------------------------------------------------------
def test_every_study_file_plans():
    names = study_names(REPO)
    assert {"smoke", "paper", "node", "h200-reference"} <= set(names)
    for name in names:
        s = load_study(name, REPO)
        assert s.runs and set(s.figures) <= set(ALL_FIGURES)
        assert len(set(s.run_ids)) == len(s.runs)
        assert all(r.label for r in s.runs)
        for f in s.figures:
            rank_figure = f in RANK_FIGURES and any(r.spec.comm == "fake" for r in s.runs)
            model_figure = f == "claim_sensitivity" and s.prediction  # drawn from the model's own table
            assert f == "collectives_bandwidth" or rank_figure or model_figure or s.runs_of(f), (name, f)


def test_load_study_by_path_and_unknown_names(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(yaml.safe_dump(minimal()))
    assert load_study(str(p), REPO).name == "mine"
    with pytest.raises(StudyError, match="known studies: .*smoke"):
        load_study("nonesuch", REPO)


def test_smoke_expands_to_the_expected_runs():
    s = load_study("smoke", REPO)
    assert s.launch and s.figures == FIGURES
    configs = {r.spec.config_id for r in s.runs}
    assert len(configs) == 16
    assert len(s.runs) == 38  # 11 configurations x 3 seeds, 5 code-path checks x 1 seed
    assert {r.spec.world_size for r in s.runs} == {1, 2, 4}
    assert all(r.spec.device == "cpu" and r.spec.precision == "fp32" and r.spec.model == "tiny" for r in s.runs)
    assert all((r.spec.warmup_iters, r.spec.measured_iters) == (2, 5) for r in s.runs)
    assert all(r.spec.profile_iters == 1 for r in s.runs_of("kernel_breakdown"))
    seeds = {e: {r.spec.seed for r in s.runs_of(e)} for e in s.experiments}
    assert all(seeds[e] == {0, 1, 2} for e in FIGURES[1:]), seeds
    labels = {r.label for r in s.runs}
    for want in (
        "FSDP",
        "HSDP 2x2",
        "TP=2",
        "TP=2+SP",
        "PP=2",
        "PP=2 GPipe",
        "PP=2 interleaved x2",
        "PP=4",
        "TP=2, PP=2",
        "TP=2, FSDP over 2",
        "PP=2, FSDP over 2",
    ):
        assert want in labels, want
    assert [c.world_size for c in s.collectives] == [2, 4]
    shared = [r for r in s.runs if r.spec.world_size == 4 and r.label == "FSDP"]
    assert {"weak_scaling", "strong_scaling", "tp_pp_grid"} <= set(shared[0].experiments)


def test_paper_plans_the_grid():
    s = load_study("paper", REPO)
    assert all(r.spec.device == "cuda" and r.spec.precision == "bf16" and r.spec.seq_len == 4096 for r in s.runs)
    assert all((r.spec.warmup_iters, r.spec.measured_iters) == (10, 50) for r in s.runs)
    assert {r.spec.seed for r in s.runs} == {0, 1, 2}
    gpus = [8 * 2**i for i in range(9)]  # 8 .. 2048
    weak = s.runs_of("weak_scaling")
    fsdp = [r for r in weak if r.label == "FSDP"]
    assert sorted({r.spec.world_size for r in fsdp}) == gpus
    assert all(r.spec.model == "llama2-7b" and r.spec.global_batch == 2 * r.spec.world_size for r in weak)
    hsdp = [r for r in weak if r.spec.layout == "hsdp"]
    assert sorted({r.spec.world_size for r in hsdp}) == gpus[1:]
    assert all(r.spec.dp_shard == 8 and r.spec.dp_replicate == r.spec.nodes for r in hsdp)
    grid = s.runs_of("tp_pp_grid")
    assert {(r.spec.tp, r.spec.pp) for r in grid} == {(t, p) for t in (1, 2, 4, 8, 16) for p in (1, 2, 4, 8, 16)}
    assert all(r.spec.world_size == 256 and r.spec.global_batch == 512 for r in grid)
    strong = s.runs_of("strong_scaling")
    assert all(r.spec.global_batch == 32 for r in strong)
    assert {r.spec.nodes for r in strong} == {2, 4, 8, 16, 32}
    assert all(r.spec.tp * r.spec.pp >= r.spec.world_size // 32 for r in strong)
    sizes = s.runs_of("model_sizes")
    assert {r.spec.model for r in sizes} == {"llama-1b", "llama2-7b", "llama2-13b", "llama2-70b"}
    assert all(r.spec.tp == 8 for r in sizes if r.spec.model == "llama2-70b")
    assert [c.nodes for c in s.collectives] == [2**i for i in range(9)]
    assert all(c.min_bytes == 512 and c.max_bytes == 16 << 30 and c.procs_per_node == 8 for c in s.collectives)
    # 9 FSDP + 8 HSDP + 45 TP/PP weak-scaling points, the 25-point grid, strong scaling and model sizes
    assert len({r.spec.config_id for r in s.runs}) >= 9 + 8 + 45 + 25 - 6
    assert len(s.runs) >= 3 * 100


def test_h200_reference_is_launchable_and_plans_the_committed_runs():
    s = load_study("h200-reference", REPO)
    assert s.launch and not s.collectives
    assert all(r.spec.world_size == 1 and r.spec.device == "cuda" for r in s.runs)
    raw = REPO / "data" / "h200-reference" / "raw"
    if raw.is_dir():  # every committed run maps to its experiments or is retired, with why
        committed = {p.name for p in raw.iterdir() if p.is_dir()}
        assert committed - set(s.retired_runs) <= set(s.run_ids) and set(s.retired_runs) <= committed
        # the planned runs not committed yet (partial: rows of status missing until the launcher makes
        # them): instrumentation_overhead's, whose spec now says power_sampling false
        missing = set(s.run_ids) - committed
        assert s.partial and {r.run_id for r in s.runs_of("instrumentation_overhead")} == missing


def test_a_study_dict_is_not_modified():
    d = minimal()
    before = copy.deepcopy(d)
    plan(d)
    assert d == before
