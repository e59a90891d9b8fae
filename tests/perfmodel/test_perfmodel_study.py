"""A prediction study end to end: predicted raw logs -> tables -> figures -> claims, marked
predicted throughout; provenance reaches the calibration runs; audit passes, and flags a
changed calibration file (stale predictions)."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from scalestudy.analysis import aggregate as agg
from scalestudy.analysis.audit import audit
from scalestudy.analysis.claims import claims
from scalestudy.measure.csv_format import read_csv_rows
from scalestudy.analysis.figures import render
from scalestudy.analysis.provenance import provenance
from scalestudy.perfmodel.study import predict_study
from scalestudy.spec import catalog
from scalestudy.spec.studies import load_study

REPO = Path(__file__).resolve().parents[2]
CAL_RUNS = ("llama2-7b-n1x1-r1s1t1p1-gb2-788fb17cca-seed0", "llama2-7b-n1x1-r1s1t1p1-gb2-01be5fe6d4-seed0")

STUDY = {
    "description": "a small prediction study for the tests",
    "hardware": "PREDICTED for H100 (test)",
    "launch": False,
    "device_memory_gib": 80,
    "prediction": {
        "cluster": "h100-paper",
        "calibration": ["data/h200-reference/raw"],
        "variants": {"a100-paper": ["hardware_generations"]},
    },
    "seeds": [0],
    "defaults": {"model": "llama2-7b", "device": "cuda", "seq_len": 4096, "procs_per_node": 8, "micro_batch": 2},
    "experiments": [
        {
            "name": "weak_scaling",
            "also": ["kernel_breakdown", "power", "hardware_generations"],
            "set": {"global_batch_per_gpu": 2},
            "grid": {"nodes": [16, 256]},
        },
        {
            "name": "weak_scaling",
            "set": {"global_batch_per_gpu": 2, "dp_shard": 8, "dp_replicate": "rest"},
            "grid": {"nodes": [32, 256]},
        },
        {
            "name": "weak_scaling",
            "set": {"global_batch_per_gpu": 2, "pp_microbatches": "fill"},
            "grid": {"nodes": [32, 256]},
            "layouts": [{"tp": 2}, {"pp": 2}],
        },
        {"name": "model_sizes", "set": {"global_batch_per_gpu": 2, "model": "llama2-70b"}, "grid": {"nodes": [1]}},
    ],
    "collectives": {
        "ops": ["all_reduce", "all_gather"],
        "min_bytes": "1M",
        "max_bytes": "64M",
        "step_factor": 8,
        "dtype": "float32",
        "device": "cuda",
        "procs_per_node": 8,
        "nodes": [1, 4],
    },
}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    for rid in CAL_RUNS:
        shutil.copytree(REPO / "data/h200-reference/raw" / rid, root / "data/h200-reference/raw" / rid)
    (root / "workflow/studies").mkdir(parents=True)
    (root / "workflow/studies/mini-model.yaml").write_text(yaml.safe_dump(STUDY))
    study = load_study("mini-model", root)
    predict_study(study, root=root)
    tables = agg.build_tables(study)
    agg.write_tables(tables, study.tables_dir)
    loaded = agg.load_tables(study.tables_dir)
    claims(study, loaded)
    for name in (
        "weak_scaling",
        "hardware_generations",
        "collectives_bandwidth",
        "power",
        "kernel_breakdown",
        "model_sizes",
        "strong_scaling",
        "tp_pp_grid",
        "claim_sensitivity",
    ):
        render(name, study, loaded, formats=("csv", "png"))
    return root, study


def test_predicted_runs_and_variants(project):
    root, study = project
    assert study.prediction["cluster"] == "h100-paper"
    variants = [p for p in study.runs if p.variant]
    assert len(variants) == 2 and all(p.run_id.endswith("--a100-paper") for p in variants)
    run = json.loads((study.raw_dir / variants[0].run_id / "run.json").read_text())
    assert run["kind"] == "predicted" and run["provenance"]["devices"]["names"] == ["NVIDIA A100-SXM4-80GB"]
    cal = run["provenance"]["calibration"]
    assert {r["run_id"] for r in cal["runs"]} == set(CAL_RUNS)
    assert all(not r["raw_dir"].startswith("/") for r in cal["runs"])  # relative to the project root
    oom = [p for p in study.runs if p.spec.model == "llama2-70b"][0]
    assert json.loads((study.raw_dir / oom.run_id / "status.json").read_text())["status"] == "oom"


def test_tables_mark_predictions(project):
    root, study = project
    summary = read_csv_rows(study.tables_dir / "summary.csv")
    assert {r["kind"] for r in summary} == {"predicted"}
    ok = [r for r in summary if r["status"] == "ok"]
    for r in ok:
        assert "PREDICTED" in r["notes"]
        lo, mean, hi = (float(r[f"tokens_per_s_{k}"]) for k in ("ci95_low", "mean", "ci95_high"))
        assert lo <= mean <= hi and lo < hi  # the model's band
    assert (study.tables_dir / "predictions.csv").exists()
    runs = read_csv_rows(study.tables_dir / "runs.csv")
    assert all(r["kind"] == "predicted" for r in runs)
    assert any(r["exposed_comm_kind"].startswith("predicted") for r in runs if r["status"] == "ok")


def test_figures_and_claims_say_predicted(project):
    root, study = project
    rows = read_csv_rows(study.figures_dir / "weak_scaling.csv")
    assert rows and all(r["note"].startswith("predicted") for r in rows)
    coll = read_csv_rows(study.figures_dir / "collectives_bandwidth.csv")
    assert coll and all(r["note"].startswith("predicted") for r in coll)
    hw = read_csv_rows(study.figures_dir / "hardware_generations.csv")
    assert {r["series"] for r in hw} == {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}
    cl = {r["id"]: r for r in read_csv_rows(study.figures_dir / "claims.csv")}
    for cid in ("C1", "C2", "C3", "C4", "HSDP-2048"):
        assert cl[cid]["reason"].startswith("PREDICTED"), cid
        assert cl[cid]["n_seeds"] == "predicted"
        assert float(cl[cid]["ours_ci95_low"]) <= float(cl[cid]["ours"]) <= float(cl[cid]["ours_ci95_high"])
    assert "PREDICTED" in (study.figures_dir / "claims.md").read_text()


def test_provenance_reaches_calibration(project):
    root, study = project
    prov = provenance(study.figures_dir / "weak_scaling.csv")
    assert not prov["problems"]
    run = next(iter(prov["runs"].values()))
    assert run["kind"] == "predicted"
    assert {c["run_id"] for c in run["calibration"]} == set(CAL_RUNS)
    assert all(f["ok"] for c in run["calibration"] for f in c["files"] if f["ok"] is not None)


def test_audit_passes_then_flags_stale_predictions(project):
    root, study = project
    # the figures were drawn as csv and png only: the audit misses their pdf, nothing else
    assert all(
        p.endswith(".pdf: missing (figure " + p.split("/")[-1].split(".")[0] + " was not drawn)") for p in audit(study)
    )
    run_json = root / "data/h200-reference/raw" / CAL_RUNS[1] / "run.json"
    original = run_json.read_text()
    try:
        run_json.write_text(original + " ")
        problems = audit(study, figures=False)
        assert any("stale" in p or "sha256" in p for p in problems)
    finally:
        run_json.write_text(original)
    assert audit(study, figures=False) == []


def test_rank_shares_are_keyed_by_the_gpu_kind_the_study_stands_in_for(tmp_path):
    from types import SimpleNamespace

    from scalestudy.perfmodel.rank_shares import load_shares, share_key, stands_in_for

    shares = load_shares("paper-rank", REPO)
    assert shares and {k[0] for k in shares} == {"NVIDIA H100 80GB HBM3"}
    some = next(iter(shares))
    assert share_key(load_study("paper-rank", REPO).runs[0].spec, "h100-sxm")[0] == some[0]  # aliases resolve
    with pytest.raises(ValueError, match="stands_in_for"):
        stands_in_for(SimpleNamespace(name="bare", source=tmp_path / "bare.yaml", stands_in_for=None))


def test_a_share_measured_on_another_gpu_is_carried_by_the_models_kernel_time_ratio():
    from dataclasses import replace as dc_replace

    from scalestudy.perfmodel.cluster import load_cluster
    from scalestudy.perfmodel.predict import cached_calibration, predict, share_carry
    from scalestudy.perfmodel.rank_shares import load_shares, measured_on, share_key

    assert measured_on(load_study("paper-rank", REPO)) == "NVIDIA H200"
    cal = cached_calibration("data/h200-reference/raw", REPO)
    h100 = load_cluster("h100-paper", REPO)
    shares = load_shares("paper-rank", REPO)
    spec = next(
        p.spec
        for p in load_study("paper-model", REPO).runs
        if not p.variant and share_key(p.spec, h100.gpu) in shares and p.spec.world_size == 128
    )
    share = shares[share_key(spec, h100.gpu)]
    carry = share_carry(spec, h100, cal, share)
    assert 1.05 < carry < 1.3  # same bf16 peak, HBM 3.35 against 4.8 TB/s
    p = predict(spec, h100, cal, band=False, shares=shares)
    # the share ran without real collectives: it meets the computation before the overlap slowdown
    assert p.values["compute_s"] - p.values["overlap_slowdown_s"] == pytest.approx(share.compute_s * carry, rel=0.05)
    same = {share_key(spec, h100.gpu): dc_replace(share, measured_on=h100.gpu)}
    assert share_carry(spec, h100, cal, same[share_key(spec, h100.gpu)]) == 1.0
    assert predict(spec, h100, cal, band=False, shares=same).values["compute_s"] < p.values["compute_s"]


def test_a_share_with_a_known_artefact_is_used_and_says_so(tmp_path):
    from dataclasses import replace as dc_replace

    from scalestudy.perfmodel.cluster import load_cluster
    from scalestudy.perfmodel.predict import cached_calibration, predict
    from scalestudy.perfmodel.rank_shares import CAVEAT_PREFIX, load_shares, share_key

    # paper-rank as committed, with one known artefact declared (its own list is empty since the remeasure)
    data = yaml.safe_load((REPO / "workflow/studies/paper-rank.yaml").read_text())
    artefact = next(
        p.run_id for p in load_study("paper-rank", REPO).runs if p.spec.world_size == 2048 and p.spec.layout == "fsdp"
    )
    reason = "host-bound in this test (see data/paper-rank/README.md)"
    data["known_artefacts"] = {artefact: reason}
    (tmp_path / "workflow/studies").mkdir(parents=True)
    (tmp_path / "workflow/studies/paper-rank.yaml").write_text(yaml.safe_dump(data))
    (tmp_path / "data/paper-rank/tables").mkdir(parents=True)
    shutil.copy(REPO / "data/paper-rank/tables/rank_configs.csv", tmp_path / "data/paper-rank/tables")
    assert load_study("paper-rank", tmp_path).known_artefacts == {artefact: reason}
    shares = load_shares("paper-rank", tmp_path)
    caveated = [s for s in shares.values() if s.caveat]
    assert [s.run_ids for s in caveated] == [(artefact,)] and reason in caveated[0].caveat
    cal = cached_calibration("data/h200-reference/raw", REPO)
    h100 = load_cluster("h100-paper", REPO)
    spec = next(
        p.spec
        for p in load_study("paper-model", REPO).runs
        if not p.variant and shares.get(share_key(p.spec, h100.gpu)) is caveated[0]
    )
    p = predict(spec, h100, cal, band=False, shares=shares)
    clean = predict(
        spec, h100, cal, band=False, shares={**shares, share_key(spec, h100.gpu): dc_replace(caveated[0], caveat="")}
    )
    assert p.values == clean.values  # still taken: the caveat travels, the number stays
    notes = [n for n in p.notes if n.startswith(CAVEAT_PREFIX)]
    assert len(notes) == 1 and artefact in notes[0] and reason in notes[0]
    assert not any(n.startswith(CAVEAT_PREFIX) for n in clean.notes)
    assert CAVEAT_PREFIX in p.sources["inputs_from"]["compute"]
    assert CAVEAT_PREFIX not in clean.sources["inputs_from"]["compute"]


def test_a_share_with_the_gpus_busy_time_gives_that_as_its_computation():
    """Where every stage of a configuration has the GPU's busy time (harness/device_busy.py), the
    prediction takes it, not the host-bound wall step, and its inputs and series say so."""
    from scalestudy.measure.csv_format import read_csv_rows, split_list
    from scalestudy.perfmodel.cluster import load_cluster
    from scalestudy.perfmodel.predict import cached_calibration, predict
    from scalestudy.perfmodel.rank_shares import BUSY, WALL, load_shares, share_key
    from scalestudy.spec.rank_share import MEASURED_BUSY_SERIES, measured_input_names, measured_series

    rows = {r["group_id"]: r for r in read_csv_rows(REPO / "data/paper-rank/tables/rank_configs.csv")}
    shares = load_shares("paper-rank", REPO)
    busy = [s for s in shares.values() if s.source == BUSY]
    assert busy and any(s.source == WALL for s in shares.values())
    for s in busy:  # the slowest stage's busy time, below its wall step
        row = next(r for r in rows.values() if tuple(split_list(r["run_ids"])) == s.run_ids)
        assert s.compute_s == pytest.approx(max(map(float, split_list(row["stage_device_busy_s"]))))
        assert s.compute_s < max(map(float, split_list(row["stage_compute_times_s"])))
    cal = cached_calibration("data/h200-reference/raw", REPO)
    h100 = load_cluster("h100-paper", REPO)
    spec = next(
        p.spec
        for p in load_study("paper-model", REPO).runs
        if not p.variant and shares.get(share_key(p.spec, h100.gpu)) in busy
    )
    inputs = predict(spec, h100, cal, band=False, shares=shares).sources["inputs_from"]
    assert f"({BUSY})" in inputs["compute"]
    names = ", ".join(measured_input_names(inputs))
    assert names == f"compute ({BUSY}), memory"
    assert measured_series(spec.config_id + "--measured-inputs", names) == MEASURED_BUSY_SERIES
    assert measured_series(spec.config_id, names) == ""


def test_a_known_artefact_of_a_run_the_study_lacks_is_refused(tmp_path):
    import yaml

    from scalestudy.spec.studies import StudyError, study_from_dict

    path = REPO / "workflow" / "studies" / "paper-rank.yaml"
    data = yaml.safe_load(path.read_text())
    data["known_artefacts"] = {"llama2-7b-no-such-run-seed0": "a reason"}
    with pytest.raises(StudyError, match=r"paper-rank\.yaml.*llama2-7b-no-such-run-seed0.*not a run"):
        study_from_dict("paper-rank", data, root=REPO, source=path)


@pytest.fixture(scope="module")
def measured_project(tmp_path_factory):
    """A prediction study with `rank_shares: paper-rank` (the committed rank-share table): FSDP at
    16 and 256 GPUs, whose shares paper-rank measured, and HSDP at 32, whose share it did not."""
    import copy

    root = tmp_path_factory.mktemp("measured")
    for rid in CAL_RUNS:
        shutil.copytree(REPO / "data/h200-reference/raw" / rid, root / "data/h200-reference/raw" / rid)
    (root / "workflow/studies").mkdir(parents=True)
    shutil.copy(REPO / "workflow/studies/paper-rank.yaml", root / "workflow/studies/paper-rank.yaml")
    (root / "data/paper-rank/tables").mkdir(parents=True)
    shutil.copy(REPO / "data/paper-rank/tables/rank_configs.csv", root / "data/paper-rank/tables/rank_configs.csv")
    shutil.copytree(REPO / "data/paper-rank/raw", root / "data/paper-rank/raw")  # the shares' raw logs
    data = copy.deepcopy(STUDY)
    data["prediction"] = {
        "cluster": "h100-paper",
        "calibration": ["data/h200-reference/raw"],
        "rank_shares": "paper-rank",
    }
    data["experiments"] = data["experiments"][:2] + [
        {"name": "strong_scaling", "set": {"global_batch": 32}, "grid": {"nodes": [1, 2]}}
    ]
    data["experiments"][1]["grid"] = {"nodes": [4]}
    data.pop("collectives")
    (root / "workflow/studies/mini-measured.yaml").write_text(yaml.safe_dump(data))
    study = load_study("mini-measured", root)
    predict_study(study, root=root)
    agg.write_tables(agg.build_tables(study), study.tables_dir)
    loaded = agg.load_tables(study.tables_dir)
    claims(study, loaded)
    for name in ("weak_scaling", "tp_pp_grid", "strong_scaling"):
        render(name, study, loaded, formats=("csv", "png"))
    return root, study


def test_a_measured_share_is_a_variant_of_its_own_never_mixed_into_the_models_series(measured_project):
    from scalestudy.spec.rank_share import MEASURED_SERIES, MEASURED_SUFFIX

    root, study = measured_project
    variants = [p for p in study.runs if p.variant]
    assert sorted(p.spec.world_size for p in variants) == [16, 128, 2048]  # HSDP at 32 GPUs: no share measured
    assert all(p.run_id.endswith(MEASURED_SUFFIX) and p.label.endswith(MEASURED_SERIES) for p in variants)

    def inputs_from(run_id):
        recs = [json.loads(line) for line in (study.raw_dir / run_id / "metrics.jsonl").read_text().splitlines()]
        return next(r["value"]["sources"]["inputs_from"] for r in recs if r["key"] == "prediction")

    for p in variants:  # the run as planned: the model alone; its variant: the measured share
        assert inputs_from(p.run_id.removesuffix(MEASURED_SUFFIX))["compute"].startswith("the model")
        assert inputs_from(p.run_id)["compute"].startswith("measured")
    summary = {r["config_id"]: r for r in read_csv_rows(study.tables_dir / "summary.csv")}
    assert {cid: r["measured_inputs"] for cid, r in summary.items() if r["measured_inputs"]} == {
        p.config_id: "compute, memory" for p in variants
    }
    rows = read_csv_rows(study.figures_dir / "weak_scaling.csv")
    by_series: dict[str, set] = {}
    for r in rows:
        by_series.setdefault(r["series"], set()).add(r["measured_inputs"])
    assert all(len(v) == 1 for v in by_series.values()), by_series  # no series mixes
    assert {s for s, v in by_series.items() if v != {""}} == {
        s + MEASURED_SERIES for s, v in by_series.items() if v == {""} and s.startswith("FSDP")
    }
    strong = read_csv_rows(study.figures_dir / "strong_scaling.csv")  # the best line takes no measured input
    assert {r["measured_inputs"] for r in strong if r["series"] == "best strategy"} == {""}
    assert [r["x"] for r in strong if r["series"] == "FSDP" + MEASURED_SERIES] == ["16"]


def test_claims_are_given_both_ways_with_the_model_alone_as_headline(measured_project):
    from scalestudy.analysis.claims import MODEL_ALONE, WITH_MEASURED

    root, study = measured_project
    rows = read_csv_rows(study.figures_dir / "claims.csv")
    alone = {r["id"]: r for r in rows if r["inputs"] == MODEL_ALONE}
    measured = {r["id"]: r for r in rows if r["inputs"] == WITH_MEASURED}
    assert set(alone) == set(measured) and "C1" in alone and len(rows) == 2 * len(alone)
    assert not any("measured-inputs" in r["config_ids"] for r in alone.values())
    assert all(c.endswith("--measured-inputs") for c in measured["C1"]["config_ids"].split(";"))
    assert alone["C1"]["ours"] != measured["C1"]["ours"]
    md = (study.figures_dir / "claims.md").read_text()
    assert f"ours, {MODEL_ALONE} (headline)" in md and f"ours, {WITH_MEASURED}" in md
    assert audit(study, figures=False) == []  # the claims, both ways, follow from the raw logs


def test_model_predict_with_a_study_prints_the_prediction_its_raw_log_holds(measured_project, capsys):
    from scalestudy.cli import main

    root, study = measured_project
    for p in study.runs:
        assert (
            main(["model", "predict", "--root", str(root), "--study", study.name, "--run-id", p.run_id, "--json"]) == 0
        )
        printed = json.loads(capsys.readouterr().out)
        recs = [json.loads(line) for line in (study.raw_dir / p.run_id / "metrics.jsonl").read_text().splitlines()]
        held = next(r["value"] for r in recs if r["key"] == "prediction")
        assert set(held["values"]) - set(printed["values"]) == {"idle_power_w_per_gpu"}  # added when written
        assert printed["values"] == pytest.approx({k: held["values"][k] for k in printed["values"]}), p.run_id
        assert printed["sources"]["inputs_from"] == held["sources"]["inputs_from"]
    rid = study.runs[0].run_id
    assert main(["model", "predict", "--root", str(root), "--study", study.name, "--run-id", rid]) == 0
    out = capsys.readouterr().out
    assert "tokens/s per device" in out and f"{rid} of study {study.name}" in out and "inputs: compute from" in out
    # anything that would change the study's prediction is refused, naming it
    assert (
        main(
            [
                "model",
                "predict",
                "--root",
                str(root),
                "--study",
                study.name,
                "--run-id",
                rid,
                "--tp-loss",
                "gather_logits",
                "--seq-len",
                "2048",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--tp-loss" in err and "--seq-len" in err
    assert main(["model", "predict", "--root", str(root), "--study", study.name, "--run-id", "nope"]) == 2
    assert "plans no training run 'nope'" in capsys.readouterr().err


def test_every_model_option_is_a_flag_of_model_predict():
    import argparse
    from dataclasses import fields

    from scalestudy.cli.model import _model_options, register
    from scalestudy.perfmodel.options import ModelOptions

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["model", "predict", "--cluster", "h100-paper"])
    assert all(getattr(args, f.name) is None for f in fields(ModelOptions))
    assert _model_options(args) == ModelOptions()
    args = parser.parse_args(
        [
            "model",
            "predict",
            "--cluster",
            "h100-paper",
            "--tp-loss",
            "gather_logits",
            "--tp-comm-overlap",
            "--recompute",
            "full",
            "--distributed-optimizer",
            "--elementwise",
            "unfused",
        ]
    )
    assert _model_options(args) == ModelOptions(
        tp_loss="gather_logits",
        tp_comm_overlap=True,
        recompute="full",
        distributed_optimizer=True,
        elementwise="unfused",
    )


def test_every_model_option_is_a_key_of_a_studys_prediction_options():
    import json
    from dataclasses import fields

    from scalestudy.perfmodel.options import ModelOptions

    schema = json.loads((REPO / "workflow/schemas/study.schema.json").read_text())
    keys = set(schema["$defs"]["model_options"]["properties"])
    assert keys == {f.name for f in fields(ModelOptions)}
    for section in ("prediction", "model_beside"):
        assert schema["properties"][section]["properties"]["options"] == {"$ref": "#/$defs/model_options"}


def test_the_measurement_files_behind_a_prediction_are_under_the_audits_checksums(tmp_path):
    """The power duty-cycle log and the H200's matmul sweep decide every prediction: a prediction
    records their sha256, and a changed byte in either makes the audit call it stale."""
    import copy

    for rid in CAL_RUNS:
        shutil.copytree(REPO / "data/h200-reference/raw" / rid, tmp_path / "data/h200-reference/raw" / rid)
    duty, sweep_run = catalog.gpu("NVIDIA H200").power_duty_data, catalog.gpu("NVIDIA H200").matmul_achievable_data
    for rel in (duty, sweep_run):
        shutil.copytree(REPO / rel, tmp_path / rel)
    data = copy.deepcopy(STUDY)
    data["experiments"] = [dict(data["experiments"][0], grid={"nodes": [16]})]
    data.pop("collectives")
    data["prediction"].pop("variants")
    (tmp_path / "workflow/studies").mkdir(parents=True)
    (tmp_path / "workflow/studies/one.yaml").write_text(yaml.safe_dump(data))
    study = load_study("one", tmp_path)
    predict_study(study, root=tmp_path)
    agg.write_tables(agg.build_tables(study), study.tables_dir)
    run = json.loads((study.raw_dir / study.runs[0].run_id / "run.json").read_text())
    files = {f["path"]: f for f in run["provenance"]["calibration"]["files"]}
    assert set(files) == {duty, sweep_run}
    assert audit(study, figures=False, claims=False) == []
    sweep = tmp_path / sweep_run / "metrics.jsonl.gz"
    original = sweep.read_bytes()
    sweep.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    problems = audit(study, figures=False, claims=False)
    assert len(problems) == 1 and sweep_run in problems[0], problems
    backup = tmp_path / "sweep-backup"
    shutil.move(tmp_path / sweep_run, backup)
    assert "missing" in audit(study, figures=False, claims=False)[0]
    shutil.move(backup, tmp_path / sweep_run)
    sweep.write_bytes(original)
    assert audit(study, figures=False, claims=False) == []


def test_a_measured_share_prediction_names_the_rank_share_runs_and_the_audit_checks_them(measured_project):
    root, study = measured_project
    rid = next(p.run_id for p in study.runs if p.run_id.endswith("--measured-inputs"))
    run = json.loads((study.raw_dir / rid / "run.json").read_text())
    shares = run["provenance"]["measured_inputs"]
    assert shares and all(
        s["study"] == "paper-rank"
        and s["raw_dir"] == f"data/paper-rank/raw/{s['run_id']}"
        and s["status"] == "ok"
        and "metrics.jsonl" in "".join(s["files_sha256"])
        for s in shares
    )
    from scalestudy.analysis.provenance import format_text, provenance

    prov = provenance(study.figures_dir / "weak_scaling.csv")
    text = format_text(prov)
    assert f"measured input: rank share of study paper-rank, run {shares[0]['run_id']}: status ok" in text
    assert text.count("the predictions above were calibrated from") == 1  # one calibration, listed once
    assert "torch None" not in text and prov["problems"] == []
    metrics = next((root / shares[0]["raw_dir"]).glob("metrics.jsonl*"))
    original = metrics.read_bytes()
    try:  # one step time edited, the file still a valid (gzip) log
        import gzip

        text = gzip.decompress(original) if metrics.suffix == ".gz" else original
        edited = text.replace(b'"step_time_s": ', b'"step_time_s": 1', 1)
        metrics.write_bytes(gzip.compress(edited) if metrics.suffix == ".gz" else edited)
        problems = audit(study, figures=False, claims=False)
        assert any(shares[0]["run_id"] in p and "changed since the predictions were made" in p for p in problems), (
            problems
        )
    finally:
        metrics.write_bytes(original)
