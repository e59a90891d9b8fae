"""Predicted runs written as raw-log directories (docs/raw-log-format.md), so that the analysis
side (tables, figures, claims, provenance, audit) reads them like measured ones, marked at every
step as predicted:

run.json      kind `predicted`; spec; provenance: `predicted: true`, the model version, the cluster
              (every value with its source), the calibration data (raw-log directories relative to
              the project root, run ids and the sha256 of each of their files; `files`: the other
              measurements read, the power duty-cycle log and achievable-matmul sweeps, with their
              sha256), the package's git state; devices: the cluster's GPU name x world size (hosts: none)
metrics.jsonl one record each (rank 0, no timestamps, so the same model gives the same bytes):
              `device_peak` (the cluster's peak, source `cluster:<name>`), `flops`, one `iteration`
              (phase measured, the predicted step time, memory kind `memory_estimate`), and
              `prediction` (values, band, the band's corners, collectives, sources, notes)
status.json   ok, or `oom` where the memory estimate exceeds the GPU's memory (error says so)

A predicted collectives benchmark (kind `predicted`, `collective` records from the alpha-beta
model, each marked `predicted: true`) draws Fig 2 from the model the same way.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from scalestudy import __version__
from scalestudy.measure.bandwidth import busbw_factor, message
from scalestudy.measure.metrics import flops_per_token
from scalestudy.measure.instruments import content_sha256
from scalestudy.measure.rawlog import METRICS_FILE, RUN_FILE, SCHEMA, STATUS_FILE, atomic_write_text, write_status
from scalestudy.perfmodel import MODEL_VERSION, power
from scalestudy.perfmodel.collectives import Group
from scalestudy.perfmodel.predict import AXES, design_power_w
from scalestudy.spec import catalog, checkout
from scalestudy.spec.catalog.gpus import UnknownDeviceError
from scalestudy.spec.memory_estimate import GIB

KIND = "predicted"


def git_state(root: Path) -> dict:
    return dict(_git_state(str(Path(root).resolve())))


@lru_cache(maxsize=8)
def _git_state(root: str) -> dict:
    return checkout.git_state(root)


def _record(key: str, value, run_id: str) -> str:
    return json.dumps({"key": key, "value": value, "metadata": {"rank": 0, "run_id": run_id}}, sort_keys=True)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def measured_files(cal, gpus: tuple[str, ...], root: Path | str) -> list[dict]:
    """The measurement files a prediction reads besides the calibration runs, with their sha256: the
    calibration GPU's power duty-cycle and communication-power runs (the catalog's `power_duty_data` and
    `comm_power_data`, where the calibration has a power model) and the achievable-matmul sweeps of the
    GPUs involved (`matmul_achievable_data`), those present under the project root; of a raw-log run
    directory, the sha256 of its sealed status.json (measure/instruments.py content_sha256)."""
    paths = power.data_files(cal.compute.gpu) if cal.power is not None else {}
    for name in dict.fromkeys((cal.compute.gpu, *gpus)):
        try:
            g = catalog.gpu(name)
        except UnknownDeviceError:
            continue
        if g.matmul_achievable_data:
            paths[g.matmul_achievable_data] = f"{g.name}: achievable matmul rate (perfmodel/achievable.py)"
    return [
        {"path": rel, "sha256": content_sha256(Path(root) / rel), "what": what}
        for rel, what in sorted(paths.items())
        if (Path(root) / rel).exists()
    ]


def calibration_provenance(cal, gpus: tuple[str, ...] = (), root: Path | str | None = None) -> dict:
    out = {
        "digest": cal.digest,
        "fit_run_ids": list(cal.fit_run_ids),
        "runs": [
            {"run_id": r.run_id, "raw_dir": r.raw_dir, "status": r.status, "files_sha256": r.files_sha256}
            for r in cal.runs
        ],
        "compute": cal.compute.method,
        "compute_error": cal.compute_error,
        "compute_error_source": cal.compute_error_source,
        "held_out": cal.held_out,
    }
    if root is not None:
        out["files"] = measured_files(cal, gpus, root)
    return out


def measured_input_runs(pred, root: Path | str) -> list[dict]:
    """The raw logs of the measured rank share a prediction took its inputs from (perfmodel.rank_shares),
    as the calibration runs are recorded: run id, directory under the project root, status and the
    files' sha256 from the run's status.json, so that provenance names them and the audit checks them."""
    share = (pred.sources or {}).get("measured_share") if pred is not None else None
    out = []
    for rid in (share or {}).get("run_ids") or ():
        raw_dir = f"data/{share['study']}/raw/{rid}"
        try:
            status = json.loads((Path(root) / raw_dir / STATUS_FILE).read_text())
        except (OSError, ValueError):
            status = {}
        out.append(
            {
                "study": share["study"],
                "run_id": rid,
                "raw_dir": raw_dir,
                "status": status.get("status"),
                "files_sha256": dict(status.get("files_sha256") or {}),
            }
        )
    return out


def predicted_provenance(cluster, cal, world: int, root: Path, command: str, pred=None) -> dict:
    """run.json's provenance of a predicted run: the model, cluster and calibration, and the measured
    rank share it took inputs from, no host."""
    shares = measured_input_runs(pred, root)
    return {
        "predicted": True,
        "model": MODEL_VERSION,
        "cluster": cluster.as_dict(),
        "calibration": calibration_provenance(cal, (cluster.gpu,), root),
        **({"measured_inputs": shares} if shares else {}),
        "package": {"name": "scalestudy", "version": __version__, "git": git_state(root)},
        "devices": {"count": world, "names": [cluster.gpu]},
        "hosts": [],
        "command": command,
        "python": None,
        "torch": None,
        "cuda": None,
        "nccl": None,
        "slurm": None,
    }


def finish_run_dir(run_dir: Path, run: dict, lines: list[str], status: str, error: str | None) -> Path:
    """Write a predicted run's run.json, metrics.jsonl and status.json (with their checksums)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    run_text = json.dumps(run, indent=1, sort_keys=True) + "\n"
    metrics_text = "".join(line + "\n" for line in lines)
    atomic_write_text(run_dir / RUN_FILE, run_text)
    atomic_write_text(run_dir / METRICS_FILE, metrics_text)
    write_status(
        run_dir / STATUS_FILE,
        {
            "schema": SCHEMA,
            "status": status,
            "error": error,
            "culprit_ranks": [0] if status != "ok" else [],
            "ranks": [{"rank": 0, "status": status, "error": error}],
            "files_sha256": {METRICS_FILE: _sha(metrics_text), RUN_FILE: _sha(run_text)},
        },
    )
    return run_dir


def write_predicted_run(
    run_dir: Path | str,
    run_id: str,
    config_id: str,
    spec,
    pred,
    cluster,
    cal,
    root: Path | str = ".",
    command: str = "scalestudy model",
) -> Path:
    """One predicted training run (see the module doc)."""
    run_dir, root = Path(run_dir), Path(root)
    v = pred.values
    status, error = "ok", None
    if not v["fits_memory"]:
        status = "oom"
        error = (
            f"predicted: the memory estimate ({v['memory_estimate_gib']:.1f} GiB, scalestudy.spec.memory_estimate, "
            f"first-order) exceeds the {cluster.v('memory_gib'):g} GiB of a {cluster.gpu}"
        )
        measured = next((n for n in pred.notes if n.startswith("measured:")), None)
        if measured:  # a measured rank share decided it (perfmodel.rank_shares)
            error = f"predicted from a measurement: {measured[len('measured: ') :]}"
    run = {
        "kind": KIND,
        "run_id": run_id,
        "config_id": config_id,
        "spec": spec.to_dict(),
        "provenance": predicted_provenance(cluster, cal, spec.world_size, root, command, pred),
        "launch": None,
    }
    lines = [
        _record(
            "device_peak",
            {
                "device_name": cluster.gpu,
                "dtype": spec.precision,
                "peak_flops_per_s": cluster.peak_flops,
                "source": f"cluster:{cluster.name}",
                "detail": cluster.values["peak_flops_per_s"].as_dict(),
            },
            run_id,
        ),
        _record("flops", flops_per_token(spec.model_config(), spec.seq_len), run_id),
    ]
    if status == "ok":
        lines.append(
            _record(
                "iteration",
                {
                    "step": 0,
                    "phase": "measured",
                    "step_time_s": v["step_time_s"],
                    "tokens": spec.tokens_per_step,
                    "loss": None,
                    "memory": {"kind": "memory_estimate", "peak_allocated_bytes": int(v["memory_estimate_gib"] * GIB)},
                },
                run_id,
            )
        )
        idle = cal.power.idle_w * design_power_w(cluster) / cal.power.cap_w if cal.power else None
        lines.append(
            _record(
                "prediction",
                {
                    "model": MODEL_VERSION,
                    "cluster": cluster.name,
                    "values": {**v, "idle_power_w_per_gpu": idle},
                    "band": pred.band,
                    "corners": pred.corners,
                    "corner_axes": list(_axes()),
                    "collectives": pred.collectives,
                    "compute": pred.compute,
                    "sources": pred.sources,
                    "notes": pred.notes,
                    "label": pred.label,
                },
                run_id,
            )
        )
    else:
        lines.append(_record("error", {"type": "PredictedOutOfMemory", "message": error}, run_id))
    return finish_run_dir(run_dir, run, lines, status, error)


def _axes():
    return AXES


def write_predicted_collectives(
    run_dir: Path | str, cs, cluster, cm, cal, root: Path | str = ".", command: str = "scalestudy model"
) -> Path:
    """One predicted collectives benchmark (CollectivesSpec cs) on `cluster`: a `collective`
    record per op and size, as the benchmark writes them, from the alpha-beta model."""
    run_dir, root = Path(run_dir), Path(root)
    run = {
        "kind": KIND,
        "run_id": cs.run_id,
        "config_id": cs.config_id,
        "spec": cs.to_dict(),
        "provenance": {**predicted_provenance(cluster, cal, cs.world_size, root, command), "collectives": cm.sources()},
        "launch": None,
    }
    g = Group(cs.world_size, cs.nodes)
    lines = []
    for op in cs.ops:
        for size in cs.sizes():
            try:
                msg = message(op, size, cs.world_size, cs.dtype)
            except ValueError:
                continue
            if op == "all_to_all":
                continue  # not modelled
            t = cm.time(op, msg.size_bytes, g)
            f = busbw_factor(op, cs.world_size)
            lines.append(
                _record(
                    "collective",
                    {
                        "op": op,
                        "size_bytes": msg.size_bytes,
                        "requested_bytes": size,
                        "count": msg.count,
                        "dtype": cs.dtype,
                        "world_size": cs.world_size,
                        "nodes": cs.nodes,
                        "procs_per_node": cs.procs_per_node,
                        "iters": None,
                        "warmup": None,
                        "in_place": None,
                        "time_s": t,
                        "time_over_ranks": "predicted",
                        "time_s_min_rank": t,
                        "time_s_max_rank": t,
                        "algbw_GBps": msg.size_bytes / t / 1e9,
                        "busbw_factor": f,
                        "busbw_GBps": f * msg.size_bytes / t / 1e9,
                        "correct": True,
                        "wrong_elements": 0,
                        "predicted": True,
                    },
                    cs.run_id,
                )
            )
    return finish_run_dir(run_dir, run, lines, "ok", None)
