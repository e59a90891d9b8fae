"""The numbers of the megatron backend's H200 validation, from the raw logs and the agreement
lines that benchmarks/megatron_validation.sh wrote (removed: `git show 4679c84:benchmarks/megatron_validation.sh`;
analysis side only: no GPU, no torch):
per run, tokens/s, MFU, memory, energy and power, side by side for the two backends; per pair of
runs that differ in the backend alone, how far their loss curves are apart.

    python benchmarks/megatron_summary.py DIR   # run directories under DIR, agreement*.jsonl in DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scalestudy.measure.metrics import mfu, throughput
from scalestudy.measure.rawlog import RawLogError, find_runs, read_run


def run_numbers(run) -> dict:
    path = run.path
    spec = run.spec
    out = {"run": path.name, "backend": spec["backend"], "run_id": run.run_id, "status": run.status["status"]}
    backend = [r["value"] for r in run.records if r["key"] == "backend" and r["metadata"]["rank"] == 0]
    if backend:
        out["megatron_core"] = backend[0]["megatron_core"]
        out["data_parallel"] = backend[0]["plan"]["data_parallel"]
        out["optimizer_impl"] = backend[0]["optimizer"]
    out["libraries"] = {k: v for k, v in run.run["provenance"]["libraries"].items() if k in ("torch", "megatron-core")}
    if out["status"] != "ok":
        out["error"] = (run.status.get("error") or "")[:300]
        return out
    world = spec["nodes"] * spec["procs_per_node"]
    iters = list(run.iterations())
    tp = throughput(iters, world)
    peak = next(r["value"] for r in run.records if r["key"] == "device_peak")
    fpt = next(r["value"] for r in run.records if r["key"] == "flops")["flops_per_token"]
    out.update(tokens_per_s=tp["tokens_per_s"], step_time_mean_s=tp["step_time_mean_s"])
    if peak["peak_flops_per_s"]:
        out["mfu"] = mfu(tp["tokens_per_s_per_device"], fpt, peak["peak_flops_per_s"])
    mems = [r["value"]["memory"] for r in iters]
    if mems and mems[0]["kind"] == "cuda_caching_allocator":
        m = max(mems, key=lambda m: m["peak_allocated_bytes"])
        out.update(
            peak_allocated_gib=m["peak_allocated_bytes"] / 2**30,
            peak_reserved_gib=m["peak_reserved_bytes"] / 2**30,
            alloc_retries=m["alloc_retries"],
        )
    energy = next((r["value"] for r in run.records if r["key"] == "energy"), None)
    if energy and energy["available"]:
        out.update(
            energy_j=energy["energy_j"],
            mean_power_w=energy["mean_power_w"],
            idle_power_w=energy["idle_power_w"],
            tokens_per_joule=tp["tokens"] / energy["energy_j"] if energy["energy_j"] else None,
        )
    elif energy:
        out["energy"] = energy["reason"]
    losses = sorted((r["value"]["step"], r["value"]["loss"]) for r in iters if r["metadata"]["rank"] == 0)
    out["losses"] = [loss for _, loss in losses]
    return out


def pair_key(run) -> str:
    d = dict(run.spec)
    d.pop("backend")
    return json.dumps(d, sort_keys=True)


def agreement(a: list[float], b: list[float]) -> dict:
    n = min(len(a), len(b))
    diffs = [abs(x - y) for x, y in zip(a[:n], b[:n])]
    rels = [d / abs(y) for d, y in zip(diffs, b[:n]) if y]
    return {
        "steps": n,
        "max_abs_diff": max(diffs),
        "max_rel_diff": max(rels),
        "last_abs_diff": diffs[-1],
        "first": [a[0], b[0]],
        "last": [a[n - 1], b[n - 1]],
        "moved": abs(b[n - 1] - b[0]),
    }


def main(root: str) -> None:
    root = Path(root)
    runs, pairs = {}, {}
    for p in find_runs(root):
        try:
            run = read_run(p)
        except RawLogError as e:
            runs[p.name] = {"run": p.name, "status": "unreadable", "error": str(e)}
            continue
        runs[p.name] = run_numbers(run)
        pairs.setdefault(pair_key(run), {})[run.spec["backend"]] = p.name
    curves = {}
    for names in pairs.values():
        if {"torch", "megatron"} <= set(names):
            t, m = runs[names["torch"]], runs[names["megatron"]]
            if t.get("losses") and m.get("losses"):
                curves[f"{names['megatron']} vs {names['torch']}"] = agreement(m["losses"], t["losses"])
    direct = [
        json.loads(line)
        for f in sorted(root.glob("agreement*.jsonl"))
        for line in f.read_text().splitlines()
        if line.startswith("{")
    ]
    table = [
        {
            k: r.get(k)
            for k in (
                "run",
                "backend",
                "status",
                "tokens_per_s",
                "mfu",
                "peak_allocated_gib",
                "energy_j",
                "mean_power_w",
                "tokens_per_joule",
            )
        }
        for r in runs.values()
    ]
    for r in runs.values():
        r.pop("losses", None)
    print(
        json.dumps({"side_by_side": table, "runs": runs, "loss_curves": curves, "weight_copy_check": direct}, indent=1)
    )


if __name__ == "__main__":
    main(sys.argv[1])
