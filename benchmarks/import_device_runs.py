"""Make run folders measured on a device machine fit to commit: the machine's absolute paths
(the prefixes given) are removed from every file status.json lists (run.json rewritten as JSON,
the others by plain replacement), status.json's checksums of those files and its seal are
recomputed (nothing else in it changes), and metrics.jsonl is gzipped. Fails on a run that
does not read back afterwards.

    python benchmarks/import_device_runs.py DIR... --strip DEVICE_OUT_DIR/ --strip DEVICE_CHECKOUT/
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from scalestudy.measure.rawlog import (
    RUN_FILE,
    STATUS_FILE,
    atomic_write_bytes,
    atomic_write_json,
    compress_run,
    member_sha256,
    read_member_bytes,
    read_run,
    write_status,
)


def _relative(obj, prefixes: list[str]):
    if isinstance(obj, dict):
        return {k: _relative(v, prefixes) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_relative(v, prefixes) for v in obj]
    if isinstance(obj, str):
        for p in prefixes:
            obj = obj.replace(p, "")
    return obj


def import_run(run_dir: Path, prefixes: list[str]) -> None:
    status = json.loads((run_dir / STATUS_FILE).read_text())
    status.pop("seal", None)
    for rel in status.get("files_sha256", {}):
        path = run_dir / rel
        if rel == RUN_FILE:
            atomic_write_json(path, _relative(json.loads(path.read_text()), prefixes))
        else:
            data = read_member_bytes(run_dir, rel)
            text = (gzip.decompress(data) if rel.endswith(".gz") else data).decode()
            if any(p in text for p in prefixes):  # e.g. a trace's name: a plain replacement
                for p in prefixes:
                    text = text.replace(p, "")
                data = text.encode()
                atomic_write_bytes(path, gzip.compress(data, 9, mtime=0) if rel.endswith(".gz") else data)
        status["files_sha256"][rel] = member_sha256(run_dir, rel)
    write_status(run_dir / STATUS_FILE, status)
    compress_run(run_dir)
    read_run(run_dir)  # checksums and seal hold


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="run folders (each holding run.json and status.json)")
    p.add_argument("--strip", action="append", required=True, help="an absolute path prefix to remove")
    a = p.parse_args(argv)
    for run_dir in a.runs:
        if not (run_dir / RUN_FILE).exists():
            raise SystemExit(f"{run_dir}: no {RUN_FILE}: not a run folder")
        import_run(run_dir, a.strip)
        print(f"imported {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
