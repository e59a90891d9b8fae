"""A run measured with a check weakened (an override switch such as the run guard off, an
uncommitted checkout) carries it in its raw log; runs.csv, the configuration's notes, the figure
note and the claims say so, and `scalestudy audit --strict` refuses it (issue 54)."""

import pytest
from analysis_fixtures import INTEGRITY_SPEC, analysis_cli, make_study, planned, write_train_run

from scalestudy.analysis import aggregate as agg
from scalestudy.analysis.audit import audit
from scalestudy.analysis.claims import write_claims
from scalestudy.analysis.figures import figure_data
from scalestudy.measure import rawlog
from scalestudy.measure.table_files import WEAKENED_NOTE


def test_weakened_checks_name_each_switch_the_guard_and_a_dirty_checkout():
    cpu = {"spec": {"device": "cpu"}}
    assert rawlog.weakened_checks(cpu, {}) == []
    assert rawlog.weakened_checks({**cpu, "overrides": {"SCALESTUDY_FOREIGN_CPU_MAX": "off"}}, {}) == [
        "SCALESTUDY_FOREIGN_CPU_MAX=off (the run guard's foreign-CPU threshold)"
    ]
    guard_off = {"load": {"foreign_cpu": {"threshold": None, "foreign_cpu_share": 0.536}}}
    assert rawlog.weakened_checks(cpu, guard_off) == ["the run guard's foreign-CPU check was off"]
    raised = {"load": {"foreign_cpu": {"threshold": 0.6}}}
    assert rawlog.weakened_checks(cpu, raised) == ["the run guard's foreign-CPU threshold was raised to 60%"]
    assert rawlog.weakened_checks(cpu, {"load": {"foreign_cpu": {"threshold": 0.1}}}) == []
    dirty = {**cpu, "provenance": {"package": {"git": {"commit": "0123456789abcdef", "dirty": True}}}}
    assert rawlog.weakened_checks(dirty, {}) == ["made from a checkout with uncommitted changes (commit 0123456789ab)"]


def test_overrides_from_env_records_only_the_switches_set():
    env = {"SCALESTUDY_FOREIGN_CPU_MAX": "off", "SCALESTUDY_HARNESS_OFF": "", "PATH": "/bin"}
    assert rawlog.overrides_from_env(env) == {"SCALESTUDY_FOREIGN_CPU_MAX": "off"}


@pytest.fixture
def study(tmp_path):
    raw = tmp_path / "data" / "t" / "raw"
    runs = []
    for seed, kw in enumerate([{}, {"overrides": {"SCALESTUDY_FOREIGN_CPU_MAX": "off"}}, {"dirty": True}]):
        spec = INTEGRITY_SPEC.replace(seed=seed)
        write_train_run(raw, spec, step_time_s=0.5 + seed / 100, **kw)
        runs.append(planned(spec, ("weak_scaling",), "FSDP"))
    s = make_study(tmp_path, runs)
    agg.aggregate(s)
    return s


def test_the_tables_the_figure_and_the_claims_say_so(study):
    tables = agg.load_tables(study.tables_dir)
    runs = {r["seed"]: r["weakened"] for r in tables.runs.to_dict("records")}
    assert runs[0] in ("", None) or str(runs[0]) == "nan"
    assert "SCALESTUDY_FOREIGN_CPU_MAX=off" in str(runs[1])
    assert "uncommitted changes" in str(runs[2])
    notes = str(tables.summary.to_dict("records")[0]["notes"])
    assert f"{WEAKENED_NOTE}: seed 1: SCALESTUDY_FOREIGN_CPU_MAX=off" in notes
    assert f"{WEAKENED_NOTE}: seed 2: made from a checkout with uncommitted changes" in notes
    fd = figure_data("weak_scaling", tables, study)
    assert any(WEAKENED_NOTE in str(n) and "audit --strict" in str(n) for n in fd.notes), fd.notes
    assert any(WEAKENED_NOTE in str(r.get("note")) for r in fd.rows)


def test_audit_passes_but_strict_refuses_naming_each_run(study, monkeypatch):
    assert audit(study, figures=False, claims=False) == []
    problems = audit(study, figures=False, claims=False, strict=True)
    assert len(problems) == 2, problems
    assert any(INTEGRITY_SPEC.replace(seed=1).run_id in p and "SCALESTUDY_FOREIGN_CPU_MAX=off" in p for p in problems)
    assert any(INTEGRITY_SPEC.replace(seed=2).run_id in p and "uncommitted" in p for p in problems)
    write_claims(agg.load_tables(study.tables_dir), study, study.figures_dir)
    monkeypatch.setattr("scalestudy.spec.studies.load_study", lambda name, root=".": study)
    assert analysis_cli("audit", "--study", "t", "--no-figures") == 0
    assert analysis_cli("audit", "--study", "t", "--no-figures", "--strict") == 1


def test_a_claim_over_a_weakened_seed_says_so(tmp_path):
    from test_analysis_claims import runs, tables

    from scalestudy.analysis import claims

    rows = runs(world=8, values=[1.0, 1.0, 1.0], experiments=("power",), tokens_per_joule=[10.0, 10.1, 9.9]) + runs(
        world=64, values=[1.0, 1.0, 1.0], experiments=("power",), tokens_per_joule=[8.0, 8.1, 7.9]
    )
    rows[4]["weakened"] = ["made from a checkout with uncommitted changes (commit 0123456789ab)"]
    c7 = {r["id"]: r for r in claims.evaluate(tables(tmp_path, rows))}["C7"]
    assert f"1 seed {WEAKENED_NOTE} (made from a checkout with uncommitted changes)" in c7["reason"], c7["reason"]
    assert "audit --strict" in c7["reason"]


def test_a_rank_figure_says_how_many_configurations_were_made_with_a_check_weakened():
    from scalestudy.analysis.figures.rank_grid import weakened_note

    cfgs = [{"weakened": "made from a checkout with uncommitted changes (commit 0123456789ab)"}, {"weakened": ""}]
    assert weakened_note(cfgs) == (
        f"{WEAKENED_NOTE}: 1 of the 2 configurations drawn (made from a checkout with uncommitted changes); "
        "rank_configs.csv says which; scalestudy audit --strict refuses them."
    )
    assert weakened_note([{"weakened": None}]) is None
