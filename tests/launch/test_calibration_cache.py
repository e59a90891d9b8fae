"""The calibration kept on disk (launch/calibration_cache.py): read on a second call, recomputed when a
raw log, the model's code or the entry itself changes; the step times kept beside it likewise. No timing."""

import json
import os
import shutil
from pathlib import Path

import pytest

from scalestudy.measure.code_version import MODEL_ROOTS, PACKAGE_DIR, analysis_sources
from scalestudy.launch import calibration_cache as cc
from scalestudy.perfmodel import predict
from scalestudy.perfmodel.cluster import load_cluster
from scalestudy.perfmodel.options import ModelOptions

REPO = Path(__file__).resolve().parents[2]
CAL = "data/h200-reference/raw"
TRACED = "llama2-7b-n1x1-r1s1t1p1-gb2-788fb17cca-seed0"


@pytest.fixture
def raw(tmp_path):
    """A copy of the calibration runs under a root of its own."""
    shutil.copytree(REPO / CAL, tmp_path / "root" / CAL)
    return tmp_path / "root"


@pytest.fixture
def calls(monkeypatch):
    """predict.calibrate counted; it returns the committed runs' calibration (made once a process)."""
    made = []
    real = predict.cached_calibration(CAL, REPO)

    def fake(raw_dirs, root=".", fit_run_ids=None):
        made.append((list(raw_dirs), str(root)))
        return real

    monkeypatch.setattr(predict, "calibrate", fake)
    return made


def test_a_second_call_reads_the_entry(raw, calls, tmp_path):
    cache = tmp_path / "cache"
    a = cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 1 and calls[0] == ([CAL], str(raw.resolve()))
    entry = cc.entry_path([CAL], raw, cache)
    assert entry.is_file() and entry.parent == cache
    b = cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 1  # read, not calibrated
    assert b.digest == a.digest and b.compute.as_dict() == a.compute.as_dict() and b.fit_run_ids == a.fit_run_ids
    assert [h["predicted_step_s"] for h in b.held_out] == [h["predicted_step_s"] for h in a.held_out]


def test_a_changed_raw_log_recomputes(raw, calls, tmp_path):
    cache = tmp_path / "cache"
    cc.load_calibration([CAL], raw, directory=cache)
    status = raw / CAL / TRACED / "status.json"
    data = json.loads(status.read_text())
    data["files_sha256"]["metrics.jsonl"] = "0" * 64  # another checksum recorded
    status.write_text(json.dumps(data))
    cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 2
    cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 2  # the new entry holds
    # a file changed without its status.json: read again, not trusted
    metrics = raw / CAL / TRACED / "metrics.jsonl.gz"
    metrics.write_bytes(metrics.read_bytes() + b"\0")
    cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 3
    # a run gone
    shutil.rmtree(raw / CAL / TRACED)
    cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 4


def test_changed_model_code_recomputes(raw, calls, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cc.load_calibration([CAL], raw, directory=cache)
    monkeypatch.setattr(cc, "model_fingerprint", lambda root=".": "another model")
    cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 2


def test_the_fingerprint_covers_what_model_version_hashes():
    """model_fingerprint reads whole wings instead of following imports: every source model_version
    follows must be among them."""
    wings = tuple(PACKAGE_DIR / d for d in cc.MODEL_CODE)
    outside = [
        p
        for p in analysis_sources(MODEL_ROOTS)
        if p != PACKAGE_DIR / "__init__.py" and not any(w in p.parents for w in wings)
    ]
    assert not outside, outside


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "empty", "other-key"])
def test_a_damaged_entry_is_ignored_and_rewritten(raw, calls, tmp_path, damage):
    cache = tmp_path / "cache"
    cc.load_calibration([CAL], raw, directory=cache)
    entry = cc.entry_path([CAL], raw, cache)
    good = entry.read_bytes()
    bad = {
        "garbage": b"\x80not a cache entry\n" * 10,
        "truncated": good[: len(good) // 2],
        "flipped": good[:-10] + bytes([good[-10] ^ 0xFF]) + good[-9:],
        "empty": b"",
        "other-key": good.replace(good.split(b"\n")[1], b"0" * 64, 1),
    }[damage]
    entry.write_bytes(bad)
    cal = cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 2 and isinstance(cal, predict.Calibration)
    assert entry.read_bytes() != bad  # rewritten
    cc.load_calibration([CAL], raw, directory=cache)
    assert len(calls) == 2  # and read again


def test_a_payload_that_does_not_unpickle_is_recomputed(raw, calls, tmp_path):
    """Digests that check over a payload that is not a pickled entry: never used."""
    import hashlib

    cache = tmp_path / "cache"
    cc.load_calibration([CAL], raw, directory=cache)
    entry = cc.entry_path([CAL], raw, cache)
    key = entry.read_bytes().split(b"\n")[1]
    for payload in (b"not a pickle", __import__("pickle").dumps({"key_digest": key.decode(), "calibration": 1})):
        entry.write_bytes(cc.MAGIC + key + b"\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        before = len(calls)
        cc.load_calibration([CAL], raw, directory=cache)
        assert len(calls) == before + 1


def test_the_cache_off_and_an_unwritable_directory(raw, calls, tmp_path, monkeypatch):
    monkeypatch.setenv(cc.CACHE_ENV, "off")
    assert cc.cache_dir(raw) is None and cc.calibration_digest([CAL], raw) is None
    cc.load_calibration([CAL], raw)
    cc.load_calibration([CAL], raw)
    assert len(calls) == 2
    monkeypatch.setenv(cc.CACHE_ENV, str(tmp_path / "elsewhere"))
    assert cc.cache_dir(raw) == tmp_path / "elsewhere"
    monkeypatch.delenv(cc.CACHE_ENV)
    assert cc.cache_dir(raw) == raw / ".snakemake" / "scalestudy-cache"
    blocked = tmp_path / "file"
    blocked.write_text("a file where the directory would be")
    cc.load_calibration([CAL], raw, directory=blocked / "cache")  # cannot be written: calibrated, no error
    assert len(calls) == 3


def test_step_times_kept_and_checked(raw, tmp_path):
    cache = tmp_path / "cache"
    cluster = load_cluster("h100-paper", REPO)
    key = cc.calibration_digest([CAL], raw)
    st = cc.step_times([CAL], cluster, raw, ModelOptions(), calibration=key, directory=cache)
    assert st.get("a") is None
    st.put("a", 1.25)
    st.put("b", 0.1 + 0.2)  # not a short decimal: read back exactly
    st.save()
    again = cc.step_times([CAL], cluster, raw, ModelOptions(), calibration=key, directory=cache)
    assert again.values == {"a": 1.25, "b": 0.1 + 0.2}
    # another calibration, other options: not theirs
    assert cc.step_times([CAL], cluster, raw, ModelOptions(), calibration="x" * 64, directory=cache).values == {}
    path = again.path
    doc = json.loads(path.read_text())
    doc["step_time_s"]["a"] = 2.5  # a number changed under its digest
    path.write_text(json.dumps(doc))
    assert cc.step_times([CAL], cluster, raw, ModelOptions(), calibration=key, directory=cache).values == {}
    path.write_text("{not json")
    torn = cc.step_times([CAL], cluster, raw, ModelOptions(), calibration=key, directory=cache)
    assert torn.values == {}
    torn.put("a", 1.0)
    torn.save()
    assert cc.step_times([CAL], cluster, raw, ModelOptions(), calibration=key, directory=cache).values == {"a": 1.0}
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp")]  # written whole
    # no calibration key (the cache off): nothing read or written
    off = cc.step_times([CAL], cluster, raw, ModelOptions(), calibration=None, directory=cache)
    off.put("c", 3.0)
    off.save()
    assert off.path is None
