"""Reading the instruments' measurements (spec/instruments.py) for the performance model, from either
form they take: a raw-log run directory of `scalestudy instrument NAME` (read through the raw-log
reader, which checks its seal and checksums), or a file made by the script that measured it before
the command existed (data/power-duty, data/comm-power, data/h200-matmul, data/h100-matmul,
data/burst-rate: JSON lines, gzipped).

Both give one InstrumentLog: `header`, the machine and the method (device_name, driver,
power_limit_w, ...: a script's `header` or `machine` line, a run's run.json `measurement`), and
`records`, one dict a record with its `kind` (phase, sample, gemm, best) and its fields (a script's
line without `kind`, or value and metadata merged; a run's record's value and metadata merged,
without the raw log's own rank, run_id and time_unix). A reader that switches from the file to a
run directory of the same measurement gets the same records. Pure Python: no torch.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from scalestudy.measure.rawlog import STATUS_FILE, CorruptLogError, RawLogError, read_run, sha256_file

KINDS = ("matmul-sweep", "power-duty", "comm-power", "burst-rate")
RAWLOG_METADATA = ("rank", "run_id", "time_unix")  # the raw log's own, not the measurement's


@dataclass(frozen=True)
class InstrumentLog:
    """An instrument's JSONL file as read: its header and records."""

    path: Path
    kind: str | None  # the run's kind; None for a script's file
    header: dict
    records: tuple[dict, ...]

    def of(self, kind: str) -> list[dict]:
        """The records of one kind, in the order they were written."""
        return [r for r in self.records if r["kind"] == kind]


def read_instrument(path: os.PathLike | str, kind: str | None = None) -> InstrumentLog:
    """The measurement at `path`, a run directory or a script's file; `kind` (one of KINDS) refuses
    a run of another instrument. Raises RawLogError naming the run where it is no finished run of
    that kind, or the file where a line is no JSON object."""
    p = Path(path)
    return _read_run(p, kind) if p.is_dir() else _read_file(p)


def _read_run(run_dir: Path, kind: str | None) -> InstrumentLog:
    log = read_run(run_dir)
    got = log.run.get("kind")
    if got not in KINDS or (kind is not None and got != kind):
        raise RawLogError(run_dir, f"a run of kind {got!r}, not {kind or ' or '.join(KINDS)}")
    if log.status.get("status") != "ok":
        raise RawLogError(
            run_dir, f"status {log.status.get('status')!r} ({log.status.get('error')}): not a finished measurement"
        )
    records = tuple(
        {"kind": r["key"], **r["value"], **{k: v for k, v in r["metadata"].items() if k not in RAWLOG_METADATA}}
        for r in log.records
        if r["key"] != "error"
    )
    return InstrumentLog(run_dir, got, dict(log.run.get("measurement") or {}), records)


def _read_file(path: Path) -> InstrumentLog:
    opener = gzip.open if path.name.endswith(".gz") else open
    header: dict = {}
    records = []
    with opener(path, "rt") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            r = json.loads(line)
            if not isinstance(r, dict):
                raise CorruptLogError(path, f"line {lineno} is no JSON object")
            if "key" in r:  # the matmul sweep's lines: key, value, metadata
                r = {"kind": r["key"], **(r.get("value") or {}), **(r.get("metadata") or {})}
            if r.get("kind") in ("header", "machine"):
                header = {("device_name" if k == "device" else k): v for k, v in r.items() if k != "kind"}
            else:
                records.append(r)
    return InstrumentLog(path, None, header, tuple(records))


def content_sha256(path: os.PathLike | str) -> str | None:
    """The sha256 that names a measurement's content: of a file's bytes, or, for a run directory, of its
    status.json (which seals the checksum of every other file) once the run reads whole; None where
    nothing is there. Raises RawLogError naming a damaged run or file."""
    p = Path(path)
    if p.is_dir():
        read_run(p)
        return hashlib.sha256((p / STATUS_FILE).read_bytes()).hexdigest()
    return sha256_file(p) if p.is_file() else None


def content_stamp(path: os.PathLike | str) -> tuple:
    """Sizes and modification times of a measurement's files: a key under which what was read from it
    may be kept while none of them changes."""
    p = Path(path)
    files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)


def sweep_best(path: os.PathLike | str) -> tuple[float, float]:
    """A matmul sweep's recorded best rate and the best of its `gemm` records (TFLOP/s), which agree
    in a whole sweep."""
    log = read_instrument(path, "matmul-sweep")
    best = log.of("best")
    if not best:
        raise ValueError(f"{path}: no `best` record (an unfinished sweep?)")
    return float(best[-1]["tflops"]), max(float(r["tflops"]) for r in log.of("gemm"))
