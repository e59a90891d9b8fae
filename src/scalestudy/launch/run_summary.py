"""One line about a finished run directory: status, tokens/s, MFU, peak memory, where its raw
log is. `scalestudy launch` prints it when a run ends (Snakemake shows it for every run job).
Pure Python: reads the raw log (scalestudy.measure.rawlog) like the tables do."""

from __future__ import annotations

import json
from pathlib import Path

from scalestudy.analysis import run_table
from scalestudy.measure import rawlog

GIB = 1024**3


def summary_line(run_dir: Path | str) -> str:
    run_dir = Path(run_dir)
    status_path = run_dir / rawlog.STATUS_FILE
    if not status_path.exists():
        return f"[summary] {run_dir.name}: no status.json (the run did not finish) | raw log {run_dir}"
    try:
        log = rawlog.read_run(run_dir, verify_checksums=False)
    except rawlog.RawLogError as e:
        status = json.loads(status_path.read_text()).get("status")
        return f"[summary] {run_dir.name}: {status} | unreadable raw log ({e.reason}) | raw log {run_dir}"
    status = log.status["status"]
    parts = [f"[summary] run {log.run_id}: {status}"]
    if log.run.get("kind") == "collectives":
        parts.append(f"{sum(1 for r in log.records if r['key'] == 'collective')} measurements")
    elif status == "ok":
        row = run_table.run_row(log, traces=False)  # the tables' numbers; the line shows no trace's
        tps, mfu, mem = row.get("tokens_per_s"), row.get("mfu"), row.get("peak_memory_bytes")
        parts.append(f"{tps:,.0f} tok/s" if tps is not None else f"no tokens/s ({row.get('throughput_reason')})")
        parts.append(f"MFU {100 * mfu:.1f}%" if mfu is not None else f"no MFU ({row.get('mfu_reason')})")
        if mem is not None:
            parts.append(f"peak mem {mem / GIB:.2f} GiB")
    elif log.status.get("error"):
        parts.append(str(log.status["error"]).splitlines()[0][:200])
    parts.append(f"raw log {run_dir}")
    return " | ".join(parts)
