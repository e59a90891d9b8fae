"""Bad input gets one sentence naming the culprit: a broken study file breaks only its own study, a
study path with a space or a ';' reaches every rule intact, impossible values are refused by the
schema and the spec, a profiler 'trace' that is not one is refused naming the file, and a full or
read-only disk is named with its free space."""

import errno
import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import REPO, child_env, snakemake_cmd

from scalestudy.measure import rawlog
from scalestudy.measure.exposed_comm import TraceError, analyse_trace
from scalestudy.spec.run import RunSpec, SpecError
from scalestudy.spec.studies import StudyError, load_study, study_from_dict, study_headers


def _project_copy(tmp_path):
    """The workflow and its studies in a directory of their own (the package comes from the venv)."""
    root = tmp_path / "proj"
    root.mkdir()
    for name in ("Snakefile", "workflow", "profiles", "slurm"):
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name)
        elif src.exists():
            shutil.copy2(src, root / name)
    return root


@pytest.mark.workflow
def test_a_broken_study_file_breaks_only_its_study_and_a_study_path_with_shell_characters_works(tmp_path):
    root = _project_copy(tmp_path)
    (root / "workflow" / "studies" / "broken.yaml").write_text("name: [unclosed\n  runs: {\n")
    odd = root / "my studies; rm -rf x" / "a b.yaml"
    odd.parent.mkdir()
    shutil.copy2(root / "workflow" / "studies" / "smoke.yaml", odd)
    out = subprocess.run(
        [*snakemake_cmd(), "-n", "-p", "--config", f"study={odd}"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=240,
        env=child_env(),
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-3000:]
    assert "study 'broken' is left out" in text and "broken.yaml is not valid YAML" in text
    # the rules' shell lines quote the study's path and the run directories (Snakemake's :q)
    assert f"--study '{odd}'" in text and "--run-dir 'data/a b/raw/" in text
    assert "scalestudy aggregate --study '" in text

    broken = study_headers(root)[1]
    assert set(broken) == {"broken"} and "broken.yaml" in broken["broken"]
    with pytest.raises(StudyError, match="broken.yaml is not valid YAML"):
        load_study("broken", root)


@pytest.mark.parametrize(
    "field,value,words",
    [
        ("lr", float("nan"), "lr: must be a finite positive number, got nan"),
        ("lr", float("inf"), "lr: must be a finite positive number, got inf"),
        ("lr", 0.0, "lr: must be a finite positive number"),
        ("n_layers", 100, "n_layers: a slice of 100 layers is deeper than tiny's 8 layers"),
    ],
)
def test_impossible_values_are_refused_by_the_spec(field, value, words):
    with pytest.raises(SpecError, match=words.replace("(", r"\(").replace(")", r"\)")):
        RunSpec(model="tiny", **{field: value})
    assert RunSpec(model="tiny", n_layers=8).n_layers == 8


def test_impossible_values_in_a_study_are_refused_naming_the_field():
    import yaml

    base = yaml.safe_load((REPO / "workflow" / "studies" / "smoke.yaml").read_text())
    for field, value, words in (("lr", float("inf"), "lr"), ("lr", float("nan"), "lr"), ("n_layers", 100, "n_layers")):
        data = json.loads(json.dumps(base))
        data["defaults"][field] = value
        with pytest.raises(StudyError, match=words):
            study_from_dict("bad", data, root=REPO)


def test_the_cli_refuses_an_infinite_lr(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text('{"model": "tiny", "device": "cpu", "lr": Infinity}')  # what json.dumps writes for inf
    out = subprocess.run(
        [sys.executable, "-m", "scalestudy", "launch", "--spec-json", str(spec), "--run-dir", str(tmp_path / "r")],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "lr: must be a finite positive number, got inf" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "content,words",
    [
        ([1, 2, 3], "are not JSON objects"),
        ({"traceEvents": []}, "an empty trace"),
        ({"traceEvents": [{"ph": "M", "name": "process_name"}]}, "no complete"),
        ({"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": "soon", "dur": 3}]}, "times must be numbers"),
        (
            {"traceEvents": [{"ph": "X", "name": "idle", "cat": "python_function", "ts": 1, "dur": 3}]},
            "neither GPU kernels nor CPU operators",
        ),
    ],
)
def test_exposed_refuses_what_is_not_a_profiler_trace_naming_the_file(tmp_path, content, words):
    path = tmp_path / "rank-00000.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(content, f)
    with pytest.raises(TraceError, match=words) as e:
        analyse_trace(path)
    assert str(path) in str(e.value)
    out = (
        subprocess.run(
            [sys.executable, "-m", "scalestudy", "exposed", str(path)],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if words == "are not JSON objects"
        else None
    )
    if out is not None:
        assert out.returncode == 2 and str(path) in out.stderr and "Traceback" not in out.stderr


def test_a_full_disk_names_the_path_and_its_free_space(tmp_path, monkeypatch):
    log = rawlog.RankLog(tmp_path, 0, "r")

    class Full:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        closed = False

    log._f = Full()
    with pytest.raises(OSError, match=r"rank-00000.jsonl: the disk is full \(\d+ bytes free on the file system"):
        log.log("iteration", {"step": 0})

    def no_room(fd):  # the buffered data reaches the disk at fsync (as on NFS)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_room)
    with pytest.raises(OSError, match=r"status.json: the disk is full \(\d+ bytes free") as e:
        rawlog.atomic_write_json(tmp_path / "status.json", {"status": "ok"})
    assert e.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert not list(tmp_path.glob(".status.json.*"))  # no temporary file left behind

    # half-written lines (the disk filled mid-line): finalising names the file, never a JSONDecodeError
    d = tmp_path / "run"
    d.mkdir()
    (d / rawlog.rank_metrics_file(0)).write_text('{"key": "iteration", "value": {"step": 0}, "metadata": {}}\n{"ke')
    rawlog.RankLog(d, 0, "r").write_status("ok")
    with pytest.raises(rawlog.CorruptLogError, match=r"rank-00000.jsonl: line 2 is cut short .*bytes free"):
        rawlog.try_finalize(d, 1)
    assert not (d / rawlog.LOCK_FILE).exists() and not (d / rawlog.STATUS_FILE).exists()


def test_a_read_only_directory_is_named(tmp_path, monkeypatch):
    import tempfile

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    with pytest.raises(OSError, match=r"status.json: the file system is read-only \(\d+ bytes free"):
        rawlog.atomic_write_json(tmp_path / "status.json", {})


def test_a_launch_whose_log_was_cut_short_names_the_file_and_the_free_space(tmp_path):
    from scalestudy.launch.launcher import EXIT_HARNESS_ERROR, launch

    # a stand-in for the workers that leaves a half-written line (a disk that filled mid-line) and dies
    fake = tmp_path / "fake-python"
    fake.write_text(
        '#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = "--run-dir" ] && d="$2"; shift; done\n'
        'mkdir -p "$d"\nprintf \'{"key": "iteration", "value": {"step": 0}, "metadata": {}}\\n{"ke\' '
        '> "$d/rank-00000.jsonl"\nexit 1\n'
    )
    fake.chmod(0o755)
    spec = RunSpec(
        model="tiny", device="cpu", precision="fp32", procs_per_node=1, seq_len=32, warmup_iters=1, measured_iters=2
    )
    outcome = launch(spec, tmp_path / "run", time_limit_s=60, grace_s=1, log_path=tmp_path / "log", python=str(fake))
    assert outcome.exit_code == EXIT_HARNESS_ERROR
    assert (
        "the raw log could not be finished" in outcome.message
        and "rank-00000.jsonl: line 2 is cut short" in outcome.message
        and "bytes free on the file system" in outcome.message
    )
    assert "JSONDecodeError" not in (tmp_path / "log").read_text()
