"""The numbers of the measurement issue's H200 validation, from the raw logs and plain-loop
results that benchmarks/h200_validation.sh wrote (removed: `git show 4679c84:benchmarks/h200_validation.sh`;
analysis side only: no GPU, no torch).

    python benchmarks/h200_summary.py data/h200-reference   # run directories under DIR, plain-loop *.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from scalestudy.measure.exposed_comm import analyse_trace, hta_overlap
from scalestudy.measure.metrics import mfu, throughput
from scalestudy.measure.rawlog import find_runs, read_run


def label(run) -> str:
    """The validation script's name for a run, from its spec and launch options."""
    spec, launch = run.spec, run.run["launch"]
    if spec["compile"]:
        return "fsdp-ac-compile" if spec["activation_checkpointing"] == "full" else "fsdp-l16-noac-compile"
    if spec["activation_checkpointing"] == "full":
        return "fsdp-ac-instrumented" if spec["profile_iters"] and launch["power"] else "fsdp-ac-bare"
    return "fsdp-l16-noac" if spec["n_layers"] == 16 else "fsdp-noac"


def run_numbers(path: Path) -> dict:
    run = read_run(path)
    out = {"run": label(run), "run_id": run.run_id, "status": run.status["status"]}
    if out["status"] != "ok":
        out["error"] = run.status["error"][:160]
        return out
    world = run.spec["nodes"] * run.spec["procs_per_node"]
    tp = throughput(list(run.iterations()), world)
    peak = next(r["value"] for r in run.records if r["key"] == "device_peak")
    fpt = next(r["value"] for r in run.records if r["key"] == "flops")["flops_per_token"]
    mem = max((r["value"]["memory"] for r in run.iterations()), key=lambda m: m["peak_allocated_bytes"])
    out.update(
        tokens_per_s=tp["tokens_per_s"],
        step_time_mean_s=tp["step_time_mean_s"],
        mfu=mfu(tp["tokens_per_s_per_device"], fpt, peak["peak_flops_per_s"]),
        peak_flops_per_s=peak["peak_flops_per_s"],
        peak_source=peak["source"],
        peak_allocated_gib=mem["peak_allocated_bytes"] / 2**30,
        peak_reserved_gib=mem["peak_reserved_bytes"] / 2**30,
        alloc_retries=mem["alloc_retries"],
    )
    energy = next(r["value"] for r in run.records if r["key"] == "energy")
    if energy["available"]:
        tokens = tp["tokens"]
        out.update(
            energy_j=energy["energy_j"],
            sampled_energy_j=energy["sampled_energy_j"],
            counter_vs_samples=energy["sampled_energy_j"] / energy["energy_j"],
            mean_power_w=energy["mean_power_w"],
            idle_power_w=energy["idle_power_w"],
            joules_per_token=energy["energy_j"] / tokens,
            tokens_per_joule=tokens / energy["energy_j"],
            window_s=energy["window_s"],
            n_samples=energy["n_samples"],
        )
    else:
        out["energy"] = energy["reason"]
    traces = sorted((path / "traces").glob("*.json.gz"))
    if traces:
        ec = analyse_trace(traces[0]).as_dict()
        out["exposed_comm"] = {k: ec[k] for k in ("kind", "compute_s", "comm_s", "exposed_comm_s", "overlap_fraction")}
        try:
            out["hta_overlap"] = hta_overlap(path / "traces")
        except ImportError as e:
            out["hta_overlap"] = f"not run: {e}"
        except Exception as e:  # noqa: BLE001 - HTA's own failure is reported, not fatal
            out["hta_overlap"] = f"HTA failed: {type(e).__name__}: {e}"
    return out


def main(root: str) -> None:
    root = Path(root)
    runs = {r["run"]: r for r in map(run_numbers, find_runs(root))}
    plain = {}
    for f in sorted(root.glob("plain*.jsonl")):
        for line in f.read_text().splitlines():
            d = json.loads(line)
            d.pop("step_times_s", None)
            plain[d["name"]] = d

    def ratio(a, b):
        return a / b if a and b else None

    checks = {
        "harness_over_plain_7b_ac": ratio(runs["fsdp-ac-bare"].get("tokens_per_s"), plain["plain-ac"]["tokens_per_s"]),
        "harness_over_plain_7b_16_layers_no_ac": ratio(
            runs["fsdp-l16-noac"].get("tokens_per_s"), plain["plain-l16-noac"]["tokens_per_s"]
        ),
        "harness_over_plain_7b_16_layers_no_ac_compiled": ratio(
            runs["fsdp-l16-noac-compile"].get("tokens_per_s"), plain["plain-l16-noac-compile"]["tokens_per_s"]
        ),
        "instrumented_over_bare_7b_ac": ratio(
            runs["fsdp-ac-instrumented"].get("tokens_per_s"), runs["fsdp-ac-bare"].get("tokens_per_s")
        ),
        "energy_counter_vs_sampled_integral": {
            k: v.get("counter_vs_samples") for k, v in runs.items() if "counter_vs_samples" in v
        },
    }
    print(json.dumps({"runs": runs, "plain": plain, "checks": checks}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
