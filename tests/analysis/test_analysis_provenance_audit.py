"""The analysis commands end to end on a synthetic study: aggregate, figure, claims, provenance, audit."""

import argparse
import json

import pytest
from analysis_fixtures import GIT_COMMIT, RICH_PLAN, build_rich_study, rich_specs

from scalestudy.analysis.audit import audit
from scalestudy.analysis.provenance import provenance
from scalestudy.cli import analysis as cli_analysis
from scalestudy.measure import rawlog


def cli(*argv) -> int:
    parser = argparse.ArgumentParser(prog="scalestudy")
    cli_analysis.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    s = build_rich_study(root)
    mp = pytest.MonkeyPatch()
    mp.setattr("scalestudy.spec.studies.load_study", lambda name, root=".": s)
    assert cli("aggregate", "--study", "rich") == 0
    assert cli("figure", "all", "--study", "rich") == 0
    assert cli("claims", "--study", "rich") == 0
    yield s
    mp.undo()


def test_outputs_exist(study):
    assert (study.tables_dir / "runs.csv").exists() and (study.figures_dir / "claims.md").exists()
    assert (study.figures_dir / "power.pdf").exists() and (study.figures_dir / "tp_pp_grid.png").exists()


def test_provenance_of_a_figure_row(study):
    spec = rich_specs()["fsdp2"]
    prov = provenance(study.figures_dir / "weak_scaling.pdf")
    assert prov["table"].endswith("weak_scaling.csv") and prov["run_id_column"] == "run_ids"
    row = next(r for r in prov["rows"] if r["values"]["x"] == "2" and r["values"]["panel"] == "MFU (%)")
    assert set(row["run_ids"]) == {spec.replace(seed=0).run_id, spec.replace(seed=1).run_id}
    run = prov["runs"][spec.run_id]
    files = {f["path"]: f for f in run["files"]}
    assert {"run.json", "metrics.jsonl", "traces/rank-00000.json.gz", "status.json"} <= set(files)
    m = files["metrics.jsonl"]
    assert m["ok"] and m["sha256_now"] == m["sha256_recorded"] == rawlog.sha256_file(
        study.raw_dir / spec.run_id / "metrics.jsonl"
    )
    assert run["git"]["commit"] == GIT_COMMIT and run["spec"]["model"] == "tiny"
    env = run["environment"]
    assert env["python"] == "3.11.9" and env["nccl"] == "2.26.2" and env["slurm"]["job_id"] == "4242"
    assert env["devices"]["names"] == ["NVIDIA H100 80GB HBM3"] and env["hosts"]
    assert prov["problems"] == []


def test_provenance_of_tables_and_claims(study, capsys):
    runs = provenance(study.tables_dir / "runs.csv")
    assert runs["run_id_column"] == "run_id" and len(runs["rows"]) == len(study.runs)
    claims = provenance(study.figures_dir / "claims.md")
    c6 = next(r for r in claims["rows"] if r["values"]["id"] == "C6")
    assert c6["run_ids"] and all(rid.startswith("collectives-") for rid in c6["run_ids"])
    assert cli("provenance", str(study.figures_dir / "power.csv"), "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] and out["problems"] == []
    assert cli("provenance", str(study.figures_dir / "power.png")) == 0
    assert "sha256" not in capsys.readouterr().err


def test_audit_passes_then_fails_on_one_changed_byte(study, tmp_path, capsys):
    import shutil
    from dataclasses import replace

    from scalestudy.analysis import audit as audit_mod

    # a copy of the study (the module's study stays as made), byte for byte: `scalestudy audit` of it
    # calls audit(copy); what that call returns is the check of the study, and the command's exit
    # code the check of the command (one full audit, every image drawn again, for both)
    root = tmp_path / "copy"
    shutil.copytree(study.root, root)
    copy = replace(study, root=root)
    returned = []

    def spy(s, **kw):
        returned.append((s, audit(s, **kw)))
        return returned[-1][1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("scalestudy.spec.studies.load_study", lambda name, root=".": copy)
        mp.setattr(audit_mod, "audit", spy)
        assert cli("audit", "--study", "rich") == 0
    assert [(s is copy, problems) for s, problems in returned] == [(True, [])]
    victim = copy.raw_dir / rich_specs()["tp2"].run_id / "metrics.jsonl"
    data = bytearray(victim.read_bytes())
    start = data.index(b'"phase": "measured"')
    i = data.index(b'"step_time_s": ', start) + len(b'"step_time_s": ')
    data[i + 2] = ord("9") if data[i + 2] != ord("9") else ord("8")  # 0.45 -> 0.95: still valid JSON
    victim.write_bytes(bytes(data))
    # one figure that the changed run feeds (every image passed the audit of the copy above):
    # tables, claims and that figure are rebuilt and compared
    assert "strong_scaling" in RICH_PLAN["tp2"][0]
    problems = audit(replace(copy, figures=("strong_scaling",)))
    assert any(str(victim) in p and "sha256 differs" in p for p in problems), problems
    assert any("runs.csv: differs" in p for p in problems), problems
    assert any("strong_scaling.csv: differs" in p for p in problems), problems
    table = copy.tables_dir / "summary.csv"
    table.write_text(table.read_text() + "\n")
    assert any(str(table) in p for p in audit(copy, figures=False))


def test_cli_exit_codes_on_raw_log_errors(study, tmp_path, monkeypatch, capsys):
    import shutil
    from dataclasses import replace

    root = tmp_path / "broken"
    shutil.copytree(study.root, root)
    broken = replace(study, root=root)
    monkeypatch.setattr("scalestudy.spec.studies.load_study", lambda name, root=".": broken)
    victim = broken.raw_dir / study.runs[0].spec.run_id
    (victim / "status.json").unlink()
    assert cli("aggregate", "--study", "rich") == 2
    assert str(victim) in capsys.readouterr().err
    assert cli("audit", "--study", "rich") == 1
    assert str(victim) in capsys.readouterr().out
    assert cli("provenance", str(tmp_path / "nowhere.csv")) == 2


def test_audit_reports_figures_and_claims_made_by_other_code(study, monkeypatch):
    from scalestudy.analysis import audit as audit_mod
    from scalestudy.measure.code_version import code_version

    made_by = code_version()
    assert audit_mod.made_by_other_code(study.figures_dir) == []
    monkeypatch.setattr("scalestudy.measure.code_version.code_version", lambda: "scalestudy 9+analysis.000000000000")
    problems = audit_mod.made_by_other_code(study.figures_dir)
    assert (
        f"{study.figures_dir / 'weak_scaling.png'}: made by {made_by}, not by this code "
        "(scalestudy 9+analysis.000000000000): rebuild it" in problems
    ), problems
    assert any("weak_scaling.csv" in p for p in problems) and any("claims.md" in p for p in problems)


def test_audit_reports_a_model_validation_figure_made_by_another_performance_model(tmp_path):
    # model_validation draws the performance model's predictions of the external ledger; the model
    # is not analysis code, so the figure and its ledger CSV record the model's version as well
    import shutil
    from dataclasses import replace
    from pathlib import Path

    from figure_fixtures import write_ledger

    from scalestudy.analysis.audit import made_by_other_code
    from scalestudy.measure.code_version import analysis_sources, model_inputs, model_version
    from scalestudy.analysis.figures import model_validation
    from scalestudy.perfmodel import external

    repo = Path(__file__).resolve().parents[2]
    root, figs = tmp_path / "checkout", tmp_path / "figures"
    for rel in model_inputs():  # a checkout holding what the ledger's predictions read
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if (repo / rel).is_dir():
            shutil.copytree(repo / rel, root / rel)
        else:
            shutil.copy(repo / rel, root / rel)
    _, rows = external.load_ledger(root)
    rows = [
        replace(
            r,
            published_tokens_per_s_per_device=1000.0 * (i + 1),
            predicted=1100.0 * (i + 1),
            low=900.0 * (i + 1),
            high=1300.0 * (i + 1),
        )
        for i, r in enumerate(rows[:3])
    ]
    figs.mkdir()
    ledger = figs / model_validation.LEDGER_FILE
    external.write_csv(rows, ledger, root)
    model_validation.render(ledger, figs / "model_validation")
    assert made_by_other_code(figs, root) == []

    made_by = model_version(root)
    (root / external.LEDGER).write_text((root / external.LEDGER).read_text() + "# one more published row\n")
    assert model_version(root) != made_by
    problems = made_by_other_code(figs, root)
    assert sorted(p.split(":")[0] for p in problems) == sorted(
        str(figs / n) for n in ("model_validation.csv", "model_validation.png", model_validation.LEDGER_FILE)
    )
    assert any(p.startswith(f"{ledger}: made by {made_by}, not by this code ({model_version(root)})") for p in problems)

    write_ledger(ledger)  # a ledger that names no model version: its figure is never current
    model_validation.render(ledger, figs / "model_validation")
    assert any(
        "model_validation.png: made by " in p and "+model.unrecorded" in p for p in made_by_other_code(figs, root)
    )
    # the model stays out of the analysis code's version
    assert not any("perfmodel" in p.parts for p in analysis_sources())


def test_provenance_never_follows_a_linked_run_directory(study, tmp_path):
    """As the aggregation and the audit refuse it: a run directory replaced by a link to a copy."""
    import shutil
    from dataclasses import replace

    root = tmp_path / "copy"
    shutil.copytree(study.root, root)
    copy = replace(study, root=root)
    spec = rich_specs()["fsdp2"]
    real = copy.raw_dir / spec.run_id
    moved = tmp_path / "elsewhere"
    shutil.move(str(real), moved)
    real.symlink_to(moved, target_is_directory=True)
    prov = provenance(copy.figures_dir / "weak_scaling.pdf")
    run = prov["runs"][spec.run_id]
    assert "files" not in run and any("a symbolic link" in p and "never through a link" in p for p in prov["problems"])
