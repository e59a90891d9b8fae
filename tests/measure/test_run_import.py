"""`scalestudy import runs`: finished runs from another machine copied into a study as they were
written; a broken seal, a host path, a run of another study or of none it plans, and a partial copy
are refused with a sentence naming the run, and nothing is copied then."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scalestudy.measure import rawlog
from scalestudy.measure.run_import import RunImportError, import_runs
from scalestudy.spec.studies import load_study

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "workflow/studies").mkdir(parents=True)
    shutil.copy(REPO / "workflow/studies/smoke.yaml", tmp_path / "workflow/studies/smoke.yaml")
    return tmp_path, load_study("smoke", tmp_path)


def write_run(root: Path, planned, *, study="smoke", extra_run: dict | None = None) -> Path:
    """A finished run as the harness seals it: run.json, metrics.jsonl.gz, status.json."""
    spec = planned.spec
    d = root / planned.run_id
    d.mkdir(parents=True)
    run = {
        "schema": rawlog.SCHEMA,
        "kind": "train",
        "run_id": planned.run_id,
        "config_id": spec.config_id,
        "spec": spec.to_dict(),
        "study": study,
        "hardware": "CPU",
        "provenance": {"command": ["scalestudy", "train"]},
        **(extra_run or {}),
    }
    rawlog.atomic_write_json(d / rawlog.RUN_FILE, run)
    recs = [
        rawlog.record(
            "iteration",
            {
                "step": i,
                "phase": "warmup" if i < spec.warmup_iters else "measured",
                "step_time_s": 0.1,
                "tokens": 128,
                "loss": 6.0,
            },
            rank=0,
        )
        for i in range(spec.warmup_iters + spec.measured_iters)
    ]
    rawlog.atomic_write_text(d / rawlog.METRICS_FILE, "".join(json.dumps(r) + "\n" for r in recs))
    files = {n: rawlog.sha256_file(d / n) for n in (rawlog.RUN_FILE, rawlog.METRICS_FILE)}
    rawlog.write_status(
        d / rawlog.STATUS_FILE,
        {
            "schema": rawlog.SCHEMA,
            "status": "ok",
            "error": None,
            "culprit_ranks": [],
            "ranks": [{"rank": 0, "status": "ok"}],
            "files_sha256": files,
        },
    )
    rawlog.compress_run(d)
    return d


def test_runs_are_copied_as_written_and_again_left_alone(project, tmp_path):
    root, study = project
    src = tmp_path / "elsewhere"
    a, b = (write_run(src, p) for p in study.runs[:2])
    done = import_runs([src], study)
    assert [i.copied for i in done] == [True, True]
    for d in (a, b):
        dest = Path(study.raw_dir) / d.name
        assert all((dest / f.name).read_bytes() == f.read_bytes() for f in d.iterdir())
        assert rawlog.read_run(dest).status["status"] == "ok"
    assert [i.copied for i in import_runs([a], study)] == [False]  # the same bytes: already there


@pytest.mark.parametrize(
    "damage, says",
    [
        ("seal", "edited after the run"),
        ("checksum", "sha256 differs"),
        ("host path", "absolute path"),
        ("other study", "a run of study 'paper'"),
        ("unplanned", "plans no such run"),
        ("partial", "a partial copy"),
        ("unfinished", "did not finish"),
    ],
)
def test_a_bad_run_is_refused_with_a_sentence_naming_it(project, tmp_path, damage, says):
    root, study = project
    src = tmp_path / "elsewhere"
    good = write_run(src, study.runs[0])
    planned = study.runs[1]
    if damage == "host path":
        bad = write_run(src, planned, extra_run={"provenance": {"command": ["/home/alice/venv/bin/scalestudy"]}})
    elif damage == "other study":
        bad = write_run(src, planned, study="paper")
    else:
        bad = write_run(src, planned)
    if damage == "seal":
        status = json.loads((bad / rawlog.STATUS_FILE).read_text())
        status["status"] = "oom"
        rawlog.atomic_write_json(bad / rawlog.STATUS_FILE, status)
    elif damage == "checksum":
        run = json.loads((bad / rawlog.RUN_FILE).read_text())
        run["hardware"] = "GPU"
        rawlog.atomic_write_json(bad / rawlog.RUN_FILE, run)
    elif damage == "unplanned":
        bad = bad.rename(bad.with_name("llama2-7b-n1x1-r1s1t1p1-gb2-0000000000-seed0"))
        run = json.loads((bad / rawlog.RUN_FILE).read_text())
        assert run["run_id"] != bad.name
        status = json.loads((bad / rawlog.STATUS_FILE).read_text())
        run["run_id"] = bad.name
        rawlog.atomic_write_json(bad / rawlog.RUN_FILE, run)
        status["files_sha256"][rawlog.RUN_FILE] = rawlog.sha256_file(bad / rawlog.RUN_FILE)
        rawlog.write_status(bad / rawlog.STATUS_FILE, {k: v for k, v in status.items() if k != "seal"})
    elif damage == "partial":
        (bad / (rawlog.METRICS_FILE + ".gz")).unlink()
    elif damage == "unfinished":
        (bad / rawlog.STATUS_FILE).unlink()
    with pytest.raises(RunImportError, match=says) as e:
        import_runs([src], study)
    assert bad.name in str(e.value) or planned.run_id in str(e.value)
    assert not Path(study.raw_dir).exists() or not any(Path(study.raw_dir).iterdir())  # nothing copied
    assert good.exists()


def test_the_command_says_why_and_exits_non_zero(project, tmp_path):
    root, study = project
    src = tmp_path / "elsewhere"
    write_run(src, study.runs[0], study="paper")
    out = subprocess.run(
        [sys.executable, "-m", "scalestudy", "import", "runs", "--study", "smoke", str(src)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "refused: run " in out.stderr and "a run of study 'paper'" in out.stderr


def test_no_committed_raw_log_names_a_path_of_the_machine_it_ran_on():
    from scalestudy.measure.run_import import host_paths

    found = {
        str(d.relative_to(REPO)): host_paths(d)[0]
        for raw in (REPO / "data").glob("**/raw")
        for d in rawlog.find_runs(raw)
        if host_paths(d)
    }
    assert not found, found
