"""The model's readers take a raw-log run directory of `scalestudy instrument` as they take the file
the script before it made: a run directory written with a committed file's content gives the same
records, and the power fit, the communication fit, the burst check and the sweep's best rate read
from it are those of the file, so that a new measurement replaces a file by one path."""

import dataclasses
import gzip
import hashlib
import json
from pathlib import Path

import pytest
from instrument_fakes import record_run

from scalestudy.measure.instruments import content_sha256, read_instrument, sweep_best
from scalestudy.measure.rawlog import RawLogError
from scalestudy.perfmodel import burst_check, power
from scalestudy.spec.instruments import BurstRateSpec, CommPowerSpec, MatmulSweepSpec, PowerDutySpec

REPO = Path(__file__).resolve().parents[2]
DUTY, COMM = "data/power-duty/h200-power-duty.jsonl.gz", "data/comm-power/h200-comm-power.jsonl.gz"
BURST, SWEEP = "data/burst-rate/h100-burst-rate.jsonl.gz", "data/h200-matmul/h200-matmul-sweep.jsonl.gz"


def as_run(root: Path, rel: str, spec) -> Path:
    """A sealed run directory under root/<rel's folder>/raw holding the committed file's lines as the
    instrument writes them: the header as run.json's measurement, every other line one record."""
    lines = [json.loads(line) for line in gzip.decompress((REPO / rel).read_bytes()).decode().splitlines()]
    if "key" in lines[0]:
        measurement = {**lines[0]["value"], **lines[0]["metadata"]}
    else:
        measurement = {("device_name" if k == "device" else k): v for k, v in lines[0].items() if k != "kind"}

    def body(log):
        for r in lines[1:]:
            if "key" in r:
                meta = dict(r["metadata"])
                index = {"index": meta.pop("index")} if "index" in meta else {}
                log.log(r["key"], {**r["value"], **meta}, **index)
            else:
                log.log(r["kind"], {k: v for k, v in r.items() if k != "kind"})

    return record_run(root / Path(rel).parent / "raw" / spec.run_id, spec, measurement, body)


def same_records(file: Path, run_dir: Path, kinds: tuple[str, ...]) -> None:
    old, new = read_instrument(file), read_instrument(run_dir)
    assert old.kind is None and new.kind is not None
    for kind in kinds:
        assert new.of(kind) == old.of(kind) and old.of(kind), kind
    assert {k: new.header[k] for k in old.header} == old.header


def without_sources(m) -> dict:
    d = dataclasses.asdict(m)
    d.pop("source")
    if d.get("comm"):
        d["comm"].pop("source")
    return d


def loaded(duty: Path, comm: Path) -> power.PowerModel:
    """What power.load gives for a GPU whose catalog entry names these two measurements."""
    return dataclasses.replace(power.fit_file(duty), comm=power.fit_comm(comm))


def test_the_duty_cycles_and_the_communication_phases_read_from_run_directories(tmp_path):
    duty, comm = as_run(tmp_path, DUTY, PowerDutySpec()), as_run(tmp_path, COMM, CommPowerSpec())
    same_records(REPO / DUTY, duty, ("phase", "sample"))
    same_records(REPO / COMM, comm, ("phase", "sample"))
    from_runs, from_files = loaded(duty, comm), loaded(REPO / DUTY, REPO / COMM)
    assert without_sources(from_runs) == without_sources(from_files)
    assert from_runs.source == from_files.source.replace("h200-power-duty.jsonl.gz", PowerDutySpec().run_id)
    assert f"({CommPowerSpec().run_id})" in from_runs.comm.source


def test_the_burst_check_and_the_sweeps_best_rate_read_from_run_directories(tmp_path):
    burst, sweep = as_run(tmp_path, BURST, BurstRateSpec()), as_run(tmp_path, SWEEP, MatmulSweepSpec())
    same_records(REPO / BURST, burst, ("phase", "sample"))
    same_records(REPO / SWEEP, sweep, ("gemm", "best"))
    model = power.load("NVIDIA H200", REPO)
    assert burst_check.rows(burst, model) == burst_check.rows(REPO / BURST, model)
    assert sweep_best(sweep) == sweep_best(REPO / SWEEP) == (817.75, 817.75)


def test_a_run_directory_is_named_by_its_sealed_status_and_read_only_whole(tmp_path):
    run = as_run(tmp_path, BURST, BurstRateSpec())
    assert content_sha256(run) == hashlib.sha256((run / "status.json").read_bytes()).hexdigest()
    assert content_sha256(REPO / BURST) == hashlib.sha256((REPO / BURST).read_bytes()).hexdigest()
    assert content_sha256(tmp_path / "nothing") is None
    metrics = run / "metrics.jsonl.gz"
    metrics.write_bytes(
        gzip.compress(gzip.decompress(metrics.read_bytes()).replace(b'"tflops": 680.', b'"tflops": 780.'))
    )
    model = power.load("NVIDIA H200", REPO)
    for read in (read_instrument, content_sha256, lambda path: burst_check.rows(path, model)):
        with pytest.raises(RawLogError, match="sha256 differs from the one recorded in status.json"):
            read(run)
    with pytest.raises(RawLogError, match="a run of kind 'burst-rate', not comm-power"):
        power.fit_comm(as_run(tmp_path / "other", BURST, BurstRateSpec()))
