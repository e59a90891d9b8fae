"""MLPerf result files -> raw logs: the mllog parser, the launch-configuration reader and the
importer, on tiny inline files (a plain directory laid out like a submission repository)."""

import gzip
import json
from pathlib import Path

import pytest

from scalestudy.measure import mllog, rawlog
from scalestudy.measure.metrics import throughput
from scalestudy.measure.mlperf_config import read_shell
from scalestudy.measure.mlperf_import import (
    BEYOND_WINDOW,
    ImportOptions,
    MLPerfImportError,
    import_results,
    open_tree,
    select_results,
)

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "box_n2_ngc99.01_nemo"
RESULT = f"NVIDIA/results/{SYSTEM}/gpt3/result_0.txt"
IMPL = "NVIDIA/benchmarks/gpt3/implementations/pytorch"


def _event(t, key, value=None, kind="POINT_IN_TIME", **meta):
    return ":::MLLOG " + json.dumps(
        {
            "namespace": "",
            "time_ms": t,
            "event_type": kind,
            "key": key,
            "value": value,
            "metadata": {"file": "x.py", "lineno": 1, **meta},
        }
    )


def result_text(n_steps=12, gbs=8, ga=2, step_s=0.5):
    lines = [
        "some console output",
        _event(0, "submission_benchmark", "gpt3"),
        _event(0, "submission_org", "NVIDIA"),
        _event(0, "submission_platform", "2xNVIDIA DGX H100"),
        _event(0, "seed", 1234),
        _event(0, "global_batch_size", gbs),
        _event(0, "gradient_accumulation_steps", ga),
        _event(0, "max_sequence_length", 128),
        _event(0, "opt_base_learning_rate", 2e-5),
        _event(1000, "run_start", kind="INTERVAL_START"),
        _event(1000, "block_start", kind="INTERVAL_START"),
    ]
    t = 1000
    for i in range(n_steps):
        t += step_s * 1000
        lines.append(_event(t, "tracked_stats", {"train_step_timing": step_s}, step=(i + 1) * gbs * 128))
        if i == n_steps // 2:
            lines += [
                _event(t, "block_stop", kind="INTERVAL_END"),
                _event(t, "eval_start", kind="INTERVAL_START"),
                _event(t + 300, "eval_accuracy", 2.7),
                _event(t + 300, "eval_stop", kind="INTERVAL_END"),
                _event(t + 300, "block_start", kind="INTERVAL_START"),
            ]
            t += 300
    lines += [
        _event(t, "block_stop", kind="INTERVAL_END"),
        _event(t, "run_stop", kind="INTERVAL_END", status="success"),
    ]
    return "\n".join(lines) + "\n"


def make_repo(root: Path, *, minibs=2, result=None) -> Path:
    files = {
        RESULT: result if result is not None else result_text(),
        f"NVIDIA/systems/{SYSTEM}.json": json.dumps(
            {"number_of_nodes": "2", "accelerators_per_node": "8", "accelerator_model_name": "NVIDIA H100-SXM5-80GB"}
        ),
        f"{IMPL}/config_DGXH100_2x8x{minibs}x2x2_mbs1.sh": (
            f"export MINIBS={minibs}\nexport TENSOR_MODEL_PARALLEL=2\nexport PIPELINE_MODEL_PARALLEL=2\n"
            "export DGXNNODES=2\nsource $(dirname ${BASH_SOURCE[0]})/config_common.sh\n"
            "export MICRO_BATCH_SIZE=1\n"
        ),
        f"{IMPL}/config_common.sh": (
            'export MICRO_BATCH_SIZE=4\nexport FP8=True\nif [[ "${X:-0}" -eq 1 ]]; then\n  export MAX_STEPS=500\nfi\n'
        ),
        f"{IMPL}/conf/custom.yaml": (
            "model:\n  virtual_pipeline_model_parallel_size: ${oc.decode:${oc.env:INTERLEAVED_PIPELINE,2}}\n"
            "  encoder_seq_length: 128\n"
        ),
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
    assert set(source["files"]) == {
        RESULT,
        f"NVIDIA/systems/{SYSTEM}.json",
        f"{IMPL}/config_DGXH100_2x8x2x2x2_mbs1.sh",
        f"{IMPL}/config_common.sh",
        f"{IMPL}/conf/custom.yaml",
    }
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
    assert (
        fields["global_batch"]["used"] == "log"
        and "config_DGXH100_2x8x3x2x2_mbs1.sh:1" in fields["global_batch"]["config_at"]
    )
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
    assert (
        main(
            [
                "import",
                "mlperf",
                "--source",
                str(src),
                "--repository",
                "example.org/s",
                "--results",
                "NVIDIA/results/*/gpt3/result_*.txt",
                "--model",
                "tiny",
                "--out",
                str(tmp_path / "raw"),
            ]
        )
        == 0
    )
    assert "1 runs from example.org/s@none" in capsys.readouterr().out
    lines = result_text().splitlines()
    lines[5] = lines[5][:-5]  # cut short: not JSON
    bad = make_repo(tmp_path / "bad", result="\n".join(lines))
    assert (
        main(
            [
                "import",
                "mlperf",
                "--source",
                str(bad),
                "--repository",
                "example.org/s",
                "--results",
                "NVIDIA/results/*/gpt3/result_*.txt",
                "--model",
                "tiny",
                "--out",
                str(tmp_path / "raw2"),
            ]
        )
        == 2
    )
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

    run = sorted((REPO / "data/mlperf/raw").glob("gpt3-175b-n64x8-*-seed0"))[0]
    raw = tmp_path / "raw"
    shutil.copytree(run, raw / run.name)
    assert verify_checksums(raw) == []
    gz = raw / run.name / "metrics.jsonl.gz"
    text = gzip.decompress(gz.read_bytes())
    i = text.index(b'"step_time_s":') + len(b'"step_time_s":') + 1
    gz.write_bytes(gzip.compress(text[:i] + bytes([text[i] ^ 1]) + text[i + 1 :], 9, mtime=0))
    problems = verify_checksums(raw)
    assert len(problems) == 1 and "metrics.jsonl.gz: sha256 differs" in problems[0]


def test_the_mlperf_study_audits_clean_and_fails_on_a_changed_byte(tmp_path, monkeypatch):
    """`scalestudy audit --study mlperf` on a copy of the committed raw logs, rebuilt there by this
    code: clean; then one byte of one extracted log changed (its run.json) and the audit names it.
    The model's table beside is taken as it is by the audit: here it says "not expressible" for
    every configuration (no cluster is read; tests/perfmodel test the predictions)."""
    import shutil

    from scalestudy.analysis.aggregate import aggregate
    from scalestudy.analysis.audit import audit
    from scalestudy.analysis.claims import claims
    from scalestudy.perfmodel import beside
    from scalestudy.measure.table_files import MODEL_BESIDE_FILE as BESIDE_FILE
    from scalestudy.perfmodel.beside import write_beside
    from scalestudy.spec.studies import load_study

    monkeypatch.setattr(beside, "not_expressible", lambda spec: "not predicted in this test")

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


# ---- systems, step keys, rank prefixes, duplicates, NVFP4, sparse timings ------------------------------
def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _import(src: Path, out: Path, **kw):
    opts = ImportOptions(model="tiny", **kw)
    tree = open_tree(src, "example.org/submissions", "abc123")
    return import_results(tree, select_results(tree, "NVIDIA/results/*/*/result_*.txt"), opts, out)


def test_system_names_the_machine_and_enters_the_run_id(tmp_path):
    from scalestudy.spec.run import RunSpec, SpecError

    src = make_repo(tmp_path / "repo")
    (plain,) = _import(src, tmp_path / "a")
    (named,) = _import(src, tmp_path / "b", system="h100-box")
    assert plain.spec.system == "" and named.spec.system == "h100-box"
    assert named.spec.replace(system="").run_id == plain.spec.run_id != named.spec.run_id
    assert named.run["system"]["cluster"] == "h100-box"
    with pytest.raises(SpecError, match="system: 'H100_box' is not a cluster name"):
        RunSpec(model="tiny", system="H100_box")
    assert [f for f, _ in RunSpec(model="tiny", system="h100-box").harness_problems()] == ["system"]


def test_gpus_come_from_the_system_file_not_the_platform(tmp_path):
    text = result_text().replace('"2xNVIDIA DGX H100"', '"16xSUBMISSION_PLATFORM_PLACEHOLDER"')
    (imp,) = _import(make_repo(tmp_path / "repo", result=text), tmp_path / "raw")
    assert (imp.spec.nodes, imp.spec.procs_per_node, imp.run["system"]["gpus"]) == (2, 8, 16)
    (d,) = [d for d in imp.run["disagreements"] if d["field"] == "nodes"]
    assert (d["log"], d["system_file"], d["used"]) == (16, 2, "system file")
    assert imp.run["system"]["device"] == "NVIDIA H100 80GB HBM3"
    (tmp_path / "repo" / f"NVIDIA/systems/{SYSTEM}.json").unlink()
    with pytest.raises(MLPerfImportError, match="no system description .*: the GPU count and kind come from it"):
        _import(tmp_path / "repo", tmp_path / "raw2")


def test_every_accelerator_maps_to_a_catalog_gpu():
    from scalestudy.measure.mlperf_import import ACCELERATORS
    from scalestudy.spec import catalog

    assert {catalog.gpu(name).name for name in ACCELERATORS.values()} == set(ACCELERATORS.values())
    assert ACCELERATORS["NVIDIA Blackwell GPU (GB200)"] == "NVIDIA GB200"


def test_rank_prefixed_lines_and_the_v41_step_key(tmp_path):
    text = result_text().replace('"train_step_timing"', '"train_step_timing in s"')
    text = "\n".join(("   0: " + line) if line.startswith(":::MLLOG") else line for line in text.splitlines())
    assert mllog.parse(text, "r.txt")[0].key == "submission_benchmark"
    (imp,) = _import(make_repo(tmp_path / "repo", result=text), tmp_path / "raw")
    assert imp.n_steps == 12 and imp.run["window"]["steps_per_logged_timing"] == 1


def test_a_byte_identical_result_file_is_imported_once(tmp_path):
    src = make_repo(tmp_path / "repo")
    twin = f"NVIDIA/results/{SYSTEM}/gpt3/result_1.txt"
    (src / twin).write_text((src / RESULT).read_text())
    batch = _import(src, tmp_path / "raw")
    assert [i.result_path for i in batch] == [RESULT]
    (line,) = batch.skipped
    assert (
        f"{twin} skipped: byte-identical" in line
        and f"to example.org/submissions@abc123:{RESULT} of this import" in line
    )
    # in another repository (a later round) under another name: skipped against the output directory
    other = _write(tmp_path / "other", {"NVIDIA/results/renamed/gpt3/result_0.txt": (src / RESULT).read_text()})
    tree = open_tree(other, "example.org/later", "def456")
    again = import_results(
        tree, select_results(tree, "NVIDIA/results/*/gpt3/result_*.txt"), ImportOptions(model="tiny"), tmp_path / "raw"
    )
    assert list(again) == [] and "already imported as " + batch[0].spec.run_id in again.skipped[0]
    assert f"example.org/submissions@abc123:{RESULT}" in again.skipped[0]
    # the same file again from the same place is a re-import, not a duplicate
    assert len(_import(src, tmp_path / "raw")) == 1


def test_two_files_giving_one_run_id_are_refused(tmp_path):
    src = make_repo(tmp_path / "repo")
    other = f"NVIDIA/results/{SYSTEM}/gpt3/result_0.txt".replace(SYSTEM, "box2_n2")
    _write(
        src,
        {
            other: result_text(step_s=0.6),
            "NVIDIA/systems/box2_n2.json": (src / f"NVIDIA/systems/{SYSTEM}.json").read_text(),
        },
    )
    with pytest.raises(MLPerfImportError, match="give the same run .*different --system names"):
        _import(src, tmp_path / "raw", measured_iters=2)


def test_nvfp4_from_the_config_and_the_logged_configuration_dump(tmp_path):
    from scalestudy.spec.run import RunSpec

    src = make_repo(tmp_path / "repo")
    (src / f"{IMPL}/config_common.sh").write_text(
        'export FP8=False\nexport FP4=True\nexport FP4_RECIPE="nvfp4"\n'
        "source $(dirname ${BASH_SOURCE[0]})/config_absent.sh\n"
    )
    (imp,) = _import(src, tmp_path / "raw")
    assert imp.spec.precision == "nvfp4" and imp.run["layout_detail"]["precision"]["from"] == "config"
    assert imp.run["provenance"]["source"]["config_missing"] == [f"{IMPL}/config_absent.sh"]
    assert (
        "nvfp4 runs only in imported logs"
        in dict(RunSpec(model="tiny", precision="nvfp4").harness_problems())["precision"]
    )
    dump = [
        "    0: [NeMo I nemo_logging:393] ",
        "    0:     ***** Experiment configuration *****",
        "    0: [NeMo I x] ",
        "    0:     model:",
        "    0:       micro_batch_size: 1",
        "    3: another rank's line",
        "    0:       tensor_model_parallel_size: 2",
        "    0:       virtual_pipeline_model_parallel_size: null",
        "    0:       fp8: true",
        "    0:       fp4: false",
        "    0: [NeMo I later] done",
    ]
    text = result_text().replace("some console output", "\n".join(dump))
    (imp,) = _import(make_repo(tmp_path / "repo2", result=text), tmp_path / "raw2")
    detail = imp.run["layout_detail"]
    assert detail["virtual_stages"]["log"] == 1 and detail["virtual_stages"]["config"] == 2  # the log wins
    assert detail["tp"]["from"] == "log and config" and detail["precision"]["log_at"].endswith(f"{RESULT}:9")
    assert {d["field"] for d in imp.run["disagreements"]} == {"virtual_stages"} and imp.spec.precision == "fp8"


def test_a_log_timing_one_step_in_32_counts_logged_timings(tmp_path):
    gbs = 8
    lines = [
        _event(0, "submission_platform", "2xNVIDIA DGX H100"),
        _event(0, "global_batch_size", gbs),
        _event(0, "max_sequence_length", 128),
        _event(1, "run_start", kind="INTERVAL_START"),
        _event(1, "block_start", kind="INTERVAL_START", samples_count=99, step=0),
    ]
    for i in range(14):
        lines.append(
            _event(
                2 + i,
                "tracked_stats",
                {"train_step_time": 0.25, "reduced_train_loss": 5.0},
                step=32.0 * i + 31,
                samples_count=32.0 * gbs * (i + 1),
            )
        )
    lines += [
        _event(20, "tracked_stats", {"train_step_time": 9.0}, samples_count=14 * 32 * gbs),  # the block's mean
        _event(20, "block_stop", kind="INTERVAL_END"),
        _event(20, "run_stop", kind="INTERVAL_END", status="success"),
    ]
    (imp,) = _import(make_repo(tmp_path / "repo", result="\n".join(lines) + "\n"), tmp_path / "raw")
    window = imp.run["window"]
    assert imp.n_steps == 14 and window["steps_per_logged_timing"] == 32 and window["measured_iters"] == 4
    assert "one optimizer step in 32" in window["counts"] and "320 steps" in window["rule"]
    assert imp.run["disagreements"] == []
    its = [r["value"] for r in imp.records if r["key"] == "iteration"]
    assert {v["step_time_s"] for v in its} == {0.25} and its[1]["steps_since_previous_timing"] == 32


def test_the_readme_names_the_config_and_a_referred_implementation_fills_in(tmp_path):
    src = make_repo(tmp_path / "repo")
    own = f"NVIDIA/benchmarks/gpt3/implementations/{SYSTEM}"
    _write(
        src,
        {
            f"{own}/README-{SYSTEM}.md": "launch with `config_DGXH100_2x8x2x2x2_mbs1_fast.sh`\n",
            f"{own}/config_DGXH100_2x8x2x2x2_mbs1_fast.sh": "export MINIBS=2\nexport TENSOR_MODEL_PARALLEL=2\n"
            "export PIPELINE_MODEL_PARALLEL=2\nsource $(dirname ${BASH_SOURCE[0]})/config_common.sh\n"
            "export MICRO_BATCH_SIZE=1\n",
            f"{own}/README.md": "Please refer to the implementation directory [pytorch](../pytorch)\n",
        },
    )
    (imp,) = _import(src, tmp_path / "raw")
    source = imp.run["provenance"]["source"]
    assert source["config"] == f"{own}/config_DGXH100_2x8x2x2x2_mbs1_fast.sh"
    assert f"{IMPL}/config_common.sh" in imp.files and imp.spec.precision == "fp8"  # read from ../pytorch
    assert imp.spec.pp_stages_per_rank == 2  # conf/custom.yaml of ../pytorch


def test_the_import_command_takes_a_system_and_says_what_it_skipped(tmp_path, capsys):
    from scalestudy.cli import main

    src = make_repo(tmp_path / "repo")
    (src / f"NVIDIA/results/{SYSTEM}/gpt3/result_1.txt").write_text((src / RESULT).read_text())
    args = [
        "import",
        "mlperf",
        "--source",
        str(src),
        "--repository",
        "example.org/s",
        "--results",
        "NVIDIA/results/*/gpt3/result_*.txt",
        "--model",
        "tiny",
        "--out",
        str(tmp_path / "raw"),
    ]
    assert main([*args, "--system", "h100-box"]) == 0
    out = capsys.readouterr().out
    assert "1 runs from example.org/s@none" in out and "1 result file skipped" in out and "byte-identical" in out
    assert json.loads(next((tmp_path / "raw").glob("*/run.json")).read_text())["spec"]["system"] == "h100-box"
    assert main([*args, "--system", "H100 box"]) == 2
    assert "is not a cluster name" in capsys.readouterr().err
