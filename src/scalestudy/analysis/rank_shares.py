"""Tables of rank shares (spec `comm: fake`, scalestudy.spec.rank_share): what one rank of a
configuration computes and holds, measured alone on one GPU with communication faked.

rank_shares.csv    one row a planned rank share (and each real run of the agreement check):
                   its compute time per step (the wall step with communication faked), the GPU's
                   busy time per step where the harness measured it (harness/device_busy.py: a
                   host-bound share's wall step is its host loop, not the GPU's work), peak
                   memory, power, status; `planned` where the raw logs hold no run (never invented)
rank_configs.csv   one row a configuration: its distinct pipeline stages put together - the step
                   a GPipe/1F1B schedule makes of them (rank_share.PIPELINE_RULE), of the wall
                   steps and, where every stage has it, of the GPU busy times; the largest stage's
                   memory, and `oom` if any stage ran out of memory

Every row carries the label rank_share.LABEL: these are never throughputs of the configuration.
Pure Python (no torch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalestudy.measure import rawlog
from scalestudy.measure.csv_format import write_csv
from scalestudy.spec import rank_share
from scalestudy.spec.run import RunSpec

SHARES_FILE = "rank_shares.csv"
CONFIGS_FILE = rank_share.CONFIGS_TABLE
STAGE_ORDER = ("only", "first", "middle", "last")
PLANNED = "planned"  # no raw log: the run was planned, not measured
REAL_LABEL = "real run on one GPU (communication executed)"

_SPEC = [
    "model",
    "world_size",
    "layout",
    "tp",
    "pp",
    "dp_replicate",
    "dp_shard",
    "micro_batch",
    "global_batch",
    "local_batch",
    "pp_microbatches",
    "grad_accum",
    "pp_schedule",
    "seq_len",
    "comm",
    "device_memory_cap_gib",
]
SHARE_COLUMNS = [
    "run_id",
    "config_id",
    "experiments",
    "label",
    *_SPEC,
    "rank_emulated",
    "stage",
    "status",
    "error",
    "n_warmup_steps",
    "n_measured_steps",
    "rank_compute_time_s",
    "rank_compute_time_min_s",
    "rank_compute_time_max_s",
    "rank_device_busy_s",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "mean_power_w",
    "power_method",
    "fake_backend_fills",
    "fill_wrappers",
    "torch",
    "raw_dir",
    "weakened",
]
CONFIG_COLUMNS = [
    "group_id",
    "experiments",
    "label",
    *_SPEC,
    "status",
    "stages_measured",
    "stages_planned",
    "slowest_stage",
    "stage_compute_times_s",
    "rank_step_time_s",
    "step_rule",
    "stage_device_busy_s",
    "rank_device_busy_step_s",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "fits_cap",
    "run_ids",
    "weakened",
]


def _spec_columns(spec: RunSpec) -> dict:
    return {
        "model": spec.model,
        "world_size": spec.world_size,
        "layout": spec.layout,
        "tp": spec.tp,
        "pp": spec.pp,
        "dp_replicate": spec.dp_replicate,
        "dp_shard": spec.dp_shard,
        "micro_batch": spec.micro_batch,
        "global_batch": spec.global_batch,
        "local_batch": spec.local_batch,
        "pp_microbatches": spec.pp_microbatches,
        "grad_accum": spec.grad_accum,
        "pp_schedule": spec.pp_schedule,
        "seq_len": spec.seq_len,
        "comm": spec.comm,
        "device_memory_cap_gib": spec.device_memory_cap_gib or None,
    }


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def share_row(planned, raw_dir: Path, *, verify_checksums: bool = True) -> dict:
    spec = planned.spec
    row: dict[str, Any] = {c: None for c in SHARE_COLUMNS}
    row.update(
        run_id=planned.run_id,
        config_id=spec.config_id,
        experiments=list(planned.experiments),
        label=rank_share.LABEL if spec.comm == "fake" else REAL_LABEL,
        **_spec_columns(spec),
        rank_emulated=spec.emulate_rank,
        stage=rank_share.stage_name(spec, spec.emulate_rank),
    )
    if not raw_dir.is_dir():
        row["status"] = PLANNED
        return row
    log = rawlog.read_run(raw_dir, verify_checksums=verify_checksums)
    row.update(
        status=log.status["status"],
        error=log.status.get("error"),
        raw_dir=raw_dir.name,
        weakened=rawlog.weakened_checks(log.run, log.status),
    )
    share = log.run.get("rank_share") or {}
    fills = share.get("backend_fills_outputs") or {}
    row.update(
        fake_backend_fills=[k for k, v in sorted(fills.items()) if v] if fills else None,
        fill_wrappers=share.get("fill_wrappers") or None,
        torch=share.get("torch"),
    )
    steps = [r["value"]["step_time_s"] for r in log.iterations("measured")]
    peak = reserved = None
    for r in log.iterations():
        m = r["value"].get("memory") or {}
        if m.get("peak_allocated_bytes") is not None:
            peak = max(peak or 0, m["peak_allocated_bytes"])
        if m.get("peak_reserved_bytes") is not None:
            reserved = max(reserved or 0, m["peak_reserved_bytes"])
    row.update(
        n_warmup_steps=sum(1 for _ in log.iterations("warmup")),
        n_measured_steps=len(steps),
        peak_allocated_bytes=peak,
        peak_reserved_bytes=reserved,
    )
    if log.status["status"] == "ok" and steps:
        row.update(
            rank_compute_time_s=_mean(steps), rank_compute_time_min_s=min(steps), rank_compute_time_max_s=max(steps)
        )
    busy = next((r["value"] for r in log.records if r["key"] == "device_busy"), None)
    if log.status["status"] == "ok" and busy and busy.get("available"):
        row["rank_device_busy_s"] = busy["busy_s_per_step"]
    energy = next((r["value"] for r in log.records if r["key"] == "energy"), None)
    if energy and energy.get("available"):
        row.update(mean_power_w=energy.get("mean_power_w"), power_method=energy.get("method"))
    return row


def config_rows(shares: list[dict], study) -> list[dict]:
    by_id = {p.run_id: p for p in study.runs}
    groups: dict[str, list[dict]] = {}
    for r in shares:
        if r["comm"] != "fake":
            continue
        groups.setdefault(rank_share.share_group(by_id[r["run_id"]].spec), []).append(r)
    out = []
    for gid, members in groups.items():
        spec = by_id[members[0]["run_id"]].spec
        measured = [m for m in members if m["status"] != PLANNED]
        row: dict[str, Any] = {c: None for c in CONFIG_COLUMNS}
        row.update(
            group_id=gid,
            experiments=sorted({e for m in members for e in m["experiments"]}),
            label=rank_share.LABEL,
            **_spec_columns(spec),
            stages_planned=len(members),
            stages_measured=len(measured),
            run_ids=sorted(m["run_id"] for m in members),
            weakened=sorted({w for m in measured for w in m.get("weakened") or []}),
        )
        peaks = [m["peak_allocated_bytes"] for m in measured if m["peak_allocated_bytes"] is not None]
        reserved = [m["peak_reserved_bytes"] for m in measured if m["peak_reserved_bytes"] is not None]
        row.update(
            peak_allocated_bytes=max(peaks) if peaks else None, peak_reserved_bytes=max(reserved) if reserved else None
        )
        statuses = {m["status"] for m in measured}
        if not measured:
            row["status"] = PLANNED
        elif "oom" in statuses:
            row["status"] = "oom"  # one stage that does not fit is enough: the configuration does not fit
        elif statuses == {"ok"} and len(measured) == len(members):
            row["status"] = "ok"
        elif statuses == {"ok"}:
            row["status"] = "partial"  # some stages measured, the others still planned
        else:
            row["status"] = sorted(statuses - {"ok"})[0]
        cap = spec.device_memory_cap_gib
        if row["status"] == "oom":
            row["fits_cap"] = False
        elif row["status"] == "ok" and cap:
            row["fits_cap"] = True
        if row["status"] == "ok":
            times = {m["stage"]: m["rank_compute_time_s"] for m in members}
            row["stage_compute_times_s"] = [times[k] for k in STAGE_ORDER if k in times]
            row["slowest_stage"] = max(times, key=times.get)  # type: ignore[arg-type]  # dict.get as key is fine
            row["rank_step_time_s"] = rank_share.pipeline_step_time(list(times.values()), spec.pp_microbatches, spec.pp)
            row["step_rule"] = rank_share.PIPELINE_RULE if spec.pp > 1 else "the rank's measured step (no pipeline)"
            busy = {m["stage"]: m["rank_device_busy_s"] for m in members}
            if all(v is not None for v in busy.values()):
                row["stage_device_busy_s"] = [busy[k] for k in STAGE_ORDER if k in busy]
                row["rank_device_busy_step_s"] = rank_share.pipeline_step_time(
                    list(busy.values()), spec.pp_microbatches, spec.pp
                )
        out.append(row)
    return sorted(
        out,
        key=lambda r: (
            r["model"],
            r["world_size"],
            r["tp"],
            r["pp"],
            r["global_batch"],
            r["micro_batch"],
            r["group_id"],
        ),
    )


def tables(study, *, verify_checksums: bool = True) -> tuple[list[dict], list[dict]]:
    shares = []
    for p in study.runs:
        if p.spec.comm == "fake" or "agreement" in p.experiments:
            shares.append(share_row(p, Path(study.raw_dir) / p.run_id, verify_checksums=verify_checksums))
    shares.sort(
        key=lambda r: (
            r["model"],
            r["world_size"],
            r["tp"],
            r["pp"],
            r["global_batch"],
            r["micro_batch"],
            r["rank_emulated"],
            r["run_id"],
        )
    )
    return shares, config_rows(shares, study)


def write_tables(study, out_dir: Path | None = None) -> list[Path]:
    out = Path(out_dir) if out_dir is not None else Path(study.tables_dir)
    shares, configs = tables(study)
    return [write_csv(out / SHARES_FILE, SHARE_COLUMNS, shares), write_csv(out / CONFIGS_FILE, CONFIG_COLUMNS, configs)]


def agreement(shares: list[dict]) -> dict | None:
    """The agreement check: the real and the fake run of the same shapes on one GPU."""
    rows = [r for r in shares if "agreement" in r["experiments"] and r["status"] == "ok"]
    real = next((r for r in rows if r["comm"] == "default"), None)
    fake = next((r for r in rows if r["comm"] == "fake"), None)
    if not (real and fake):
        return None
    out = {
        "real_step_s": real["rank_compute_time_s"],
        "fake_step_s": fake["rank_compute_time_s"],
        "real_power_w": real["mean_power_w"],
        "fake_power_w": fake["mean_power_w"],
    }
    out["step_ratio"] = out["fake_step_s"] / out["real_step_s"]
    if out["real_power_w"] and out["fake_power_w"]:
        out["power_ratio"] = out["fake_power_w"] / out["real_power_w"]
    return out
