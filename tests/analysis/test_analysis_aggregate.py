import json
import math
import shutil

import pytest
from analysis_fixtures import build_rich_study, make_study, planned, rich_specs, write_train_run

from scalestudy.analysis import aggregate as agg
from scalestudy.measure.csv_format import read_csv_rows
from scalestudy.measure import rawlog
from scalestudy.measure.rawlog import CorruptLogError, IncompleteRunError, RawLogError

TINY_FLOPS_PER_TOKEN = 6 * 402496 + 12 * 8 * 64 * 128  # tiny: 402496 non-embedding parameters


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    root = tmp_path_factory.mktemp("rich")
    study = build_rich_study(root)
    return study, agg.build_tables(study)


def _row(rows, **kw):
    hits = [r for r in rows if all(r.get(k) == v for k, v in kw.items())]
    assert len(hits) == 1, hits
    return hits[0]


def test_run_numbers_by_hand(rich):
    study, t = rich
    spec = rich_specs()["fsdp2"]
    r = _row(t.runs, config_id=spec.config_id, seed=0)
    # global batch 4 x 128 tokens = 512 tokens a step, 0.5 s a measured step (warm-up steps of 5 s excluded)
    assert r["tokens_per_step"] == 512 and r["n_measured_steps"] == 4
    assert r["tokens_per_s"] == pytest.approx(1024.0)
    assert r["tokens_per_s_per_device"] == pytest.approx(512.0)
    assert r["step_time_mean_s"] == pytest.approx(0.5)
    assert r["flops_per_token"] == TINY_FLOPS_PER_TOKEN
    assert r["mfu"] == pytest.approx(512.0 * TINY_FLOPS_PER_TOKEN / 1e12)
    assert r["mfu_peak_flops"] == 1e12 and r["mfu_peak_source"] == ["table"]
    assert r["peak_memory_bytes"] == (1 << 30) + 1  # max over the ranks
    # energy: 2 GPUs x 300 W x 2 s window; 4 steps x 512 tokens
    assert r["energy_j"] == pytest.approx(1200.0)
    assert r["power_w_total"] == pytest.approx(600.0) and r["power_w_per_gpu"] == pytest.approx(300.0)
    assert r["idle_power_w_per_gpu"] == pytest.approx(70.0)
    assert r["tokens_per_joule"] == pytest.approx(2048 / 1200)
    # trace: per step 1000 us compute, 400 us NCCL overlapping it by 150 us
    assert r["compute_s"] == pytest.approx(1e-3) and r["comm_s"] == pytest.approx(4e-4)
    assert r["exposed_comm_s"] == pytest.approx(2.5e-4) and r["overlap_fraction"] == pytest.approx(0.375)
    assert r["exposed_comm_share"] == pytest.approx(2.5e-4 / 0.5)
    assert r["n_traces"] == 2 and r["spec.model"] == "tiny" and r["label"] == "FSDP"


def test_summary_ci_by_hand(rich):
    _, t = rich
    s = _row(t.summary, config_id=rich_specs()["fsdp2"].config_id)
    xs = [1024.0, 512.0 / 0.52]
    mean = sum(xs) / 2
    std = math.sqrt(sum((x - mean) ** 2 for x in xs))
    half = 12.706204736174698 * std / math.sqrt(2)
    assert s["tokens_per_s_mean"] == pytest.approx(mean) and s["tokens_per_s_std"] == pytest.approx(std)
    assert s["tokens_per_s_ci95_low"] == pytest.approx(mean - half)
    assert s["tokens_per_s_ci95_high"] == pytest.approx(mean + half)
    assert s["tokens_per_s_n"] == 2 and s["n_seeds"] == 2 and s["n_ok"] == 2 and s["status"] == "ok"
    one = _row(t.summary, config_id=rich_specs()["hsdp4"].config_id)
    assert one["tokens_per_s_n"] == 1 and one["tokens_per_s_ci95_low"] is None
    assert "one seed: no confidence interval" in one["notes"]


def test_failed_runs_have_rows_with_null_metrics(rich):
    _, t = rich
    r = _row(t.runs, config_id=rich_specs()["fsdp8"].config_id)
    assert r["status"] == "oom" and "out of memory" in r["error"]
    assert r["tokens_per_s"] is None and r["mfu"] is None and r["mfu_reason"] == "run status oom"
    s = _row(t.summary, config_id=rich_specs()["fsdp8"].config_id)
    assert s["status"] == "oom" and s["n_oom"] == 1 and s["tokens_per_s_mean"] is None


def test_cpu_run_has_null_energy_with_reason(tmp_path):
    spec = rich_specs("cpu")["fsdp2"]
    write_train_run(tmp_path / "data" / "c" / "raw", spec, device_name="cpu", peak_source="cpu_matmul_calibration")
    study = make_study(tmp_path, [planned(spec, ("weak_scaling",), "FSDP")], name="c")
    r = agg.build_tables(study).runs[0]
    assert r["energy_j"] is None and r["tokens_per_joule"] is None and "no NVML" in r["energy_reason"]
    assert r["mfu"] is not None and r["mfu_peak_source"] == ["cpu_matmul_calibration"]


def test_missing_records_give_null_with_reason(tmp_path):
    spec = rich_specs()["fsdp2"]
    write_train_run(tmp_path / "data" / "m" / "raw", spec, flops_record=False, power_w=300.0)
    study = make_study(tmp_path, [planned(spec, ("weak_scaling",), "FSDP")], name="m")
    r = agg.build_tables(study).runs[0]
    assert r["tokens_per_s"] == pytest.approx(1024.0)
    assert r["mfu"] is None and r["mfu_reason"] == "the run logged no flops record"


def test_aggregate_is_byte_identical(rich, tmp_path):
    study, _ = rich
    a = agg.aggregate(study, tmp_path / "a")
    b = agg.aggregate(study, tmp_path / "b")
    assert [p.name for p in a] == list(agg.TABLE_FILES)
    for x, y in zip(a, b):
        assert x.read_bytes() == y.read_bytes()
    assert read_csv_rows(a[0])[0]["run_id"]  # one row per planned run and seed
    assert len(read_csv_rows(a[0])) == len(study.runs)


def _copy(study, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(study.root, root)
    from dataclasses import replace

    return replace(study, root=root)


def test_incomplete_run_fails_naming_it(rich, tmp_path):
    study = _copy(rich[0], tmp_path)
    victim = study.raw_dir / study.runs[0].spec.run_id
    (victim / "status.json").unlink()
    with pytest.raises(RawLogError) as e:
        agg.aggregate(study)
    assert str(victim) in str(e.value) and "did not finish" in str(e.value)
    assert isinstance(e.value.errors[0], IncompleteRunError)


def test_corrupt_metrics_line_fails_naming_file_and_line(rich, tmp_path):
    study = _copy(rich[0], tmp_path)
    victim = study.raw_dir / study.runs[0].spec.run_id
    metrics = victim / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[2] = lines[2][:-5]
    metrics.write_text("\n".join(lines) + "\n")
    status = json.loads((victim / "status.json").read_text())
    status["files_sha256"]["metrics.jsonl"] = rawlog.sha256_file(metrics)  # past the checksum: the parser must catch it
    rawlog.write_status(victim / "status.json", status)  # and past the seal
    with pytest.raises(RawLogError) as e:
        agg.build_tables(study)
    assert str(metrics) in str(e.value) and "line 3" in str(e.value)
    assert isinstance(e.value.errors[0], CorruptLogError) and e.value.path == str(metrics)


def test_missing_planned_run_fails_and_allow_missing_keeps_a_row(rich, tmp_path):
    study = _copy(rich[0], tmp_path)
    rid = study.runs[0].spec.run_id
    shutil.rmtree(study.raw_dir / rid)
    with pytest.raises(RawLogError) as e:
        agg.build_tables(study)
    assert str(study.raw_dir / rid) in str(e.value) and "no raw-log directory" in str(e.value)
    t = agg.build_tables(study, allow_missing=True)
    r = _row(t.runs, run_id=rid)
    assert r["status"] == agg.MISSING and rid in r["error"]


def test_unplanned_run_directory_is_reported(rich, tmp_path):
    study = _copy(rich[0], tmp_path)
    shutil.copytree(study.raw_dir / study.runs[0].spec.run_id, study.raw_dir / "stray-run")
    aside = study.raw_dir / f"{study.runs[1].spec.run_id}.incomplete-20250101T000000"
    aside.mkdir()
    (aside / "rank-00000.jsonl").write_text("")
    t = agg.build_tables(study)
    by_dir = {u["raw_dir"]: u for u in t.unplanned}
    assert "not a run of study" in by_dir["stray-run"]["reason"]
    assert "moved aside" in by_dir[aside.name]["reason"] and by_dir[aside.name]["complete"] is False


def test_a_finished_run_the_launcher_found_and_moved_aside_is_no_problem_of_the_audit(rich, tmp_path):
    from scalestudy.analysis.audit import audit

    study = _copy(rich[0], tmp_path)
    run_id = study.runs[0].spec.run_id
    found = study.raw_dir / f"{run_id}.found-20250101T000000~2"
    shutil.copytree(study.raw_dir / run_id, found)
    by_dir = {u["raw_dir"]: u for u in agg.build_tables(study).unplanned}
    assert by_dir[found.name]["reason"] == (
        f"a finished copy of planned run {run_id} that the launcher found in its place and moved aside (never read)"
    )
    assert not any(found.name in p for p in audit(study, figures=False, claims=False))
