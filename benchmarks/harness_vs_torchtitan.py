"""The harness against torchtitan on one GPU: the four configurations of issue 14 (Llama-2-7B shape,
sequence 4096, micro batch 2, FSDP2 at degree 1, bf16 with fp32 master weights, fused AdamW),
the plain-loop baseline beside them, and before/after variants of the harness's optimisations
(harness/optimisations.py; a variant names what SCALESTUDY_HARNESS_OFF turns off).

    python benchmarks/harness_vs_torchtitan.py run --out DIR [--variants after,before,no-sdpa]
        [--configs ac32-eager,l16-eager] [--plain l16-eager] [--warmup-iters 3 --measured-iters 10]
    python benchmarks/harness_vs_torchtitan.py table DIR        # the table again, from DIR/results.jsonl

Prints tokens/s, MFU and peak reserved memory of each, against torchtitan's figures
(benchmarks/torchtitan_reference.json). Exits non-zero if a run failed. Each harness run is made by
`scalestudy launch` (run guard, time limit, sealed raw log, NVML power sampling as in every launched
run); the committed data/h200-harness runs were made before, by the harness started directly with
power sampling off.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from scalestudy.measure.metrics import mfu, throughput
from scalestudy.measure.rawlog import read_run

HERE = Path(__file__).resolve().parent
REFERENCE = HERE / "torchtitan_reference.json"
CONFIGS = {  # harness spec fields, plain-loop options
    "ac32-eager": ({"activation_checkpointing": "full"}, ["--ac"]),
    "l16-eager": ({"n_layers": 16}, ["--n-layers", "16"]),
    "ac32-compile": ({"activation_checkpointing": "full", "compile": True}, ["--ac", "--compile"]),
    "l16-compile": ({"n_layers": 16, "compile": True}, ["--n-layers", "16", "--compile"]),
}
SPEC = {
    "model": "llama2-7b",
    "seq_len": 4096,
    "micro_batch": 2,
    "device": "cuda",
    "precision": "bf16",
    "procs_per_node": 1,
}
SHAPE = ["--model", SPEC["model"], "--seq-len", str(SPEC["seq_len"]), "--micro-batch", str(SPEC["micro_batch"])]
GIB = 2**30


def variant_off(variant: str) -> str:
    """What SCALESTUDY_HARNESS_OFF a variant sets: after (nothing), before (all), no-NAME[+NAME]."""
    if variant == "after":
        return ""
    if variant == "before":
        return "all"
    if variant.startswith("no-"):
        return variant[3:].replace("+", ",")
    raise SystemExit(f"unknown variant {variant!r}: after, before or no-NAME (NAME of harness/optimisations.py)")


def run_harness(config: str, variant: str, out: Path, warmup: int, measured: int, timeout_s: float) -> dict:
    """One harness run, made by the package's launcher (`scalestudy launch`: run guard, time limit,
    sealed raw log) under OUT/raw; the variant's switches reach the workers through the environment."""
    run_dir = out / "raw" / f"{config}-{variant}"
    spec_file = out / "specs" / f"{config}-{variant}.json"
    spec_file.parent.mkdir(exist_ok=True)
    spec_file.write_text(json.dumps({**SPEC, **CONFIGS[config][0], "warmup_iters": warmup, "measured_iters": measured}))
    (out / "logs").mkdir(exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "scalestudy",
        "launch",
        "--spec-json",
        str(spec_file),
        "--run-dir",
        str(run_dir),
        "--time-limit-s",
        str(timeout_s),
        "--log",
        str(out / "logs" / f"{config}-{variant}.txt"),
    ]
    env = dict(os.environ, SCALESTUDY_HARNESS_OFF=variant_off(variant))
    row = {
        "kind": "harness",
        "config": config,
        "variant": variant,
        "off": env["SCALESTUDY_HARNESS_OFF"],
        "run_dir": str(run_dir.relative_to(out)),
    }
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    try:
        return {**row, **harness_numbers(run_dir)}
    except Exception as e:  # noqa: BLE001 - a run that left no readable log is a failed row
        return {
            **row,
            "status": "failed",
            "error": f"{type(e).__name__}: {e}; exit {proc.returncode}: {(proc.stderr or proc.stdout)[-400:]}",
        }


def harness_numbers(run_dir: Path) -> dict:
    run = read_run(run_dir)
    status = run.status["status"]
    if status != "ok":
        return {"status": status, "error": (run.status.get("error") or "")[:300]}
    iters = list(run.iterations())
    tp = throughput(iters, 1)
    peak = next(r["value"] for r in run.records if r["key"] == "device_peak")
    fpt = next(r["value"] for r in run.records if r["key"] == "flops")["flops_per_token"]
    mem = iters[-1]["value"]["memory"]
    return {
        "status": "ok",
        "tokens_per_s": tp["tokens_per_s"],
        "step_time_mean_s": tp["step_time_mean_s"],
        "mfu": mfu(tp["tokens_per_s_per_device"], fpt, peak["peak_flops_per_s"]) if peak["peak_flops_per_s"] else None,
        "reserved_gib": mem["peak_reserved_bytes"] / GIB,
        "allocated_gib": mem["peak_allocated_bytes"] / GIB,
        "alloc_retries": mem["alloc_retries"],
        "step_times_s": [i["value"]["step_time_s"] for i in iters],
    }


def run_plain(config: str, out: Path, warmup: int, measured: int, timeout_s: float) -> dict:
    cmd = [
        sys.executable,
        str(HERE / "plain_loop.py"),
        *SHAPE,
        "--warmup-iters",
        str(warmup),
        "--measured-iters",
        str(measured),
        *CONFIGS[config][1],
    ]
    row = {"kind": "plain", "config": config, "variant": "plain"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {**row, "status": "timeout", "error": f"no result within {timeout_s} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {**row, "status": "failed", "error": f"exit {proc.returncode}: {proc.stderr[-400:]}"}
    d = json.loads(lines[-1])
    return {
        **row,
        "status": d["status"],
        "error": d["error"],
        "tokens_per_s": d["tokens_per_s"],
        "mfu": d["mfu"],
        "reserved_gib": d["peak_reserved_bytes"] / GIB,
        "allocated_gib": d["peak_allocated_bytes"] / GIB,
        "step_times_s": d["step_times_s"],
    }


def table(rows: list[dict]) -> str:
    ref = json.loads(REFERENCE.read_text())["configs"]
    before = {r["config"]: r for r in rows if r["variant"] == "before" and r["status"] == "ok"}
    lines = [
        "| configuration | variant | tok/s | MFU | reserved GiB | / torchtitan tok/s | reserved <= torchtitan "
        "| / before |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for config in CONFIGS:
        if config not in ref:
            continue
        tt = ref[config]["torchtitan"]
        lines.append(
            f"| {config} | torchtitan (reference) | {tt['tokens_per_s']:,.0f} | | {tt['reserved_gib']:.1f} "
            f"| 1.000 | | |"
        )
        if hb := ref[config].get("harness_before_issue"):
            lines.append(
                f"| {config} | harness before the issue (reference) | {hb['tokens_per_s']:,.0f} | "
                f"| {hb['reserved_gib']:.1f} | {hb['tokens_per_s'] / tt['tokens_per_s']:.3f} "
                f"| {'yes' if hb['reserved_gib'] <= tt['reserved_gib'] else 'no'} | |"
            )
        for r in (r for r in rows if r["config"] == config):
            if r["status"] != "ok":
                lines.append(f"| {config} | {r['variant']} | {r['status']} | | | | | |")
                continue
            b = before.get(config)
            vs_before = f"{r['tokens_per_s'] / b['tokens_per_s']:.3f}" if b and r["kind"] == "harness" else ""
            lines.append(
                f"| {config} | {r['variant']} | {r['tokens_per_s']:,.0f} | {r['mfu']:.3f} "
                f"| {r['reserved_gib']:.1f} | {r['tokens_per_s'] / tt['tokens_per_s']:.3f} "
                f"| {'yes' if r['reserved_gib'] <= tt['reserved_gib'] else 'no'} | {vs_before} |"
            )
    return "\n".join(lines)


def read_rows(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    if not path.exists():
        raise SystemExit(f"{path}: no results (run `run --out {out}` first)")
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="measure on this machine's GPU")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated, of: " + ", ".join(CONFIGS))
    r.add_argument("--variants", default="after,before", help="after, before, no-NAME (a NAME of optimisations.py)")
    r.add_argument("--plain", default=",".join(CONFIGS), help="configurations that get a plain-loop run ('' none)")
    r.add_argument("--extra", default="", help="more config:variant pairs run after the rest (ablations)")
    r.add_argument("--warmup-iters", type=int, default=3)
    r.add_argument("--measured-iters", type=int, default=10)
    r.add_argument("--timeout-s", type=float, default=240)
    t = sub.add_parser("table", help="print the table of a finished DIR")
    t.add_argument("out", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "table":
        rows = read_rows(a.out)
        print(table(rows))
        return 0 if all(r["status"] == "ok" for r in rows) else 1
    configs = [c for c in a.configs.split(",") if c]
    plain = [c for c in a.plain.split(",") if c]
    for c in configs + plain:
        if c not in CONFIGS:
            raise SystemExit(f"unknown configuration {c!r}: {', '.join(CONFIGS)}")
    jobs = [("harness", c, v) for c in configs for v in a.variants.split(",") if v]
    jobs += [("plain", c, "plain") for c in plain]
    jobs += [("harness", *pair.split(":", 1)) for pair in a.extra.split(",") if pair]
    for _, c, v in jobs:
        if v != "plain":
            variant_off(v)
    if (a.out / "results.jsonl").exists() or (a.out / "raw").exists():
        raise SystemExit(f"{a.out} holds an earlier measurement: give a new --out")
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for kind, c, v in jobs:
        if kind == "plain":
            row = run_plain(c, a.out, a.warmup_iters, a.measured_iters, a.timeout_s)
        else:
            row = run_harness(c, v, a.out, a.warmup_iters, a.measured_iters, a.timeout_s)
        rows.append(row)
        with open(a.out / "results.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps({k: v for k, v in row.items() if k != "step_times_s"}), flush=True)
    print(table(rows))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
