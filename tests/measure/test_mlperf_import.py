"""MLPerf result files -> raw logs: the mllog parser, the launch-configuration reader and the
importer, on tiny inline files (a plain directory laid out like a submission repository)."""

import gzip
import json
from pathlib import Path

import pytest

from scalestudy.measure import mllog, rawlog
from scalestudy.measure.metrics import throughput
from scalestudy.measure.mlperf_config import read_shell
from scalestudy.measure.mlperf_import import (BEYOND_WINDOW, ImportOptions, MLPerfImportError, import_results,
                                              open_tree, select_results)

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "box_n2_ngc99.01_nemo"
RESULT = f"NVIDIA/results/{SYSTEM}/gpt3/result_0.txt"
IMPL = "NVIDIA/benchmarks/gpt3/implementations/pytorch"


def _event(t, key, value=None, kind="POINT_IN_TIME", **meta):
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": t, "event_type": kind, "key": key, "value": value,
                                     "metadata": {"file": "x.py", "lineno": 1, **meta}})


def result_text(n_steps=12, gbs=8, ga=2, step_s=0.5):
    lines = ["some console output", _event(0, "submission_benchmark", "gpt3"), _event(0, "submission_org", "NVIDIA"),
             _event(0, "submission_platform", "2xNVIDIA DGX H100"), _event(0, "seed", 1234),
             _event(0, "global_batch_size", gbs), _event(0, "gradient_accumulation_steps", ga),
             _event(0, "max_sequence_length", 128), _event(0, "opt_base_learning_rate", 2e-5),
             _event(1000, "run_start", kind="INTERVAL_START"), _event(1000, "block_start", kind="INTERVAL_START")]
    t = 1000
    for i in range(n_steps):
        t += step_s * 1000
        lines.append(_event(t, "tracked_stats", {"train_step_timing": step_s}, step=(i + 1) * gbs * 128))
        if i == n_steps // 2:
            lines += [_event(t, "block_stop", kind="INTERVAL_END"), _event(t, "eval_start", kind="INTERVAL_START"),
                      _event(t + 300, "eval_accuracy", 2.7), _event(t + 300, "eval_stop", kind="INTERVAL_END"),
                      _event(t + 300, "block_start", kind="INTERVAL_START")]
            t += 300
    lines += [_event(t, "block_stop", kind="INTERVAL_END"), _event(t, "run_stop", kind="INTERVAL_END", status="success")]
    return "\n".join(lines) + "\n"


def make_repo(root: Path, *, minibs=2, result=None) -> Path:
    files = {
        RESULT: result if result is not None else result_text(),
        f"NVIDIA/systems/{SYSTEM}.json": json.dumps({"number_of_nodes": "2", "accelerators_per_node": "8",
                                                     "accelerator_model_name": "NVIDIA H100-SXM5-80GB"}),
        f"{IMPL}/config_DGXH100_2x8x{minibs}x2x2_mbs1.sh": (
            f"export MINIBS={minibs}\nexport TENSOR_MODEL_PARALLEL=2\nexport PIPELINE_MODEL_PARALLEL=2\n"
            "export DGXNNODES=2\nsource $(dirname ${BASH_SOURCE[0]})/config_common.sh\n"
            "export MICRO_BATCH_SIZE=1\n"),
        f"{IMPL}/config_common.sh": ("export MICRO_BATCH_SIZE=4\nexport FP8=True\n"
                                     "if [[ \"${X:-0}\" -eq 1 ]]; then\n  export MAX_STEPS=500\nfi\n"),
        f"{IMPL}/conf/custom.yaml": ("model:\n  virtual_pipeline_model_parallel_size: ${oc.decode:${oc.env:INTERLEAVED_PIPELINE,2}}\n"
                                     "  encoder_seq_length: 128\n"),
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_a_malformed_mllog_line_is_refused_naming_file_and_line():
    text = result_text().splitlines()
    text[4] = ':::MLLOG {"key": "seed", "value": 1'
    with pytest.raises(mllog.MLLogError, match=r"^r\.txt:5: the :::MLLOG event is not valid JSON"):
        mllog.parse("\n".join(text), "r.txt")
    with pytest.raises(mllog.MLLogError, match=r"r\.txt:1: the :::MLLOG event lacks time_ms"):
        mllog.parse(':::MLLOG {"event_type": "POINT_IN_TIME", "key": "k", "value": 1, "metadata": {}}', "r.txt")


def test_parse_keeps_events_only_and_pairs_spans():
    events = mllog.parse(result_text(), "r.txt")
    assert events[0].key == "submission_benchmark" and events[0].line == 2
    assert len(mllog.spans(events, "block_start", "block_stop", "r.txt")) == 2
    with pytest.raises(mllog.MLLogError, match="block_stop without a block_start"):
        mllog.spans(events[-2:], "block_start", "block_stop", "r.txt")


def test_the_shell_config_is_read_as_the_shell_leaves_it(tmp_path):
    make_repo(tmp_path)
    cfg = read_shell(f"{IMPL}/config_DGXH100_2x8x2x2x2_mbs1.sh", lambda p: (tmp_path / p).read_text())
    assert cfg.settings["MICRO_BATCH_SIZE"].value == "1"  # set after the source, as the shell does
    assert cfg.settings["FP8"].value == "True" and "MAX_STEPS" not in cfg.settings  # inside an if: left out
    assert cfg.settings["MINIBS"].line == 1


def test_a_result_file_becomes_a_sealed_raw_log_with_its_source(tmp_path):
    src = make_repo(tmp_path / "repo")
    tree = open_tree(src, "example.org/submissions", "abc123")
    assert select_results(tree, "NVIDIA/results/*/gpt3/result_*.txt") == [RESULT]
    (imp,) = import_results(tree, [RESULT], ImportOptions(model="tiny"), tmp_path / "raw")
    spec = imp.spec
    assert (spec.tp, spec.pp, spec.pp_stages_per_rank, spec.dp, spec.micro_batch) == (2, 2, 2, 4, 1)
    assert (spec.global_batch, spec.pp_microbatches, spec.precision, spec.seed, spec.lr) == (8, 2, "fp8", 0, 2e-5)
    assert (spec.warmup_iters, spec.measured_iters) == (10, 2)  # the package's warm-up; the rest measured
    log = rawlog.read_run(tmp_path / "raw" / spec.run_id)  # checksums and seal verified
    assert (tmp_path / "raw" / spec.run_id / "metrics.jsonl.gz").exists()
    source = log.run["provenance"]["source"]
    assert source["repository"] == "example.org/submissions" and source["commit"] == "abc123"
    assert set(source["files"]) == {RESULT, f"NVIDIA/systems/{SYSTEM}.json", f"{IMPL}/config_DGXH100_2x8x2x2x2_mbs1.sh",
                                    f"{IMPL}/config_common.sh", f"{IMPL}/conf/custom.yaml"}
    assert len(source["files"][RESULT]) == 64 and log.run["disagreements"] == []
    assert log.run["layout_detail"]["global_batch"]["from"] == "log and config"
    phases = [r["value"]["phase"] for r in log.iterations()]
    assert phases == ["warmup"] * 10 + ["measured"] * 2
    t = throughput(list(log.iterations()), spec.world_size)
    assert t["tokens_per_s"] == pytest.approx(8 * 128 / 0.5)
    evals = [r for r in log.records if r["key"] == "mlperf_eval"]
    assert len(evals) == 1 and evals[0]["value"]["eval_accuracy"] == 2.7 and evals[0]["value"]["duration_s"] == 0.3


def test_log_and_config_disagree_the_log_wins_and_it_is_recorded(tmp_path):
    src = make_repo(tmp_path / "repo", minibs=3, result=result_text(n_steps=14))
    tree = open_tree(src, "example.org/submissions")
    (imp,) = import_results(tree, [RESULT], ImportOptions(model="tiny", measured_iters=2), tmp_path / "raw")
    assert imp.spec.global_batch == 8
    fields = {d["field"]: d for d in imp.run["disagreements"]}
    assert fields["global_batch"]["log"] == 8 and fields["global_batch"]["config"] == 12
    assert fields["global_batch"]["used"] == "log" and "config_DGXH100_2x8x3x2x2_mbs1.sh:1" in fields["global_batch"]["config_at"]
    assert fields["grad_accum_steps"]["config"] == 3
    log = rawlog.read_run(tmp_path / "raw" / imp.spec.run_id)
    assert [r["value"]["phase"] for r in log.iterations()][-2:] == [BEYOND_WINDOW] * 2


def test_a_run_without_run_stop_is_crashed_and_too_few_steps_are_refused(tmp_path):
    text = "\n".join(line for line in result_text().splitlines() if '"run_stop"' not in line)
    tree = open_tree(make_repo(tmp_path / "repo", result=text), "example.org/submissions")
    (imp,) = import_results(tree, [RESULT], ImportOptions(model="tiny"), tmp_path / "raw")
    assert imp.status == "crashed" and "no run_stop" in imp.error
    with pytest.raises(MLPerfImportError, match="fewer than warm-up 10 \\+ measured 50"):
        import_results(tree, [RESULT], ImportOptions(model="tiny", measured_iters=50), tmp_path / "raw2")


def test_the_import_command_writes_the_runs(tmp_path, capsys):
    from scalestudy.cli import main

    src = make_repo(tmp_path / "repo")
    assert main(["import", "mlperf", "--source", str(src), "--repository", "example.org/s", "--results",
                 "NVIDIA/results/*/gpt3/result_*.txt", "--model", "tiny", "--out", str(tmp_path / "raw")]) == 0
    assert "1 runs from example.org/s@none" in capsys.readouterr().out
    lines = result_text().splitlines()
    lines[5] = lines[5][:-5]  # cut short: not JSON
    bad = make_repo(tmp_path / "bad", result="\n".join(lines))
    assert main(["import", "mlperf", "--source", str(bad), "--repository", "example.org/s", "--results",
                 "NVIDIA/results/*/gpt3/result_*.txt", "--model", "tiny", "--out", str(tmp_path / "raw2")]) == 2
    assert f"{RESULT}:6: the :::MLLOG event is not valid JSON" in capsys.readouterr().err


def test_committed_runs_keep_their_run_ids():
    """Fields added for imported runs (cp, pp_embedding_stages, precision fp8) leave every earlier
    configuration id as it was: each committed run's spec gives back its recorded run id."""
    from scalestudy.spec.run import RunSpec

    runs = sorted((REPO / "data").glob("*/raw/*/run.json"))
    assert runs
    for p in runs:
        run = json.loads(p.read_text())
        if run.get("kind", "train") == "train":
            assert RunSpec.from_dict(run["spec"]).run_id == run["run_id"], p


def test_a_changed_byte_in_an_imported_log_fails_the_audit(tmp_path):
    import shutil

    from scalestudy.analysis.audit import verify_checksums

    (run,) = sorted((REPO / "data/mlperf/raw").glob("gpt3-175b-n64x8-*-seed0"))
    raw = tmp_path / "raw"
    shutil.copytree(run, raw / run.name)
    assert verify_checksums(raw) == []
    gz = raw / run.name / "metrics.jsonl.gz"
    text = gzip.decompress(gz.read_bytes())
    i = text.index(b'"step_time_s":') + len(b'"step_time_s":') + 1
    gz.write_bytes(gzip.compress(text[:i] + bytes([text[i] ^ 1]) + text[i + 1:], 9, mtime=0))
    problems = verify_checksums(raw)
    assert len(problems) == 1 and "metrics.jsonl.gz: sha256 differs" in problems[0]


def test_the_mlperf_study_audits_clean_and_fails_on_a_changed_byte(tmp_path):
    """`scalestudy audit --study mlperf` on a copy of the committed raw logs, rebuilt there by this
    code: clean; then one byte of one extracted log changed (its run.json) and the audit names it."""
    import shutil

    from scalestudy.analysis.aggregate import aggregate
    from scalestudy.analysis.audit import audit
    from scalestudy.analysis.claims import claims
    from scalestudy.perfmodel.beside import BESIDE_FILE, write_beside
    from scalestudy.spec.studies import load_study

    for rel in ("workflow/studies/mlperf.yaml", "data/mlperf/raw"):
        src, dst = REPO / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    study = load_study("mlperf", tmp_path)
    aggregate(study)
    write_beside(study, study.tables_dir / BESIDE_FILE, REPO)
    claims(study)
    assert audit(study, figures=False) == []  # tables, claims and checksums (figures: tests/analysis)
    run_json = next(iter(sorted((tmp_path / "data/mlperf/raw").glob("llama3.1-405b-n1024x8-*-seed2")))) / "run.json"
    text = run_json.read_bytes()
    run_json.write_bytes(text.replace(b'"gpus": 8192', b'"gpus": 8193', 1))
    problems = audit(study, figures=False)
    assert any(f"{run_json}: sha256 differs" in p for p in problems), problems
