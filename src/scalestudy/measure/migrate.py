"""One-time migration of committed raw logs that name absolute paths of the machine they ran on
(`scalestudy migrate portable-paths`): before 2026-12-07 a run recorded its command line and
environment as they were (`/usr/local/cuda`, `/root/out/...`); runs now write them portable
(measure/portable.py) and `scalestudy import runs` refuses such a path.

Each path inside run.json becomes what the run would write now without its machine: a source file
from its import root (`.../src/scalestudy/__main__.py` -> `scalestudy/__main__.py`), any other path
`<host>/` and its last two parts. Nothing else changes. The run records what was changed in
run.json's `migrations` (each JSON key with its new value, the migration and its date; the old value,
a path of the machine, is not kept), its status.json takes the new sha256 of run.json and is sealed
again; the metrics are not touched.
A run that names no such path is left byte for byte as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

from scalestudy.measure import rawlog
from scalestudy.measure.portable import HOST
from scalestudy.measure.run_import import HOST_PATH

MIGRATION = "portable-paths"
DATE = "2026-12-07"
WHAT = (
    "absolute paths of the machine the run ran on, made portable (source files from their import root, other "
    "paths <host>/ and their last two parts); `changed` holds each key's new value; nothing else changed"
)


def portable(path: str) -> str:
    """A machine's absolute path as a run writes it now, without the machine: no working directory
    is assumed (the one the run had is unknown)."""
    if "/src/" in path and path.endswith(".py"):
        return path.rsplit("/src/", 1)[1]
    return f"{HOST}/" + "/".join(path.rstrip("/").rsplit("/", 2)[-2:])


def _walk(obj, where: str, changed: dict):
    if isinstance(obj, dict):
        return {k: _walk(v, f"{where}.{k}" if where else k, changed) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(v, f"{where}[{i}]", changed) for i, v in enumerate(obj)]
    if isinstance(obj, str):
        new = HOST_PATH.sub(lambda m: portable(m.group(0)), obj)
        if new != obj:
            changed[where] = new
        return new
    return obj


def migrate_run(run_dir: Path) -> dict:
    """Make one run's run.json portable and reseal it; returns {json key: new value} ({}: untouched).
    Refuses a run whose seal or checksums do not hold before (it would hide a damage)."""
    log = rawlog.read_run(run_dir)  # raises on a broken seal or checksum
    run_path = run_dir / rawlog.RUN_FILE
    run = json.loads(run_path.read_text())
    if any(m.get("migration") == MIGRATION for m in run.get("migrations", [])):
        return {}
    changed: dict = {}
    new = _walk({k: v for k, v in run.items() if k != "migrations"}, "", changed)
    if not changed:
        return {}
    new["migrations"] = run.get("migrations", []) + [
        {"migration": MIGRATION, "date": DATE, "what": WHAT, "changed": changed}
    ]
    rawlog.atomic_write_json(run_path, new)
    status = {k: v for k, v in log.status.items() if k != rawlog.SEAL_KEY}
    status["files_sha256"] = {**status["files_sha256"], rawlog.RUN_FILE: rawlog.sha256_file(run_path)}
    rawlog.write_status(run_dir / rawlog.STATUS_FILE, status)
    rawlog.read_run(run_dir)  # the migrated run reads back whole
    return changed


def migrate(raw_dir: Path | str) -> dict[str, dict]:
    """Every run under raw_dir; returns run id -> what changed (migrated runs only)."""
    out = {}
    for d in rawlog.find_runs(raw_dir):
        if (d / rawlog.STATUS_FILE).exists():
            changed = migrate_run(d)
            if changed:
                out[d.name] = changed
    return out
