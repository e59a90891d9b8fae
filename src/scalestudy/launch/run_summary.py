"""One line about a finished run directory: status, tokens/s global and per device, MFU, peak
memory, where its raw log is. `scalestudy launch` prints it when a run ends (Snakemake shows it
for every run job); the workers it starts leave it to the launcher, so a run has one summary line.
Pure Python: the numbers are the tables' (scalestudy.analysis.run_table, from the raw log), in the
harness's format (scalestudy.harness.progress.summary_line, which a run started by torchrun alone
prints from the same step times)."""

from __future__ import annotations

import json
from pathlib import Path

from scalestudy.analysis import run_table
from scalestudy.harness.progress import summary_line as format_summary
from scalestudy.measure import metrics, rawlog


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
    start, end = log.run.get("start_time_unix"), log.run.get("end_time_unix")
    elapsed = end - start if start is not None and end is not None else None
    if log.run.get("kind") == "collectives":
        n = sum(1 for r in log.records if r["key"] == "collective")
        return format_summary(log.run_id, status, run_dir, detail=f"{n} measurements", elapsed_s=elapsed)
    if status != "ok":
        error = str(log.status.get("error") or "").splitlines()
        return format_summary(
            log.run_id, status, run_dir, detail=error[0][:200] if error else "no error recorded", elapsed_s=elapsed
        )
    row = run_table.run_row(log, traces=False)  # the tables' numbers; the line shows no trace's
    rank_share = (log.run.get("rank_share") or {}).get("label")
    throughput = None
    if rank_share or row.get("tokens_per_s") is not None:
        try:  # the tables' rule (run_table._throughput); a rank share's step time, which the tables leave out
            throughput = metrics.throughput(log.iterations("measured"), row["world_size"])
        except ValueError:
            throughput = None
    if throughput is None and not rank_share:
        return format_summary(
            log.run_id,
            status,
            run_dir,
            detail=f"no tokens/s ({row.get('throughput_reason')})",
            peak_memory_bytes=row.get("peak_memory_bytes"),
            elapsed_s=elapsed,
        )
    return format_summary(
        log.run_id,
        status,
        run_dir,
        throughput=throughput,
        mfu=row.get("mfu"),
        no_mfu=row.get("mfu_reason"),
        peak_memory_bytes=row.get("peak_memory_bytes"),
        rank_share=rank_share,
        elapsed_s=elapsed,
    )
