"""The one-time migration of committed raw logs that named paths of the machine they ran on: the paths
become portable, the run says what changed, is sealed again and reads back; a run with a broken
seal is refused, one without such a path is left byte for byte."""

import json

import pytest

from scalestudy.measure import rawlog
from scalestudy.measure.migrate import MIGRATION, migrate
from scalestudy.measure.run_import import host_paths


def sealed_run(d, provenance):
    d.mkdir(parents=True)
    rawlog.atomic_write_json(
        d / rawlog.RUN_FILE, {"run_id": d.name, "kind": "collectives", "spec": {}, "provenance": provenance}
    )
    rawlog.atomic_write_text(d / rawlog.METRICS_FILE, json.dumps(rawlog.record("x", 1)) + "\n")
    files = {n: rawlog.sha256_file(d / n) for n in (rawlog.RUN_FILE, rawlog.METRICS_FILE)}
    rawlog.write_status(
        d / rawlog.STATUS_FILE, {"schema": rawlog.SCHEMA, "status": "ok", "error": None, "files_sha256": files}
    )
    return d


def test_paths_made_portable_said_in_the_run_and_sealed_again(tmp_path):
    a = sealed_run(
        tmp_path / "raw" / "a",
        {
            "command": ["/work/main/src/scalestudy/__main__.py", "train", "--run-dir", "/root/out/raw/a"],
            "environment": {"CUDA_HOME": "/usr/local/cuda"},
        },
    )
    b = sealed_run(tmp_path / "raw" / "b", {"command": ["scalestudy", "train"], "environment": {}})
    before_b = {p.name: p.read_bytes() for p in b.iterdir()}
    metrics_a = (a / rawlog.METRICS_FILE).read_bytes()
    assert host_paths(a) and not host_paths(b)
    done = migrate(tmp_path / "raw")
    assert list(done) == ["a"]
    run = rawlog.read_run(a).run  # reads back whole: seal and checksums hold
    assert run["provenance"]["command"] == ["scalestudy/__main__.py", "train", "--run-dir", "<host>/raw/a"]
    assert run["provenance"]["environment"]["CUDA_HOME"] == "<host>/local/cuda"
    (m,) = run["migrations"]
    assert m["migration"] == MIGRATION and m["changed"]["provenance.environment.CUDA_HOME"] == "<host>/local/cuda"
    assert not host_paths(a) and (a / rawlog.METRICS_FILE).read_bytes() == metrics_a
    assert {p.name: p.read_bytes() for p in b.iterdir()} == before_b
    assert migrate(tmp_path / "raw") == {}  # once only


def test_a_run_whose_seal_does_not_hold_is_not_migrated(tmp_path):
    a = sealed_run(tmp_path / "raw" / "a", {"environment": {"CUDA_HOME": "/usr/local/cuda"}})
    status = json.loads((a / rawlog.STATUS_FILE).read_text())
    status["status"] = "crashed"
    rawlog.atomic_write_json(a / rawlog.STATUS_FILE, status)
    with pytest.raises(rawlog.RawLogError, match="edited after the run"):
        migrate(tmp_path / "raw")
