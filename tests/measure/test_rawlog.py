import json

import pytest

from scalestudy.measure import rawlog


def write_rank(run_dir, rank, status, steps=2, error=None):
    log = rawlog.RankLog(run_dir, rank, "rid")
    for s in range(steps):
        log.log("iteration", {"step": s, "phase": "measured", "step_time_s": 0.1, "tokens": 10, "loss": 1.0})
    log.write_status(status, error=error)


def make_run(tmp_path, statuses):
    d = tmp_path / "run"
    d.mkdir()
    rawlog.atomic_write_json(d / rawlog.RUN_FILE, {"run_id": "rid", "spec": {}, "provenance": {}})
    for r, st in enumerate(statuses):
        if st is not None:
            write_rank(d, r, st, error=None if st == "ok" else f"rank {r} failed")
    return d


def test_last_rank_finalizes_and_merges(tmp_path):
    d = make_run(tmp_path, ["ok", None])
    assert not rawlog.try_finalize(d, 2)
    assert not (d / "status.json").exists()
    write_rank(d, 1, "ok")
    assert rawlog.try_finalize(d, 2)
    run = rawlog.read_run(d)
    assert run.status["status"] == "ok"
    assert len(list(run.iterations())) == 4
    assert [r["value"]["step"] for r in run.iterations()] == [0, 0, 1, 1]
    assert not list(d.glob("rank-*"))
    assert set(run.status["files_sha256"]) == {"run.json", "metrics.jsonl"}


@pytest.mark.parametrize(
    "statuses,expected,culprits",
    [
        (["comm_error", "oom"], "oom", [1]),
        (["timeout", "timeout"], "timeout", [0, 1]),
        (["comm_error", "ok"], "comm_error", [0]),
        (["crashed", "comm_error", "comm_error"], "crashed", [0]),
        (["timeout", "crashed"], "crashed", [1]),  # a peer's crash makes torchrun SIGTERM the others
    ],
)
def test_status_priority(tmp_path, statuses, expected, culprits):
    d = make_run(tmp_path, statuses)
    assert rawlog.try_finalize(d, len(statuses))
    st = json.loads((d / "status.json").read_text())
    assert st["status"] == expected and st["culprit_ranks"] == culprits
    assert st["error"].startswith(f"rank {culprits[0]}")


def test_forced_finalize_blames_the_silent_rank(tmp_path):
    d = make_run(tmp_path, ["timeout", None])
    assert rawlog.try_finalize(d, 2, force=True)
    st = rawlog.read_run(d).status
    assert st["status"] == "crashed" and st["culprit_ranks"] == [1]


def test_incomplete_run_is_never_read(tmp_path):
    d = make_run(tmp_path, ["ok", None])
    with pytest.raises(rawlog.IncompleteRunError, match="status.json"):
        rawlog.read_run(d)


def test_corrupt_line_names_file_and_line(tmp_path):
    d = make_run(tmp_path, ["ok"])
    rawlog.try_finalize(d, 1)
    m = d / "metrics.jsonl"
    m.write_text(m.read_text() + "{not json\n")
    with pytest.raises(rawlog.CorruptLogError, match="sha256"):
        rawlog.read_run(d)
    with pytest.raises(rawlog.CorruptLogError, match=r"metrics.jsonl: line 3"):
        rawlog.read_run(d, verify_checksums=False)


def test_tampered_byte_detected(tmp_path):
    d = make_run(tmp_path, ["ok"])
    rawlog.try_finalize(d, 1)
    run_json = d / "run.json"
    data = bytearray(run_json.read_bytes())
    data[5] ^= 1
    run_json.write_bytes(bytes(data))
    with pytest.raises(rawlog.RawLogError, match="run.json"):
        rawlog.read_run(d)


def test_unknown_status_rejected(tmp_path):
    log = rawlog.RankLog(tmp_path, 0, "rid")
    with pytest.raises(ValueError):
        log.write_status("exploded")


def test_atomic_write_leaves_no_temp(tmp_path):
    rawlog.atomic_write_json(tmp_path / "x.json", {"a": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_compressed_metrics_keep_their_checksum(tmp_path):
    d = make_run(tmp_path, ["ok"])
    rawlog.try_finalize(d, 1)
    before = rawlog.read_run(d).records
    rawlog.compress_run(d)
    assert not (d / "metrics.jsonl").exists() and (d / "metrics.jsonl.gz").exists()
    assert rawlog.read_run(d).records == before
    gz = d / "metrics.jsonl.gz"
    import gzip

    gz.write_bytes(gzip.compress(gzip.decompress(gz.read_bytes()).replace(b"1.0", b"2.0")))
    with pytest.raises(rawlog.CorruptLogError, match="sha256"):
        rawlog.read_run(d)


def test_the_launcher_gzips_a_finished_gpu_run_and_leaves_a_cpu_run_plain(tmp_path):
    from types import SimpleNamespace

    from scalestudy.launch.launcher import compress_gpu_run

    for sub in ("cpu", "gpu", "unfinished"):
        (tmp_path / sub).mkdir()
    cpu, gpu = make_run(tmp_path / "cpu", ["ok"]), make_run(tmp_path / "gpu", ["ok"])
    for d in (cpu, gpu):
        rawlog.try_finalize(d, 1)
    before = rawlog.read_run(gpu).records
    assert not compress_gpu_run(SimpleNamespace(device="cpu"), cpu) and (cpu / "metrics.jsonl").exists()
    assert compress_gpu_run(SimpleNamespace(device="cuda"), gpu)
    assert (gpu / "metrics.jsonl.gz").exists() and not (gpu / "metrics.jsonl").exists()
    assert rawlog.read_run(gpu).records == before  # the seal holds
    unfinished = make_run(tmp_path / "unfinished", ["ok"])
    assert not compress_gpu_run(SimpleNamespace(device="cuda"), unfinished)
