"""One row per training run (one configuration and seed) from its raw log.

Every number is computed here from the run's records (docs/raw-log-format.md) and its spec;
nothing is taken from a harness-side summary. A metric that cannot be computed is null and its
`*_reason` column says why; it is never filled in. Failed runs get a row with their status and
error and null metrics.

Columns (RUN_COLUMNS, then one `spec.<field>` column per RunSpec field in the dataclass order;
spec fields are prefixed `spec.` so that they never clash with derived columns such as
`world_size` or `seed`):

identity      run_id, config_id, seed, label, experiments (';'-joined), kind, status, error,
              culprit_ranks, raw_dir (the run directory, relative to the study's raw directory),
              contaminated (status.json's load record: another run of the package ran on its host
              while it measured; empty where the run recorded no load), outlier (why its throughput
              is an outlier against the other seeds, aggregate.seed_outliers; empty if it is not),
              weakened (why the run was measured with a check weakened: an override switch, the run
              guard off, an uncommitted checkout; measure.rawlog.weakened_checks; empty: none),
              caveats (a predicted run's notes starting "caveat: ": a measured input it takes has a
              known artefact, perfmodel.rank_shares; empty otherwise), measured_inputs (a predicted
              run's inputs taken from a measurement, e.g. "compute, memory" from a rank share; empty:
              the model alone)
layout        layout, model, world_size, nodes, procs_per_node, dp_replicate, dp_shard, tp, pp,
              global_batch, local_batch, seq_len, tokens_per_step, device, device_names, n_hosts
throughput    n_measured_steps, tokens_per_s (global), tokens_per_s_per_device, step_time_mean_s,
              step_time_rule, throughput_reason            (scalestudy.measure.metrics.throughput)
MFU           flops_per_token, flops_formula (the run's `flops` record), mfu, mfu_peak_flops (mean
              over ranks of the `device_peak` records, i.e. the aggregate peak per device),
              mfu_peak_source, mfu_peak_dtype, mfu_reason  (scalestudy.measure.metrics.mfu)
memory        peak_memory_bytes (max over ranks and steps of peak_allocated_bytes or peak_rss_bytes),
              peak_reserved_bytes, peak_memory_kind, alloc_retries
energy        energy_j (summed over the GPUs of every rank), power_w_total (sum of the GPUs' mean
              power), power_w_per_gpu, idle_power_w_total, idle_power_w_per_gpu, tokens_per_joule
              (measured tokens / energy_j), energy_method, energy_scope, energy_reason (a run whose
              spec says power_sampling false: NOT_SAMPLED, "not measured by design: ...")
exposed comm  compute_s, comm_s, exposed_comm_s (per iteration: each trace's totals over its traced
              steps divided by its steps, then the mean over the traced ranks), overlap_fraction
              (1 - exposed/comm of those means), exposed_comm_share (exposed_comm_s / mean time of the traced steps),
              exposed_comm_kind, n_traces, exposed_comm_reason (scalestudy.measure.exposed_comm.analyse_trace)
"""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from scalestudy.measure import exposed_comm, metrics
from scalestudy.measure.rawlog import CorruptLogError, RunLog, weakened_checks
from scalestudy.measure.table_files import CAVEAT_PREFIX  # noqa: F401 - the predicted rows' caveats
from scalestudy.spec import catalog
from scalestudy.spec.rank_share import LABEL, measured_input_names
from scalestudy.spec.run import POWER_SAMPLING_OFF, RunSpec, SpecError

SPEC_PREFIX = "spec."

IDENTITY_COLUMNS = [
    "run_id",
    "config_id",
    "seed",
    "label",
    "experiments",
    "kind",
    "status",
    "error",
    "culprit_ranks",
    "raw_dir",
    "contaminated",
    "weakened",
    "outlier",
    "caveats",
    "measured_inputs",
]
LAYOUT_COLUMNS = [
    "layout",
    "model",
    "world_size",
    "nodes",
    "procs_per_node",
    "dp_replicate",
    "dp_shard",
    "tp",
    "pp",
    "global_batch",
    "local_batch",
    "seq_len",
    "tokens_per_step",
    "device",
    "device_names",
    "n_hosts",
]
THROUGHPUT_COLUMNS = [
    "n_measured_steps",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "step_time_mean_s",
    "step_time_rule",
    "throughput_reason",
]
MFU_COLUMNS = [
    "flops_per_token",
    "flops_formula",
    "mfu",
    "mfu_peak_flops",
    "mfu_peak_source",
    "mfu_peak_dtype",
    "mfu_reason",
]
MEMORY_COLUMNS = ["peak_memory_bytes", "peak_reserved_bytes", "peak_memory_kind", "alloc_retries"]
ENERGY_COLUMNS = [
    "energy_j",
    "power_w_total",
    "power_w_per_gpu",
    "idle_power_w_total",
    "idle_power_w_per_gpu",
    "tokens_per_joule",
    "energy_method",
    "energy_scope",
    "energy_reason",
]
EXPOSED_COLUMNS = [
    "compute_s",
    "comm_s",
    "exposed_comm_s",
    "overlap_fraction",
    "exposed_comm_share",
    "exposed_comm_kind",
    "n_traces",
    "exposed_comm_reason",
]
SPEC_COLUMNS = [SPEC_PREFIX + f.name for f in fields(RunSpec)]
RUN_COLUMNS = (
    IDENTITY_COLUMNS
    + LAYOUT_COLUMNS
    + THROUGHPUT_COLUMNS
    + MFU_COLUMNS
    + MEMORY_COLUMNS
    + ENERGY_COLUMNS
    + EXPOSED_COLUMNS
    + SPEC_COLUMNS
)

# The numeric per-run metrics that the summary table summarises over seeds.
METRICS = (
    "tokens_per_s",
    "tokens_per_s_per_device",
    "step_time_mean_s",
    "mfu",
    "peak_memory_bytes",
    "energy_j",
    "power_w_total",
    "power_w_per_gpu",
    "idle_power_w_per_gpu",
    "tokens_per_joule",
    "compute_s",
    "comm_s",
    "exposed_comm_s",
    "overlap_fraction",
    "exposed_comm_share",
)
REASON_COLUMNS = ("throughput_reason", "mfu_reason", "energy_reason", "exposed_comm_reason")
NOT_ANALYSED = "traces not analysed (run_row(traces=False))"
# the energy of a run whose spec switched power sampling off: none measured, by design
NOT_SAMPLED = f"not measured by design: {POWER_SAMPLING_OFF}"


def spec_columns(spec: RunSpec) -> dict:
    return {SPEC_PREFIX + k: v for k, v in spec.to_dict().items()}


def model_name(spec: RunSpec) -> str:
    """The model, naming a slice of it as such: a 16-layer slice of Llama-2 7B is not Llama-2 7B."""
    if spec.n_layers and spec.n_layers != catalog.model(spec.model).n_layers:
        return f"{spec.model} ({spec.n_layers} of {catalog.model(spec.model).n_layers} layers)"
    return spec.model


def layout_columns(spec: RunSpec) -> dict:
    return {
        "layout": spec.layout,
        "model": model_name(spec),
        "world_size": spec.world_size,
        "nodes": spec.nodes,
        "procs_per_node": spec.procs_per_node,
        "dp_replicate": spec.dp_replicate,
        "dp_shard": spec.dp_shard,
        "tp": spec.tp,
        "pp": spec.pp,
        "global_batch": spec.global_batch,
        "local_batch": spec.local_batch,
        "seq_len": spec.seq_len,
        "tokens_per_step": spec.tokens_per_step,
        "device": spec.device,
    }


def planned_columns(planned) -> dict:
    return {
        "label": planned.label if planned is not None else None,
        "experiments": list(planned.experiments) if planned is not None else [],
    }


def spec_of(log: RunLog) -> RunSpec:
    try:
        return RunSpec.from_dict(log.spec)
    except (SpecError, TypeError) as e:
        raise CorruptLogError(log.path / "run.json", f"its spec is not a valid RunSpec ({e})") from None


def _null_metrics(reason: str) -> dict:
    row: dict[str, Any] = {
        c: None for c in THROUGHPUT_COLUMNS + MFU_COLUMNS + MEMORY_COLUMNS + ENERGY_COLUMNS + EXPOSED_COLUMNS
    }
    for c in REASON_COLUMNS:
        row[c] = reason
    return row


def unread_row(planned, status: str, error: str, raw_dir: str | None) -> dict:
    """The row of a planned run whose directory is missing or unreadable (only with allow_missing)."""
    spec = planned.spec
    row = {
        "run_id": planned.run_id,
        "config_id": getattr(planned, "config_id", spec.config_id),
        "seed": spec.seed,
        "kind": "train",
        "status": status,
        "error": error,
        "culprit_ranks": None,
        "raw_dir": raw_dir,
        "contaminated": None,
        "weakened": [],
        "outlier": None,
        "caveats": [],
        "measured_inputs": None,
        **planned_columns(planned),
        **layout_columns(spec),
        "device_names": None,
        "n_hosts": None,
        **_null_metrics(f"run {status}"),
        **spec_columns(spec),
    }
    return row


def run_row(log: RunLog, planned=None, raw_dir: str | None = None, *, traces: bool = True) -> dict:
    """The row of one training run. With traces=False its exposed-communication columns are left
    null (reason NOT_ANALYSED): analysing the traces costs most of a CPU-second a run."""
    spec = spec_of(log)
    prov = log.run.get("provenance") or {}
    devices = (prov.get("devices") or {}).get("names") or []
    status = log.status["status"]
    row: dict[str, Any] = {
        "run_id": log.run_id,
        "config_id": log.run.get("config_id", spec.config_id),
        "seed": spec.seed,
        **planned_columns(planned),
        "kind": log.run.get("kind", "train"),
        "status": status,
        "error": log.status.get("error"),
        "culprit_ranks": log.status.get("culprit_ranks") or [],
        "raw_dir": raw_dir,
        "contaminated": (log.status.get("load") or {}).get("contaminated"),
        "weakened": weakened_checks(log.run, log.status),
        "outlier": None,
        "caveats": [],
        "measured_inputs": None,
        **layout_columns(spec),
        "device_names": sorted(devices),
        "n_hosts": len(prov.get("hosts") or []) or None,
    }
    row.update(spec_columns(spec))
    if status != "ok":
        row.update(_null_metrics(f"run status {status}"))
        return row
    if spec.comm == "fake":  # never a throughput of the configuration: see analysis/rank_shares.py
        row.update(_null_metrics(f"{LABEL}: no throughput of the configuration (tables rank_*.csv)"))
        row.update(_memory(log))
        return row
    row.update(_throughput(log, spec))
    row.update(_mfu(log, row))
    row.update(_memory(log))
    if row["kind"] == PREDICTED:
        row.update(_predicted(log, spec, row))
        return row
    row.update(_energy(log, spec, row))
    row.update(
        _exposed_comm(log, row)
        if traces
        else {**{c: None for c in EXPOSED_COLUMNS}, "exposed_comm_reason": NOT_ANALYSED}
    )
    return row


# ---- predicted runs (scalestudy.perfmodel) -----------------------------------------------
PREDICTED = "predicted"
PREDICTED_BAND = "_band"  # metric -> [low, high], for the summary table
PREDICTED_CORNERS = "_corners"  # metric -> values at the corners of the model's uncertainty box


def _predicted(log: RunLog, spec: RunSpec, row: dict) -> dict:
    out: dict[str, Any] = {c: None for c in ENERGY_COLUMNS + EXPOSED_COLUMNS}
    recs = _records(log, "prediction")
    if not recs:
        out["energy_reason"] = out["exposed_comm_reason"] = "the predicted run holds no prediction record"
        return out
    p = recs[0]["value"]
    v = p["values"]
    out["caveats"] = [str(n) for n in p.get("notes") or [] if str(n).startswith(CAVEAT_PREFIX)]
    inputs = (p.get("sources") or {}).get("inputs_from") or {}
    out["measured_inputs"] = ", ".join(measured_input_names(inputs)) or None
    step = row.get("step_time_mean_s")
    if v.get("power_w_per_gpu") is not None and step:
        total = v["power_w_per_gpu"] * spec.world_size
        out.update(
            power_w_total=total,
            power_w_per_gpu=v["power_w_per_gpu"],
            energy_j=total * step * row["n_measured_steps"],
            energy_method=["predicted: scalestudy.perfmodel power model"],
            energy_scope=["GPU board power only (a model of NVML board power)"],
        )
        if v.get("idle_power_w_per_gpu") is not None:
            out.update(
                idle_power_w_per_gpu=v["idle_power_w_per_gpu"],
                idle_power_w_total=v["idle_power_w_per_gpu"] * spec.world_size,
            )
        if row.get("_measured_tokens"):
            out["tokens_per_joule"] = row["_measured_tokens"] / out["energy_j"]
    else:
        out["energy_reason"] = "the model has no power calibration"
    comm, exposed = v.get("comm_s"), v.get("exposed_comm_s")
    out.update(
        compute_s=v.get("compute_s"),
        comm_s=comm,
        exposed_comm_s=exposed,
        overlap_fraction=(1.0 - exposed / comm) if comm else None,
        exposed_comm_share=(exposed / step) if (exposed is not None and step) else None,
        exposed_comm_kind=["predicted: scalestudy.perfmodel timeline"],
        n_traces=0,
    )
    if not comm:
        out["exposed_comm_reason"] = "the layout issues no communication"
    out[PREDICTED_BAND] = {m: b for m, b in (p.get("band") or {}).items()}
    out[PREDICTED_CORNERS] = {m: c for m, c in (p.get("corners") or {}).items()}
    out["_central"] = v
    return out


# ---- throughput ------------------------------------------------------------------------
def _throughput(log: RunLog, spec: RunSpec) -> dict:
    out: dict[str, Any] = {c: None for c in THROUGHPUT_COLUMNS}
    measured = list(log.iterations("measured"))
    if not measured:
        out["throughput_reason"] = "no measured iteration records"
        return out
    try:
        t = metrics.throughput(measured, spec.world_size)
    except ValueError as e:
        out["throughput_reason"] = f"{log.path / 'metrics.jsonl'}: {e}"
        return out
    out.update(
        n_measured_steps=t["n_steps"],
        tokens_per_s=t["tokens_per_s"],
        tokens_per_s_per_device=t["tokens_per_s_per_device"],
        step_time_mean_s=t["step_time_mean_s"],
        step_time_rule=t.get("step_time_rule"),
    )
    out["_measured_tokens"] = t.get("tokens")
    return out


# ---- MFU -------------------------------------------------------------------------------
def _records(log: RunLog, key: str) -> list[dict]:
    return [r for r in log.records if r["key"] == key]


def _mfu(log: RunLog, row: dict) -> dict:
    out: dict[str, Any] = {c: None for c in MFU_COLUMNS}
    flops = _records(log, "flops")
    if flops:
        v = flops[0]["value"]
        out["flops_per_token"] = v.get("flops_per_token")
        out["flops_formula"] = v.get("formula")
    peaks = _records(log, "device_peak")
    if peaks:
        values = [float(r["value"]["peak_flops_per_s"]) for r in peaks if r["value"].get("peak_flops_per_s")]
        if values:
            out["mfu_peak_flops"] = math.fsum(values) / len(values)
        out["mfu_peak_source"] = sorted({str(r["value"].get("source")) for r in peaks})
        out["mfu_peak_dtype"] = sorted({str(r["value"].get("dtype")) for r in peaks})
    if row.get("tokens_per_s_per_device") is None:
        out["mfu_reason"] = "no throughput: " + (row.get("throughput_reason") or "")
    elif not flops or out["flops_per_token"] is None:
        out["mfu_reason"] = "the run logged no flops record"
    elif out["mfu_peak_flops"] is None:
        out["mfu_reason"] = "the run logged no device_peak record"
    else:
        try:
            out["mfu"] = metrics.mfu(row["tokens_per_s_per_device"], out["flops_per_token"], out["mfu_peak_flops"])
        except ValueError as e:  # MFUError is a ValueError
            out["mfu_reason"] = str(e)
    return out


# ---- memory ----------------------------------------------------------------------------
def _memory(log: RunLog) -> dict:
    out: dict[str, Any] = {c: None for c in MEMORY_COLUMNS}
    kinds, peak, reserved, retries = set(), None, None, None
    for r in log.iterations():
        m = r["value"].get("memory") or {}
        kinds.add(m.get("kind"))
        p = m.get("peak_allocated_bytes", m.get("peak_rss_bytes"))
        if p is not None:
            peak = p if peak is None else max(peak, p)
        if m.get("peak_reserved_bytes") is not None:
            reserved = m["peak_reserved_bytes"] if reserved is None else max(reserved, m["peak_reserved_bytes"])
        if m.get("alloc_retries") is not None:
            retries = m["alloc_retries"] if retries is None else max(retries, m["alloc_retries"])
    kinds.discard(None)
    out.update(
        peak_memory_bytes=peak,
        peak_reserved_bytes=reserved,
        peak_memory_kind=sorted(kinds) or None,  # type: ignore[type-var]  # None was discarded above
        alloc_retries=retries,
    )
    return out


# ---- energy ----------------------------------------------------------------------------
def _energy(log: RunLog, spec: RunSpec, row: dict) -> dict:
    out: dict[str, Any] = {c: None for c in ENERGY_COLUMNS}
    if not spec.power_sampling:  # never a failure: the spec asked for no power (the run id says so)
        out["energy_reason"] = NOT_SAMPLED
        return out
    recs = _records(log, "energy")
    by_rank: dict[int, dict] = {}
    for r in recs:
        by_rank[r["metadata"].get("rank", 0)] = r["value"]
    world = spec.world_size
    if not by_rank:
        out["energy_reason"] = "the run logged no energy record"
        return out
    unavailable = {k: v for k, v in by_rank.items() if not v.get("available")}
    if unavailable:
        reasons = sorted({str(v.get("reason")) for v in unavailable.values()})
        out["energy_reason"] = f"{len(unavailable)} of {world} ranks could not measure: " + "; ".join(reasons)
        return out
    if len(by_rank) < world:
        out["energy_reason"] = f"only {len(by_rank)} of {world} ranks logged an energy record"
        return out
    energies, powers, idles, methods = [], [], [], set()
    for rank in sorted(by_rank):
        v = by_rank[rank]
        e = v.get("energy_j")
        if e is None:
            e = v.get("sampled_energy_j")
        if e is None:
            out["energy_reason"] = f"rank {rank} has neither a counter nor a sampled energy"
            return out
        energies.append(float(e))
        p = v.get("mean_power_w")
        if p is None and v.get("window_s"):
            p = float(e) / float(v["window_s"])
        powers.append(p)
        idles.append(v.get("idle_power_w"))
        methods.add(str(v.get("method")))
    out["energy_j"] = math.fsum(energies)
    if all(p is not None for p in powers):
        out["power_w_total"] = math.fsum(powers)  # type: ignore[arg-type]  # all() checked none is None
        out["power_w_per_gpu"] = out["power_w_total"] / len(powers)
    if all(i is not None for i in idles):
        out["idle_power_w_total"] = math.fsum(idles)  # type: ignore[arg-type]  # all() checked none is None
        out["idle_power_w_per_gpu"] = out["idle_power_w_total"] / len(idles)
    tokens = row.get("_measured_tokens")
    if tokens is not None and out["energy_j"] > 0:
        out["tokens_per_joule"] = tokens / out["energy_j"]
    out["energy_method"] = sorted(methods)
    out["energy_scope"] = sorted({str(v.get("scope")) for v in by_rank.values()})
    notes = sorted({str(v["reason"]) for v in by_rank.values() if v.get("reason")})
    out["energy_reason"] = "; ".join(notes) or None
    return out


# ---- exposed communication -------------------------------------------------------------
def _traced_step_time(log: RunLog, profiles: list[dict]) -> float | None:
    """Mean over the traced steps of each step's time (its slowest rank)."""
    first, last = profiles[0]["value"].get("steps", [None, None])
    if first is None:
        return None
    per_step: dict[int, float] = {}
    for rec in log.iterations():
        step = rec["value"]["step"]
        if first <= step <= last:
            per_step[step] = max(per_step.get(step, 0.0), rec["value"]["step_time_s"])
    return math.fsum(per_step.values()) / len(per_step) if per_step else None


def _exposed_comm(log: RunLog, row: dict) -> dict:
    out: dict[str, Any] = {c: None for c in EXPOSED_COLUMNS}
    profiles = _records(log, "profile")
    if not profiles:
        out["exposed_comm_reason"] = (
            "no profiler trace (profile_iters = 0)"
            if not log.spec.get("profile_iters")
            else "the run logged no profile record"
        )
        return out
    per_rank = []
    for rec in sorted(profiles, key=lambda r: (r["metadata"].get("rank", 0), r["value"].get("trace_file", ""))):
        rel = rec["value"].get("trace_file")
        path = Path(log.path) / rel if rel else None
        if path is None or not path.exists():
            out["exposed_comm_reason"] = f"{path or log.path}: trace named in a profile record is missing"
            return out
        try:
            res = exposed_comm.analyse_trace(path)
        except ValueError as e:  # TraceError names the file
            out["exposed_comm_reason"] = str(e)
            return out
        n = len(res.per_step) or 1
        per_rank.append(
            (
                res.compute_s / n,
                res.comm_s / n,
                res.exposed_comm_s / n,
                res.kind,
                math.fsum(s.wall_s for s in res.per_step) / n,
            )
        )
    kinds = sorted({p[3] for p in per_rank})
    k = len(per_rank)
    compute = math.fsum(p[0] for p in per_rank) / k
    comm = math.fsum(p[1] for p in per_rank) / k
    exposed = math.fsum(p[2] for p in per_rank) / k
    out.update(
        compute_s=compute,
        comm_s=comm,
        exposed_comm_s=exposed,
        overlap_fraction=(1.0 - exposed / comm) if comm > 0 else None,
        exposed_comm_kind=kinds,
        n_traces=k,
    )
    # against the traced iterations themselves (tracing slows them, most of all on CPU): on CPU
    # traces the trace's own step windows, the ones its exposed time was clipped to; on GPU
    # traces (kernels run after the CPU window that launched them) the logged step times
    wall = math.fsum(p[4] for p in per_rank) / k
    cpu_only = kinds == [exposed_comm.CPU_GLOO_OPS]
    traced_time = wall if cpu_only and wall > 0 else _traced_step_time(log, profiles)
    if traced_time:
        out["exposed_comm_share"] = exposed / traced_time
    if comm <= 0:
        out["exposed_comm_reason"] = "the traces hold no communication"
    return out


def finish(row: dict) -> dict:
    """Drop helper keys before the row is written."""
    return {k: v for k, v in row.items() if not k.startswith("_")}
