"""Make run folders measured on a device machine fit to commit: the machine's absolute paths in
each run.json become relative, status.json's checksum of run.json and its seal are recomputed
(nothing else in it changes), and metrics.jsonl is gzipped. Refuses a run whose files other than
run.json still name one of the prefixes, and a run that does not read back.

    python benchmarks/import_device_runs.py DIR... --strip /root/out/c1/ --strip /work/main/.dev/i14/
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scalestudy.rawlog import (
    RUN_FILE,
    STATUS_FILE,
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
    run = json.loads((run_dir / RUN_FILE).read_text())
    atomic_write_json(run_dir / RUN_FILE, _relative(run, prefixes))
    status = json.loads((run_dir / STATUS_FILE).read_text())
    status.pop("seal", None)
    if RUN_FILE in status.get("files_sha256", {}):
        status["files_sha256"][RUN_FILE] = member_sha256(run_dir, RUN_FILE)
    write_status(run_dir / STATUS_FILE, status)
    compress_run(run_dir)
    for rel in status.get("files_sha256", {}):
        text = read_member_bytes(run_dir, rel).decode(errors="replace")
        if found := [p for p in prefixes if p in text]:
            raise SystemExit(f"{run_dir / rel}: still names {found} (only run.json is rewritten)")
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
