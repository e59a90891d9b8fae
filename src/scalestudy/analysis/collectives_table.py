"""Rows of the collectives benchmark (the study's Figure 2) from `collective` records.

collectives.csv: one row per (run, op, message size): the record's numbers as logged, with the
run's id, seed and status. A failed benchmark run has one row with its status and error and no op.
collectives_summary.csv: one row per (op, size, world size, nodes, dtype, device) over seeds:
mean, std and Student-t 95% CI of busbw, algbw and time, n_seeds and the run ids.
A predicted benchmark (run.json kind `predicted`, scalestudy.perfmodel) says so in the summary's note.
"""

from __future__ import annotations

from scalestudy.analysis.stats import summarize
from scalestudy.measure.rawlog import RunLog

COLLECTIVE_COLUMNS = [
    "run_id",
    "config_id",
    "seed",
    "status",
    "error",
    "device",
    "device_names",
    "op",
    "size_bytes",
    "requested_bytes",
    "count",
    "dtype",
    "world_size",
    "nodes",
    "procs_per_node",
    "iters",
    "warmup",
    "in_place",
    "time_s",
    "algbw_GBps",
    "busbw_GBps",
    "busbw_factor",
    "correct",
    "raw_dir",
]
SUMMARY_KEYS = ["op", "size_bytes", "world_size", "nodes", "procs_per_node", "dtype", "device"]
SUMMARY_METRICS = ("busbw_GBps", "algbw_GBps", "time_s")
STAT_SUFFIXES = ("mean", "std", "ci95_low", "ci95_high", "n")
PREDICTED_NOTE = "PREDICTED by scalestudy.perfmodel (alpha-beta model), not measured"
COLLECTIVE_SUMMARY_COLUMNS = (
    SUMMARY_KEYS
    + ["device_names", "n_seeds", "all_correct"]
    + [f"{m}_{s}" for m in SUMMARY_METRICS for s in STAT_SUFFIXES]
    + ["note", "run_ids"]
)


def collective_rows(log: RunLog, cs, raw_dir: str | None = None) -> list[dict]:
    prov = log.run.get("provenance") or {}
    base = {
        "run_id": log.run_id,
        "config_id": log.run.get("config_id", cs.config_id),
        "seed": cs.seed,
        "status": log.status["status"],
        "error": log.status.get("error"),
        "device": cs.device,
        "device_names": sorted((prov.get("devices") or {}).get("names") or []),
        "raw_dir": raw_dir,
        "world_size": cs.world_size,
        "nodes": cs.nodes,
        "procs_per_node": cs.procs_per_node,
        "dtype": cs.dtype,
    }
    if log.run.get("kind") == "predicted":
        base["_predicted"] = True  # not a column: marks the summary's note
    recs = [r["value"] for r in log.records if r["key"] == "collective"]
    if log.status["status"] != "ok" or not recs:
        row = dict(base)
        if log.status["status"] == "ok":
            row["error"] = "the run logged no collective record"
        return [row]
    rows = []
    for v in recs:
        row = dict(base)
        for c in COLLECTIVE_COLUMNS:
            if c in v and c not in ("run_id", "config_id", "seed", "status", "error", "device", "raw_dir"):
                row[c] = v[c]
        rows.append(row)
    return rows


def unread_collective_row(cs, status: str, error: str, raw_dir: str | None) -> dict:
    return {
        "run_id": cs.run_id,
        "config_id": cs.config_id,
        "seed": cs.seed,
        "status": status,
        "error": error,
        "device": cs.device,
        "device_names": [],
        "world_size": cs.world_size,
        "nodes": cs.nodes,
        "procs_per_node": cs.procs_per_node,
        "dtype": cs.dtype,
        "raw_dir": raw_dir,
    }


def sort_key(row: dict) -> tuple:
    return (
        row.get("op") or "",
        row.get("nodes") or 0,
        row.get("world_size") or 0,
        row.get("size_bytes") or 0,
        row.get("seed") or 0,
        row["run_id"],
    )


def summarize_collectives(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("op") is None:
            continue
        groups.setdefault(tuple(r.get(k) for k in SUMMARY_KEYS), []).append(r)
    out = []
    for key in sorted(groups, key=lambda k: (k[0], k[3], k[2], k[1], k[5], k[6])):
        g = groups[key]
        row = dict(zip(SUMMARY_KEYS, key))
        row["device_names"] = sorted({n for r in g for n in (r.get("device_names") or [])})
        row["n_seeds"] = len(g)
        row["all_correct"] = all(r.get("correct") is not False for r in g)
        notes = set()
        for m in SUMMARY_METRICS:
            s = summarize(r.get(m) for r in g)
            row.update(
                {
                    f"{m}_mean": s.mean,
                    f"{m}_std": s.std,
                    f"{m}_ci95_low": s.ci95_low,
                    f"{m}_ci95_high": s.ci95_high,
                    f"{m}_n": s.n,
                }
            )
            if s.note:
                notes.add(s.note)
        if any(r.get("_predicted") for r in g):
            notes.add(PREDICTED_NOTE)
        row["note"] = sorted(notes)
        row["run_ids"] = sorted(r["run_id"] for r in g)
        out.append(row)
    return out
