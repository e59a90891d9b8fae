"""Fault injection, issue 26 (analysis side): the one-sided outlier rule, exclusions in every
summary, figure CSV and claim, a run of another study or configuration refused, the published
images audited, and damaged raw-log files (a broken gzip, a link out of the run, a FIFO, a full
disk while the tables are written) stopped with one sentence naming the file."""

import dataclasses
import json
import os
import shutil

import pytest
from analysis_fixtures import INTEGRITY_SPEC, analysis_cli, integrity_seeds, make_study

from scalestudy.analysis import aggregate as agg
from scalestudy.analysis import claims
from scalestudy.analysis.audit import audit
from scalestudy.measure.csv_format import read_csv_rows
from scalestudy.cli import analysis as cli_analysis
from scalestudy.measure import rawlog

SPEC = INTEGRITY_SPEC
cli = analysis_cli


def build(root, step_times=(0.5, 0.51, 0.52), contaminated=(), figures=("weak_scaling",), aggregate=True, **kw):
    raw = root / "data" / "t" / "raw"
    runs = integrity_seeds(raw, step_times)
    for seed in contaminated:
        path = raw / runs[seed].spec.run_id / "status.json"
        st = json.loads(path.read_text())
        st["load"] = {"contaminated": True, "reason": "a process of another user (pid 4242) used 1.9 CPU-s"}
        rawlog.write_status(path, st)
    study = dataclasses.replace(make_study(root, runs, **kw), figures=tuple(figures))
    if aggregate:
        agg.aggregate(study)
    return study


def run_dir(study, seed=0):
    return study.raw_dir / SPEC.replace(seed=seed).run_id


def summary(study) -> dict:
    (row,) = read_csv_rows(study.tables_dir / "summary.csv")
    return row


# ---- 1. the outlier rule ---------------------------------------------------------------
def test_the_rule_is_one_sided_and_never_drops_the_fastest_seed():
    assert agg.seed_outliers({"a": 100.0, "b": 75.0, "c": 74.0}).keys() == {"b", "c"}  # two slowed, one clean
    assert agg.seed_outliers({"a": 100.0, "b": 97.0, "c": 96.0}) == {}  # within the GPU default 5%
    assert agg.seed_outliers({"a": 100.0, "b": 95.0, "c": 91.0}, 0.10) == {}
    assert agg.seed_outliers({"a": 100.0, "b": 95.0, "c": 80.0}, 0.10).keys() == {"c"}
    assert agg.seed_outliers({"a": 100.0, "b": 100.0}) == {}
    assert agg.seed_outliers({"a": 100.0}) == {}
    # a fast seed is never an outlier, however far from the others
    assert "a" not in agg.seed_outliers({"a": 150.0, "b": 100.0, "c": 101.0})
    # the default follows the device kind's measured run-to-run noise
    assert agg.default_slowdown("cpu") == 0.35 and agg.default_slowdown("cuda") == 0.05
    runs = [
        {"config_id": "c", "run_id": f"r{i}", "status": "ok", "device": "cpu", "tokens_per_s": v}
        for i, v in enumerate((100.0, 75.0, 60.0))
    ]
    agg.flag_outliers(runs)
    assert [bool(r["outlier"]) for r in runs] == [False, False, True]


def test_two_slowed_seeds_leave_the_point_insufficient_not_a_slow_mean(tmp_path):
    s = build(tmp_path, step_times=(0.5, 0.66, 0.7))  # seeds 1 and 2 slowed by 24% and 29%
    row = summary(s)
    assert row["status"] == agg.INSUFFICIENT and row["tokens_per_s_mean"] == "" and row["n_left_out"] == "2"
    assert "seed 1 (" in row["left_out"] and "seed 2 (" in row["left_out"] and "below the fastest" in row["left_out"]
    runs = {r["seed"]: r for r in read_csv_rows(s.tables_dir / "runs.csv")}
    assert runs["0"]["outlier"] == "" and runs["1"]["outlier"] and runs["2"]["outlier"]


def test_contaminated_seeds_never_enter_a_summary(tmp_path):
    s = build(tmp_path, contaminated=(1, 2))  # the case: two seeds beside a neighbour, one clean
    row = summary(s)
    assert row["status"] == agg.INSUFFICIENT and row["tokens_per_s_mean"] == ""
    assert "kept" not in row["notes"] and "pid 4242" in row["left_out"]
    s = build(tmp_path / "b", contaminated=(1,))
    row = summary(s)
    assert row["status"] == "ok" and row["tokens_per_s_n"] == "2" and row["n_left_out"] == "1"
    assert row["run_ids"].split(";") == [SPEC.replace(seed=0).run_id, SPEC.replace(seed=2).run_id]


def test_outlier_slowdown_is_a_study_setting(tmp_path):
    s = build(tmp_path, step_times=(0.5, 0.51, 0.54))  # 7.4% below the fastest: beyond the GPU default 5%
    assert summary(s)["n_left_out"] == "1" and agg.outlier_slowdown(s) is None
    assert "outlier_slowdown 5%" in summary(s)["left_out"]
    s = dataclasses.replace(s, outlier_slowdown=0.08)  # a typed field of the study (spec.studies.Study)
    assert agg.outlier_slowdown(s) == 0.08
    agg.aggregate(s)
    assert summary(s)["n_left_out"] == "0" and summary(s)["tokens_per_s_n"] == "3"
    schema = json.loads((agg.Path(__file__).parents[2] / "workflow/schemas/study.schema.json").read_text())
    assert "outlier_slowdown" in schema["properties"]


# ---- 2. exclusions everywhere ------------------------------------------------------------
def test_figure_csv_names_left_out_seeds_and_only_the_runs_behind_the_value(tmp_path):
    from scalestudy.analysis.figures import figure_data, render

    s = build(tmp_path, step_times=(0.5, 0.51, 0.7))
    tables = agg.load_tables(s.tables_dir)
    (p,) = render("weak_scaling", s, tables, tmp_path / "f", formats=("csv",))
    rows = read_csv_rows(p)
    assert rows
    out_id = SPEC.replace(seed=2).run_id
    for r in rows:
        assert out_id not in r["run_ids"].split(";") and "left out: seed 2" in r["note"], r
    assert any(n.startswith("left out: 1 seed") for n in figure_data("weak_scaling", tables, s).notes)


def test_every_claim_lists_the_seeds_left_out(tmp_path):
    from test_analysis_claims import runs, tables

    rows = runs(world=8, values=[1.0, 1.0, 1.0], experiments=("power",), tokens_per_joule=[10.0, 10.1, 9.9]) + runs(
        world=64, values=[1.0, 1.0, 1.0], experiments=("power",), tokens_per_joule=[8.0, 8.1, 7.9]
    )
    rows[2]["contaminated"] = True
    c7 = {r["id"]: r for r in claims.evaluate(tables(tmp_path, rows))}["C7"]
    assert len(c7["left_out"]) == 1 and "seed 2" in c7["left_out"][0] and "contaminated" in c7["left_out"][0]
    assert "1 seed left out" in c7["reason"] and rows[2]["run_id"] not in c7["run_ids"]
    assert "left_out" in claims.CLAIM_COLUMNS


# ---- 3. identity -------------------------------------------------------------------------
def _rewrite_run_json(d, **changes):
    """A consistent raw log (checksums and seal redone) whose run.json says something else."""
    run = json.loads((d / "run.json").read_text())
    run.update(changes)
    rawlog.atomic_write_json(d / "run.json", run)
    st = json.loads((d / "status.json").read_text())
    st["files_sha256"]["run.json"] = rawlog.sha256_file(d / "run.json")
    rawlog.write_status(d / "status.json", st)


@pytest.mark.parametrize(
    "field,value", [("hardware", "H200 SXM, another study"), ("study", "other"), ("config_id", "tiny-other-0000000000")]
)
def test_a_run_of_another_study_or_configuration_is_refused(tmp_path, field, value, capsys):
    s = build(tmp_path)
    d = run_dir(s, 1)
    _rewrite_run_json(d, **{field: value})
    with pytest.raises(rawlog.RawLogError, match=f"holds {field} '{value}'"):
        agg.aggregate(s)
    problems = audit(s, figures=False, claims=False)
    assert any(str(d / "run.json") in p and field in p for p in problems), problems


def test_a_run_json_that_names_its_own_study_and_hardware_is_read(tmp_path):
    s = build(tmp_path)
    _rewrite_run_json(run_dir(s, 0), study=s.name, hardware=s.hardware)
    agg.aggregate(s)  # and older raw logs without them (the others here) still aggregate
    assert summary(s)["tokens_per_s_n"] == "3"


# ---- 4. the audit covers the images ------------------------------------------------------
def test_a_swapped_or_stale_image_fails_the_audit(tmp_path):
    from scalestudy.analysis.figures import render

    s = build(tmp_path, figures=("weak_scaling", "power"))
    for name in s.figures:
        render(name, s)
    manifest = {}
    assert audit(s, claims=False, manifest=manifest) == []  # drawn again by the audit: the same bytes
    png, pdf = s.figures_dir / "power.png", s.figures_dir / "weak_scaling.pdf"
    assert manifest[str(png)] == rawlog.sha256_file(png) and str(s.figures_dir / "weak_scaling.csv") in manifest
    shutil.copy(s.figures_dir / "weak_scaling.png", png)  # one figure's image over another's
    # a stale image: drawn from something else than its CSV says (here another hardware line)
    render("weak_scaling", dataclasses.replace(s, hardware="another GPU"), out_dir=tmp_path / "stale", formats=("pdf",))
    shutil.copy(tmp_path / "stale" / "weak_scaling.pdf", pdf)
    problems = audit(s, claims=False)
    assert len(problems) == 2, problems
    assert any(p.startswith(f"{png}: differs from the image this code draws from power.csv") for p in problems)
    assert any(p.startswith(f"{pdf}: differs from the image this code draws from weak_scaling.csv") for p in problems)


# ---- 5. damaged input as a sentence -------------------------------------------------------
def _gzipped(study, seed=1):
    d = run_dir(study, seed)
    rawlog.compress_run(d)
    agg.aggregate(study)
    return d / "metrics.jsonl.gz"


def _one_sentence(capsys, path) -> str:
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "Traceback" not in err and "\n" not in err, err
    return err


@pytest.mark.parametrize("damage", ["truncated", "crc"])
def test_a_damaged_gzip_stops_audit_aggregate_and_provenance_naming_it(tmp_path, damage, capsys, monkeypatch):
    s = build(tmp_path)
    gz = _gzipped(s)
    data = gz.read_bytes()
    if damage == "truncated":
        gz.write_bytes(data[: len(data) // 2])
    else:  # the CRC-32 in the trailer
        gz.write_bytes(data[:-8] + bytes(b ^ 0xFF for b in data[-8:-4]) + data[-4:])
    problems = audit(s, figures=False, claims=False)
    assert any(p.startswith(f"{gz}: a damaged gzip file") for p in problems), problems
    with pytest.raises(rawlog.RawLogError, match="damaged gzip"):
        agg.build_tables(s)
    _cli_study(monkeypatch, s)
    capsys.readouterr()
    assert cli("aggregate", "--study", "t") == 2
    assert "damaged gzip" in _one_sentence(capsys, gz)
    assert cli("provenance", str(s.tables_dir / "runs.csv"), "--raw-dir", str(s.raw_dir)) == 1
    out = capsys.readouterr()
    assert f"PROBLEM {gz}: a damaged gzip file" in out.out and "Traceback" not in out.err


def _cli_study(monkeypatch, s):
    """`scalestudy aggregate --study t` loads this study."""
    monkeypatch.setattr(cli_analysis, "_study", lambda args: s)


def test_a_symlink_out_of_the_run_is_never_read(tmp_path, capsys):
    s = build(tmp_path)
    d = run_dir(s, 1)
    outside = tmp_path / "elsewhere.jsonl"
    shutil.move(d / "metrics.jsonl", outside)
    os.symlink(outside, d / "metrics.jsonl")  # the same bytes: the checksum alone would pass
    problems = audit(s, figures=False, claims=False)
    assert any(p.startswith(f"{d / 'metrics.jsonl'}: a symbolic link out of its run directory") for p in problems)
    with pytest.raises(rawlog.RawLogError, match="symbolic link out of its run directory"):
        agg.build_tables(s)
    capsys.readouterr()
    assert cli("provenance", str(s.tables_dir / "runs.csv"), "--raw-dir", str(s.raw_dir)) == 1
    assert "symbolic link out of its run directory" in capsys.readouterr().out


@pytest.mark.timeout(20)
@pytest.mark.parametrize("member", ["metrics.jsonl", "status.json"])
def test_a_fifo_in_a_run_does_not_hang_anything(tmp_path, member, capsys):
    s = build(tmp_path)
    d = run_dir(s, 1)
    (d / member).unlink()
    os.mkfifo(d / member)
    problems = audit(s, figures=False, claims=False)
    assert any(p.startswith(f"{d / member}: not a regular file (a FIFO") for p in problems), problems
    with pytest.raises(rawlog.RawLogError, match="FIFO"):
        agg.build_tables(s)
    capsys.readouterr()
    assert cli("provenance", str(s.tables_dir / "runs.csv"), "--raw-dir", str(s.raw_dir)) == 1
    assert "FIFO" in capsys.readouterr().out


def test_a_full_disk_while_aggregating_leaves_the_tables_as_they_were(tmp_path, monkeypatch, capsys):
    import errno

    s = build(tmp_path, step_times=(0.5, 0.51, 0.52))
    before = {p.name: p.read_bytes() for p in s.tables_dir.iterdir()}
    (run_dir(s, 0).parent / "unplanned-run").mkdir()  # the unplanned table changes too
    (run_dir(s, 0).parent / "unplanned-run" / "run.json").write_text("{}")
    real, calls = rawlog.atomic_write_bytes, []

    def full(path, data):
        calls.append(path)
        if len(calls) == 2:  # runs.csv staged, summary.csv not
            raise rawlog.disk_error(OSError(errno.ENOSPC, "No space left on device"), path)
        return real(path, data)

    monkeypatch.setattr(rawlog, "atomic_write_bytes", full)
    with pytest.raises(OSError, match="summary.csv: the disk is full") as e:
        agg.aggregate(s)
    assert e.value.errno == errno.ENOSPC
    assert {p.name: p.read_bytes() for p in s.tables_dir.iterdir()} == before  # nothing half-written, nothing staged
    calls.clear()
    _cli_study(monkeypatch, s)
    capsys.readouterr()
    assert cli("aggregate", "--study", "t") == 2
    assert "the disk is full" in _one_sentence(capsys, s.tables_dir / "summary.csv")


def test_a_run_directory_that_is_a_link_is_never_read(tmp_path):
    s = build(tmp_path)
    d = run_dir(s, 2)
    shutil.move(d, tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", d)
    with pytest.raises(rawlog.RawLogError, match="a symbolic link"):
        agg.build_tables(s)
    problems = audit(s, figures=False, claims=False)
    assert any(p.startswith(f"{d}: a symbolic link") for p in problems), problems
