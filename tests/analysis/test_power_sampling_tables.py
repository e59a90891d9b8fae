"""A run whose spec says power_sampling false has no power by design: its tables say so (never
"could not measure"), the power figure leaves it out with a note (never the 'x' of a failure),
and a committed run the study retired (retired_runs) is listed, never read, and no audit problem."""

import dataclasses

from analysis_fixtures import make_study, planned, write_train_run

from scalestudy.analysis import aggregate as agg
from scalestudy.analysis.audit import audit
from scalestudy.analysis.figures import figure_data
from scalestudy.analysis.run_table import NOT_SAMPLED
from scalestudy.measure.csv_format import split_list
from scalestudy.spec.run import POWER_SAMPLING_OFF, RunSpec

ON = RunSpec(model="tiny", device="cuda", procs_per_node=2, warmup_iters=1, measured_iters=4)
OFF = ON.replace(power_sampling=False)


def _study(root, specs, name="p", experiments=("weak_scaling", "power")):
    raw = root / "data" / name / "raw"
    for s in specs:
        kw = {"energy_reason": POWER_SAMPLING_OFF} if not s.power_sampling else {"power_w": 300.0}
        write_train_run(raw, s, **kw)
    labels = {True: "FSDP", False: "FSDP, no power sampling"}
    return make_study(root, [planned(s, experiments, labels[s.power_sampling]) for s in specs], name=name)


def test_no_power_by_design_is_a_reason_not_a_failure(tmp_path):
    t = agg.build_tables(_study(tmp_path, [ON, OFF]))
    off = next(r for r in t.runs if r["run_id"] == OFF.run_id)
    on = next(r for r in t.runs if r["run_id"] == ON.run_id)
    assert off["status"] == "ok" and off["tokens_per_s"] is not None
    assert off["energy_j"] is None and off["tokens_per_joule"] is None and off["power_w_per_gpu"] is None
    assert off["energy_reason"] == NOT_SAMPLED == f"not measured by design: {POWER_SAMPLING_OFF}"
    assert on["energy_j"] is not None and on["energy_reason"] is None
    notes = split_list(next(r for r in t.summary if r["config_id"] == OFF.config_id)["notes"])
    assert f"energy: {NOT_SAMPLED}" in notes and not any("could not measure" in n for n in notes)


def test_the_power_figure_leaves_out_a_configuration_without_power_by_design(tmp_path):
    study = _study(tmp_path, [ON, OFF, OFF.replace(procs_per_node=4, dp_shard=-1, global_batch=0)])
    agg.aggregate(study)
    tables = agg.load_tables(study.tables_dir)
    fd = figure_data("power", tables, study)
    drawn = {c for r in fd.rows for c in r.get("config_ids") or []}
    assert drawn == {ON.config_id} and all(r["y"] is not None for r in fd.rows)  # no 'x' of a failure
    (note,) = [n for n in fd.notes if NOT_SAMPLED in n]
    assert "FSDP, no power sampling at 2 GPUs" in note and "at 4 GPUs" in note
    # weak scaling draws the same runs' throughput as ever
    assert OFF.config_id in {c for r in figure_data("weak_scaling", tables, study).rows for c in r["config_ids"]}

    only = _study(tmp_path / "only", [OFF], name="q")
    agg.aggregate(only)
    fd = figure_data("power", agg.load_tables(only.tables_dir), only)
    assert fd.empty_reason == f"no GPU power data: {NOT_SAMPLED}" and not fd.rows


def test_a_retired_run_is_listed_never_read_and_no_audit_problem(tmp_path):
    study = _study(tmp_path, [ON], experiments=("weak_scaling",))
    old = write_train_run(study.raw_dir, ON.replace(seed=7), power_w=300.0)  # committed, then the grid changed
    stray = write_train_run(study.raw_dir, ON.replace(seed=8), power_w=300.0)
    study = dataclasses.replace(study, figures=("weak_scaling",), retired_runs={old.name: "made before X"})
    agg.aggregate(study)
    rows = {u["run_id"]: u["reason"] for u in agg.unplanned_runs(study)}
    assert rows[old.name] == f"{agg.RETIRED}: made before X (never read)"
    assert rows[stray.name] == "not a run of study 'p'"
    assert {r["run_id"] for r in agg.build_tables(study).runs} == {ON.run_id}
    problems = audit(study, figures=False, claims=False)
    assert [p for p in problems if "unplanned" in p] == [f"{stray}: unplanned run directory (not a run of study 'p')"]
    gone = dataclasses.replace(study, retired_runs={**study.retired_runs, "tiny-gone-seed0": "why"})
    assert any(
        "tiny-gone-seed0: retired run (retired_runs) has no run directory" in p
        for p in audit(gone, figures=False, claims=False)
    )
