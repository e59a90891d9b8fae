"""Where every number of a figure, table or claims file comes from.

`provenance(file)` takes a figure (its .pdf, .png or .csv), a table (data/<study>/tables/*.csv)
or the claims file (claims.csv or claims.md) and returns, for every row of the CSV behind it, the
run ids named in its `run_ids` (';'-joined) or `run_id` column, and for every such run: its
raw-log directory, status, each raw-log file with the sha256 recorded in status.json and the one
recomputed now, the spec, the git commit of the package that ran it (provenance.package.git) and
the environment (python, torch, CUDA, NCCL, library versions, hosts, devices, SLURM job).

The raw logs are found from the file's place in the project layout (figures/<study>/... or
data/<study>/tables/... next to data/<study>/raw), or from `raw_dir`.

A predicted run (run.json kind `predicted`, scalestudy.perfmodel) names the measured runs the model
was calibrated from (provenance.calibration.runs: run id, raw-log directory relative to the project
root, the sha256 of each file when the prediction was made); its provenance lists them with their
own provenance, and a calibration file that is missing or changed since is a problem (the
prediction is stale).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from scalestudy.measure.csv_format import read_csv_rows, split_list
from scalestudy.measure.instruments import content_sha256
from scalestudy.measure.rawlog import (
    RUN_FILE,
    STATUS_FILE,
    RawLogError,
    member_path,
    member_sha256,
    read_json_file,
    seal_digest,
    seal_problem,
    sha256_file,
)

RUN_ID_COLUMNS = ("run_ids", "run_id")


class ProvenanceError(Exception):
    """A file whose provenance cannot be traced, naming it."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        super().__init__(f"{path}: {reason}")


def table_of(file: Path) -> Path:
    """The CSV behind a figure's pdf/png or the claims markdown."""
    if file.suffix in (".pdf", ".png", ".md", ".svg"):
        return file.with_suffix(".csv")
    return file


def infer_raw_dir(file: Path) -> Path:
    f = file.resolve()
    parts = f.parts
    # <root>/figures/<study>/<name>.<ext>
    if len(parts) >= 3 and parts[-3] == "figures":
        return f.parent.parent.parent / "data" / f.parent.name / "raw"
    # <root>/data/<study>/tables/<name>.csv
    if len(parts) >= 4 and parts[-2] == "tables" and parts[-4] == "data":
        return f.parent.parent / "raw"
    raise ProvenanceError(file, "not under figures/<study>/ or data/<study>/tables/: pass the raw-log directory")


def _environment(prov: dict) -> dict:
    devices = prov.get("devices") or {}
    return {
        "python": prov.get("python"),
        "platform": prov.get("platform"),
        "torch": prov.get("torch"),
        "cuda": prov.get("cuda"),
        "nccl": prov.get("nccl"),
        "libraries": prov.get("libraries"),
        "hosts": prov.get("hosts"),
        "devices": {"count": devices.get("count"), "names": devices.get("names")},
        "slurm": prov.get("slurm"),
        "command": prov.get("command"),
        "model": prov.get("model"),
        "cluster": (prov.get("cluster") or {}).get("name") if isinstance(prov.get("cluster"), dict) else None,
    }


def run_provenance(run_dir: Path) -> dict:
    """One run's files, checksums, spec, commit and environment (read directly, so that a broken
    run still shows what is there)."""
    out: dict = {"raw_dir": str(run_dir), "problems": []}
    status_path, run_path = run_dir / STATUS_FILE, run_dir / RUN_FILE
    if run_dir.is_symlink():  # as the aggregation and the audit: never read through a link
        out["problems"].append(
            f"{run_dir}: a symbolic link (to {run_dir.resolve()}): a run directory is read where "
            "it lies, never through a link"
        )
        return out
    if not run_dir.is_dir():
        out["problems"].append(f"{run_dir}: no such run directory")
        return out
    status: dict = {}
    run: dict = {}
    for path, target in ((status_path, "status"), (run_path, "run")):
        try:
            data = read_json_file(path, run_dir)
        except FileNotFoundError:
            out["problems"].append(f"{path}: missing")
            continue
        except RawLogError as e:  # not JSON, a FIFO, a link out of the run: named, never opened
            out["problems"].append(str(e))
            continue
        (status if target == "status" else run).update(data)
    files = []
    for rel, digest in sorted((status.get("files_sha256") or {}).items()):
        p = member_path(run_dir, rel)
        try:
            now = member_sha256(run_dir, rel)
        except RawLogError as e:  # a damaged gzip, a FIFO, a link out of the run
            files.append({"path": rel, "sha256_recorded": digest, "sha256_now": None, "ok": False})
            out["problems"].append(str(e))
            continue
        ok = now == digest
        files.append({"path": rel, "sha256_recorded": digest, "sha256_now": now, "ok": ok})
        if not ok:
            out["problems"].append(f"{p}: " + ("missing" if now is None else "sha256 differs from status.json"))
    if status:
        broken = seal_problem(status)
        if broken:
            out["problems"].append(f"{status_path}: {broken}")
        # status.json's own record is its seal: the sha256 of its content without the seal
        files.append(
            {
                "path": STATUS_FILE,
                "sha256_recorded": status.get("seal"),
                "sha256_now": seal_digest(status),
                "ok": broken is None,
                "sha256_file": sha256_file(status_path, run_dir),
            }
        )
    prov = run.get("provenance") or {}
    git = (prov.get("package") or {}).get("git") or {}
    if run.get("kind") == "predicted":
        cal = calibration_provenance(run_dir, run)
        out["calibration"] = cal
        out["calibration_digest"] = (prov.get("calibration") or {}).get("digest")
        out["problems"].extend(p for c in cal for p in c["problems"])
        shares = calibration_provenance(run_dir, run, measured_inputs=True)
        out["measured_inputs"] = shares
        out["problems"].extend(p for c in shares for p in c["problems"])
        measured = measured_files_provenance(run_dir, run)
        out["measured_files"] = measured
        out["problems"].extend(p for f in measured for p in f["problems"])
    if prov.get("imported"):  # a raw log made from public files elsewhere (scalestudy import)
        src = prov.get("source") or {}
        out["source"] = {
            "repository": src.get("repository"),
            "commit": src.get("commit"),
            "files": [{"path": p, "sha256": d} for p, d in sorted((src.get("files") or {}).items())],
        }
    out.update(
        status=status.get("status"),
        error=status.get("error"),
        kind=run.get("kind"),
        config_id=run.get("config_id"),
        files=files,
        spec=run.get("spec"),
        git={"commit": git.get("commit"), "dirty": git.get("dirty"), "reason": git.get("reason")},
        package_version=(prov.get("package") or {}).get("version"),
        environment=_environment(prov),
    )
    return out


def project_root_of(run_dir: Path) -> Path:
    """<root>/data/<study>/raw/<run>: the project root of a run directory in the standard layout."""
    p = Path(run_dir).resolve()
    return p.parents[3] if len(p.parents) > 3 else p.parent


def calibration_provenance(run_dir: Path, run: dict, *, measured_inputs: bool = False) -> list[dict]:
    """The measured runs behind a predicted run, each with its provenance and any problem (missing,
    or a file whose sha256 differs from the one the prediction recorded): those it was calibrated
    from, or with measured_inputs the rank-share runs it took inputs from (perfmodel.rank_shares)."""
    prov = run.get("provenance") or {}
    runs = prov.get("measured_inputs") or [] if measured_inputs else (prov.get("calibration") or {}).get("runs") or []
    root = project_root_of(run_dir)
    stamp = []  # the files' sizes and times: a changed file is never answered from the cache
    for c in runs:
        d = root / c.get("raw_dir", "")
        for rel in sorted(c.get("files_sha256") or {}):
            p = member_path(d, rel)
            st = p.stat() if p.exists() else None
            stamp.append((str(p), st.st_size if st else None, st.st_mtime_ns if st else None))
    return [
        dict(c, problems=list(c["problems"]))
        for c in _calibration_cached(str(root), json.dumps(runs, sort_keys=True), tuple(stamp))
    ]


def measured_files_provenance(run_dir: Path, run: dict) -> list[dict]:
    """The measurement files a predicted run read besides its calibration runs (the power
    duty-cycle log, achievable-matmul sweeps: perfmodel.rawlog_out.measured_files), each with its
    recorded and current sha256 (of a raw-log run directory: measure.instruments.content_sha256) and any
    problem (missing, or changed since the prediction)."""
    files = ((run.get("provenance") or {}).get("calibration") or {}).get("files") or []
    root = project_root_of(run_dir)
    out = []
    for f in files:
        p = root / str(f.get("path", ""))
        try:
            now = content_sha256(p)
        except RawLogError as e:
            out.append(
                {
                    "path": str(p),
                    "what": f.get("what"),
                    "sha256_recorded": f.get("sha256"),
                    "sha256_now": None,
                    "problems": [str(e)],
                }
            )
            continue
        problems = (
            []
            if now == f.get("sha256")
            else [
                f"{p}: "
                + ("missing" if now is None else "changed since the predictions were made")
                + f" ({f.get('what')}; the predictions made from it are stale)"
            ]
        )
        out.append(
            {
                "path": str(p),
                "what": f.get("what"),
                "sha256_recorded": f.get("sha256"),
                "sha256_now": now,
                "problems": problems,
            }
        )
    return out


@lru_cache(maxsize=32)
def _calibration_cached(root: str, runs_json: str, stamp: tuple) -> tuple[dict, ...]:
    out = []
    for c in json.loads(runs_json):
        d = Path(root) / c.get("raw_dir", "")
        item = {
            "run_id": c.get("run_id"),
            "raw_dir": str(d),
            "problems": [],
            **({"study": c["study"]} if c.get("study") else {}),
        }
        if not d.is_dir():
            what = "measured input" if c.get("study") else "calibration"
            item["problems"].append(
                f"{d}: {what} run {c.get('run_id')} is missing (predictions made from it cannot be traced)"
            )
        else:
            for rel, digest in sorted((c.get("files_sha256") or {}).items()):
                try:
                    now = member_sha256(d, rel)
                except RawLogError as e:
                    item["problems"].append(str(e))
                    continue
                if now != digest:
                    item["problems"].append(
                        f"{member_path(d, rel)}: "
                        + ("missing" if now is None else "changed since the predictions were made")
                        + " (the predictions made from it are stale)"
                    )
            sub = run_provenance(d)
            item.update(
                status=sub.get("status"), git=sub.get("git"), environment=sub.get("environment"), files=sub.get("files")
            )
            item["problems"].extend(sub["problems"])
        out.append(item)
    return tuple(out)


def provenance(file, raw_dir=None) -> dict:
    """The provenance of every row of `file` (see the module docstring)."""
    file = Path(file)
    table = table_of(file)
    if not table.exists():
        raise ProvenanceError(table, "missing (the CSV behind the file)")
    raw = Path(raw_dir) if raw_dir is not None else infer_raw_dir(file)
    rows = read_csv_rows(table)
    column = next((c for c in RUN_ID_COLUMNS if rows and c in rows[0]), None)
    if column is None:
        with open(table, encoding="utf-8") as f:
            head = f.readline()
        column = next((c for c in RUN_ID_COLUMNS if c in head.strip().split(",")), None)
    if column is None:
        raise ProvenanceError(table, "has no run_ids or run_id column: its rows cannot be traced to runs")
    out_rows, runs = [], {}
    for i, row in enumerate(rows, start=1):
        ids = split_list(row.get(column))
        out_rows.append({"row": i, "values": row, "run_ids": ids})
        for rid in ids:
            if rid not in runs:
                runs[rid] = run_provenance(raw / rid)  # where the tables read it from (aggregate), nowhere else
    problems = [p for r in runs.values() for p in r["problems"]]
    return {
        "file": str(file),
        "table": str(table),
        "raw_dir": str(raw),
        "run_id_column": column,
        "rows": out_rows,
        "runs": runs,
        "problems": problems,
    }


def _file_lines(c: dict, indent: str) -> list[str]:
    return [
        f"{indent}{f['sha256_now']}  {f['path']} { ({True: 'ok', False: 'MISMATCH', None: ''}[f['ok']]) }".rstrip()
        for f in c.get("files") or []
    ]


def format_text(prov: dict) -> str:
    """A readable account of provenance()'s result: each run once, each calibration once."""
    calibrations: dict[str, list] = {}
    lines = [f"{prov['file']}: {len(prov['rows'])} rows from {prov['table']}, raw logs in {prov['raw_dir']}"]
    for r in prov["rows"]:
        v = r["values"]
        key = ", ".join(
            f"{k}={v[k]}"
            for k in ("id", "panel", "series", "x", "y", "config_id", "op", "size_bytes", "verdict")
            if v.get(k)
        )
        lines.append(f"row {r['row']}: {key or '(no key columns)'}")
        for rid in r["run_ids"]:
            lines.append(f"  run {rid}")
    for rid, run in sorted(prov["runs"].items()):
        lines.append(f"run {rid}: status {run.get('status')}, {run['raw_dir']}")
        git = run.get("git") or {}
        if not run.get("source"):  # an imported run ran no code of this package: its source says where it is from
            lines.append(f"  git {git.get('commit')}{' (dirty)' if git.get('dirty') else ''}")
        env = run.get("environment") or {}
        if run.get("kind") == "predicted":  # no machine ran it: the model's version stands for the environment
            lines.append(
                f"  predicted by {env.get('model') or 'scalestudy.perfmodel'} on cluster "
                f"{env.get('cluster') or '?'}; devices {', '.join((env.get('devices') or {}).get('names') or [])}"
            )
        elif env and not run.get("source"):
            lines.append(
                f"  python {env.get('python')}, torch {env.get('torch')}, cuda {env.get('cuda')}, "
                f"nccl {env.get('nccl')}; hosts {', '.join(env.get('hosts') or [])}; devices "
                f"{', '.join((env.get('devices') or {}).get('names') or [])}; slurm job "
                f"{(env.get('slurm') or {}).get('job_id')}"
            )
        for f in run.get("files", []):
            mark = {True: "ok", False: "MISMATCH", None: ""}[f["ok"]]
            lines.append(f"  {f['sha256_now']}  {f['path']} {mark}".rstrip())
        if run.get("source"):
            src = run["source"]
            lines.append(f"  imported from {src.get('repository')} at commit {src.get('commit')}:")
            for f in src["files"]:
                lines.append(f"    {f['sha256']}  {f['path']}")
        if run.get("kind") == "predicted":
            digest = run.get("calibration_digest") or "?"
            calibrations.setdefault(digest, run.get("calibration") or [])
            lines.append(f"  PREDICTED by scalestudy.perfmodel; calibration {digest} (its runs listed once below)")
            for c in run.get("measured_inputs") or []:
                lines.append(
                    f"  measured input: rank share of study {c.get('study')}, run {c['run_id']}: status "
                    f"{c.get('status')}, {c['raw_dir']}"
                )
                lines += _file_lines(c, "    ")
    for digest, runs in calibrations.items():
        lines.append(f"calibration {digest}: the predictions above were calibrated from")
        for c in runs:
            lines.append(f"  run {c['run_id']}: status {c.get('status')}, {c['raw_dir']}")
            lines += _file_lines(c, "    ")
    for p in prov["problems"]:
        lines.append(f"PROBLEM {p}")
    return "\n".join(lines) + "\n"
