"""Finished runs from another machine brought into a study as they were written (`scalestudy import
runs`): each run directory is checked and copied byte for byte, never rewritten or resealed.

Refused, each with one sentence naming the run: a directory without status.json (the run did not
finish), a partial copy (a file status.json lists is missing), a broken seal or checksum, a file
that names an absolute path of the machine it ran on, a run of another study (run.json's `study`)
or one the study does not plan, and a run already in the study with other bytes.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from scalestudy.measure import rawlog

# an absolute path of a machine: "/" then a directory name then another "/" (a bare "/" or "/dev" alone is none)
HOST_PATH = re.compile(
    r"(?<![\w.:/<>-])/(?:home|root|work|tmp|scratch|lustre|gpfs|mnt|opt|usr|var|data|srv|users?|"
    r'private|Users|net|fsx|shared)/[^\s"\']*'
)
TEXT_FILES = (rawlog.RUN_FILE, rawlog.STATUS_FILE)


class RunImportError(ValueError):
    """A run that cannot be imported: the message names the run and why."""


@dataclass(frozen=True)
class Imported:
    """One run directory imported: from where, to where, and whether it was copied."""

    run_id: str
    source: Path
    dest: Path
    copied: bool  # False: already there, byte for byte


def run_dirs(paths) -> list[Path]:
    """The run directories under each path (a run directory itself, or a folder of them)."""
    out = []
    for p in map(Path, paths):
        if not p.is_dir():
            raise RunImportError(f"{p}: not a directory")
        found = [p] if (p / rawlog.RUN_FILE).exists() or (p / rawlog.STATUS_FILE).exists() else rawlog.find_runs(p)
        if not found:
            raise RunImportError(f"{p}: holds no run directory (no run.json under it)")
        out += found
    return out


def host_paths(run_dir: Path) -> list[str]:
    """'file: path' for every absolute path of a machine in the run's JSON files and metrics."""
    found = []
    names = list(TEXT_FILES) + [rawlog.METRICS_FILE]
    for name in names:
        p = rawlog.member_path(run_dir, name)
        if not p.exists():
            continue
        text = rawlog.read_member_bytes(run_dir, name).decode("utf-8", errors="replace")
        found += [f"{p.name}: {m.group(0)}" for m in HOST_PATH.finditer(text)]
    return found


def check_run(run_dir: Path, study) -> str:
    """The run id of a finished, sealed, portable run of `study`; RunImportError naming it otherwise."""
    name = run_dir.name
    status_path = run_dir / rawlog.STATUS_FILE
    if not status_path.exists():
        raise RunImportError(f"run {name} ({run_dir}): no status.json: the run did not finish (or the copy is partial)")
    try:
        status = json.loads(status_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RunImportError(f"run {name}: status.json is unreadable ({e})") from None
    missing = [rel for rel in status.get("files_sha256") or {} if not rawlog.member_path(run_dir, rel).exists()]
    if missing:
        raise RunImportError(f"run {name}: a partial copy: {', '.join(missing)} listed in status.json but missing")
    try:
        log = rawlog.read_run(run_dir)
    except rawlog.RawLogError as e:
        raise RunImportError(f"run {name}: {e.reason} ({e.path})") from None
    paths = host_paths(run_dir)
    if paths:
        raise RunImportError(
            f"run {log.run_id}: names {len(paths)} absolute path{'s' if len(paths) > 1 else ''} of the "
            f"machine it ran on (first: {paths[0]}); a raw log is committed as written and must name "
            "none"
        )
    recorded = log.run.get("study")
    if recorded not in (None, study.name):
        raise RunImportError(f"run {log.run_id}: a run of study {recorded!r}, not of {study.name!r}")
    if log.run_id not in study.run_ids:
        raise RunImportError(f"run {log.run_id}: study {study.name!r} plans no such run ({study.source})")
    if run_dir.name != log.run_id:
        raise RunImportError(f"run {log.run_id}: its directory is named {run_dir.name!r}, not its run id")
    return log.run_id


def _same_bytes(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    other = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return files == other and all((a / f).read_bytes() == (b / f).read_bytes() for f in files)


def import_runs(paths, study) -> list[Imported]:
    """Check every run under `paths` first, then copy them into study.raw_dir as they are: nothing is
    copied when one is refused."""
    checked = [(check_run(d, study), d) for d in run_dirs(paths)]
    seen: dict[str, Path] = {}
    for run_id, d in checked:
        if run_id in seen:
            raise RunImportError(f"run {run_id}: given twice ({seen[run_id]} and {d})")
        seen[run_id] = d
    out = []
    for run_id, d in checked:
        dest = Path(study.raw_dir) / run_id
        if dest.exists():
            if not _same_bytes(d, dest):
                raise RunImportError(
                    f"run {run_id}: already in {dest} with other bytes; a raw log is never "
                    "overwritten (move the old one aside first)"
                )
            out.append(Imported(run_id, d, dest, False))
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{run_id}.importing")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(d, tmp, copy_function=shutil.copy2)
        tmp.rename(dest)
        out.append(Imported(run_id, d, dest, True))
    return out
