"""Synthetic tables for drawing every figure without running anything: the paper's full grid
(8 to 2048 GPUs, every strategy family, 3 seeds, failures, a second backend, the TP x PP grid,
model sizes, two device kinds, collectives on 1 to 256 nodes) and a smoke-like CPU study (two
processes, gloo traces whose exposed share exceeds the step, intervals reaching below zero).

The tables hold the summary columns the figures read (docs/analysis-outputs.md), built directly
as DataFrames: no raw logs, no aggregate, so that drawing stays fast."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import pandas as pd

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
PAPER_GPUS = [8, 16, 32, 64, 128, 256, 512, 1024, 2048]
METRICS = (
    "tokens_per_s",
    "tokens_per_s_per_device",
    "mfu",
    "power_w_total",
    "tokens_per_joule",
    "compute_s",
    "comm_s",
    "exposed_comm_s",
    "exposed_comm_share",
)


@dataclass
class Grid:
    summary: list[dict] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)
    coll_summary: list[dict] = field(default_factory=list)
    coll: list[dict] = field(default_factory=list)


def _metrics(
    per_device: float,
    world: int,
    *,
    spread: float,
    exposed: float,
    n: int,
    peak: float = 989e12,
    flops_per_token: float = 4.2e10,
) -> dict:
    tps = per_device * world
    step = 2 * 4096 / per_device
    values = {
        "tokens_per_s": tps,
        "tokens_per_s_per_device": per_device,
        "mfu": per_device * flops_per_token / peak,
        "power_w_total": 600.0 * world,
        "tokens_per_joule": per_device / 600.0,
        "compute_s": 0.8 * step,
        "comm_s": 0.5 * step,
        "exposed_comm_s": exposed * step,
        "exposed_comm_share": exposed,
    }
    out = {}
    for k, v in values.items():
        out[f"{k}_mean"] = v
        out[f"{k}_n"] = n
        half = abs(v) * spread if n > 1 else None
        out[f"{k}_ci95_low"] = None if half is None else v - half
        out[f"{k}_ci95_high"] = None if half is None else v + half
    return out


def _add(
    grid: Grid,
    *,
    experiments: list[str],
    world: int,
    tp: int = 1,
    pp: int = 1,
    replicate: int = 1,
    model: str = "llama2-7b",
    backend: str = "torch",
    compile_: bool = False,
    device: str = "cuda",
    device_name: str = H100,
    status: str = "ok",
    per_device: float = 3000.0,
    spread: float = 0.05,
    exposed: float = 0.1,
    seeds: int = 3,
    global_batch: int | None = None,
    procs_per_node: int = 8,
    micro_batch: int = 2,
) -> None:
    shard = world // (tp * pp * replicate)
    gb = global_batch or 2 * world
    cid = (
        f"{model}-w{world}-r{replicate}s{shard}t{tp}p{pp}-gb{gb}-{backend}{'-c' if compile_ else ''}"
        f"-{device_name.split()[1] if ' ' in device_name else device_name}"
    )
    run_ids = [f"{cid}-seed{s}" for s in range(seeds)]
    layout = "+".join(
        p for p, on in (("hsdp" if replicate > 1 else "fsdp", True), ("tp", tp > 1), ("pp", pp > 1)) if on
    )
    row = {
        "config_id": cid,
        "label": f"{layout} {world}",
        "kind": "train",
        "experiments": ";".join(experiments),
        "status": status,
        "n_seeds": seeds,
        "n_ok": seeds if status == "ok" else 0,
        "error": None if status == "ok" else f"{status}: synthetic failure",
        "layout": layout,
        "model": model,
        "world_size": world,
        "nodes": max(1, world // procs_per_node),
        "procs_per_node": min(world, procs_per_node),
        "dp_replicate": replicate,
        "dp_shard": shard,
        "tp": tp,
        "pp": pp,
        "global_batch": gb,
        "device": device,
        "device_names": device_name,
        "flops_formula": "6*N + attention",
        "mfu_peak_source": "table",
        "exposed_comm_kind": "gpu kernels",
        "run_ids": ";".join(run_ids),
        "notes": None,
    }
    if status == "ok":
        row.update(_metrics(per_device, world, spread=spread, exposed=exposed, n=seeds))
    else:
        row.update({f"{m}_{s}": None for m in METRICS for s in ("mean", "ci95_low", "ci95_high")})
        row.update({f"{m}_n": 0 for m in METRICS})
    grid.summary.append(row)
    for s, rid in enumerate(run_ids):
        grid.runs.append(
            {
                "run_id": rid,
                "config_id": cid,
                "seed": s,
                "status": status,
                "spec.model": model,
                "spec.backend": backend,
                "spec.compile": compile_,
                "spec.tp": tp,
                "spec.pp": pp,
                "spec.dp_replicate": replicate,
                "spec.dp_shard": shard,
                "spec.nodes": row["nodes"],
                "spec.procs_per_node": row["procs_per_node"],
                "spec.global_batch": gb,
                "spec.seed": s,
                "spec.micro_batch": micro_batch,
                "spec.seq_len": 4096,
                "spec.precision": "bf16",
                "spec.activation_checkpointing": "none",
                "spec.sequence_parallel": False,
                "spec.pp_schedule": "1f1b",
                "spec.device": device,
            }
        )


def _collectives(
    grid: Grid,
    nodes_list: list[int],
    sizes: list[int],
    *,
    ppn: int,
    device: str,
    seeds: int,
    failed_nodes: int | None = None,
) -> None:
    for nodes in nodes_list:
        world = nodes * ppn
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            for size in sizes:
                bw = 350.0 * size / (size + 2**22 * math.sqrt(nodes)) / (1 + 0.05 * math.log2(nodes))
                half = 0.1 * bw if seeds > 1 else None
                grid.coll_summary.append(
                    {
                        "op": op,
                        "size_bytes": size,
                        "world_size": world,
                        "nodes": nodes,
                        "procs_per_node": ppn,
                        "dtype": "float32",
                        "device": device,
                        "device_names": H100,
                        "n_seeds": seeds,
                        "all_correct": True,
                        "busbw_GBps_mean": bw,
                        "busbw_GBps_ci95_low": None if half is None else bw - 3 * half,
                        "busbw_GBps_ci95_high": None if half is None else bw + half,
                        "busbw_GBps_n": seeds,
                        "note": None,
                        "run_ids": ";".join(f"coll-n{nodes}-seed{s}" for s in range(seeds)),
                    }
                )
    if failed_nodes:
        grid.coll.append(
            {
                "run_id": f"coll-n{failed_nodes}-seed0",
                "config_id": f"coll-n{failed_nodes}",
                "status": "comm_error",
                "error": "NCCL timeout (synthetic)",
                "device": device,
                "op": None,
                "nodes": failed_nodes,
                "world_size": failed_nodes * ppn,
            }
        )


def paper_grid() -> Grid:
    g = Grid()
    weak = ["weak_scaling", "power"]
    for w in PAPER_GPUS:
        pd_ = 10000 * (1 - 0.05 * math.log2(w / 8))
        _add(
            g,
            experiments=weak + ["kernel_breakdown", "hardware_generations"],
            world=w,
            per_device=pd_,
            exposed=min(0.9, 0.02 * w**0.5),
            status="oom" if w == 512 else "ok",
        )
        _add(g, experiments=weak, world=w, per_device=pd_ * 0.9, backend="megatron")
        if w >= 16:
            _add(
                g,
                experiments=weak + ["kernel_breakdown"],
                world=w,
                replicate=w // 8,
                per_device=pd_ * 0.97,
                exposed=0.05,
            )
        for tp, pp in ((2, 1), (4, 1), (1, 2), (1, 4), (2, 2)):
            _add(
                g,
                experiments=weak + (["step_time_microbatches"] if pp > 1 else []),
                world=w,
                tp=tp,
                pp=pp,
                per_device=pd_ * (0.6 + 0.05 * tp + 0.03 * pp),
                status="timeout" if (w, tp, pp) == (2048, 4, 1) else "ok",
            )
        _add(g, experiments=["strong_scaling"], world=w, global_batch=4096, per_device=4096 * 100 / w)
        _add(g, experiments=["strong_scaling"], world=w, tp=2, global_batch=4096, per_device=4096 * 90 / w)
    for model, scale in (("llama-1b", 2.0), ("llama2-7b", 1.0), ("llama2-13b", 0.5), ("llama2-70b", 0.1)):
        for w in PAPER_GPUS:
            _add(
                g,
                experiments=["model_sizes"],
                world=w,
                model=model,
                per_device=9000 * scale,
                status="oom" if model == "llama2-70b" and w <= 16 else "ok",
                micro_batch=1 if model == "llama2-70b" else 2,
                tp=8 if model == "llama2-70b" else 1,
            )
    for tp in (1, 2, 4, 8, 16):
        for pp in (1, 2, 4, 8, 16):
            _add(
                g,
                experiments=["tp_pp_grid"],
                world=256,
                tp=tp,
                pp=pp,
                global_batch=512,
                per_device=2.6e6 / 256 / (tp * pp) ** 0.3,
                exposed=min(0.6, 0.01 * tp * pp),
                status="oom" if (tp, pp) == (1, 1) else "ok",
            )
    _add(g, experiments=["hardware_generations"], world=8, device_name=A100, per_device=6000)
    _collectives(
        g,
        [1, 2, 4, 8, 16, 32, 64, 128, 256],
        [2**k for k in range(10, 35)],
        ppn=8,
        device="cuda",
        seeds=3,
        failed_nodes=512,
    )
    return g


def smoke_grid() -> Grid:
    """Like the smoke study: two CPU processes, gloo traces, an exposed share above the step and
    a t interval below zero (two seeds far apart)."""
    g = Grid()
    for tp, pp, exposed in ((1, 1, 0.2), (2, 1, 0.4), (1, 2, 1.027)):
        _add(
            g,
            experiments=[
                "weak_scaling",
                "kernel_breakdown",
                "tp_pp_grid",
                "power",
                "model_sizes",
                "hardware_generations",
                "strong_scaling",
            ],
            world=2,
            tp=tp,
            pp=pp,
            device="cpu",
            device_name="Test CPU",
            per_device=40.0,
            spread=1.5,
            exposed=exposed,
            seeds=2,
            procs_per_node=2,
            global_batch=4,
        )
    _add(
        g,
        experiments=["weak_scaling", "kernel_breakdown", "power"],
        world=1,
        device="cpu",
        device_name="Test CPU",
        per_device=55.0,
        spread=1.2,
        exposed=0.0,
        seeds=2,
        procs_per_node=1,
    )
    _collectives(g, [1], [2**k for k in range(10, 21)], ppn=2, device="cpu", seeds=2)
    return g


def tables(grid: Grid):
    coll_cols = ["run_id", "config_id", "status", "error", "device", "op", "nodes", "world_size"]
    return SimpleNamespace(
        summary=pd.DataFrame(grid.summary),
        runs=pd.DataFrame(grid.runs),
        collectives_summary=pd.DataFrame(grid.coll_summary),
        collectives=pd.DataFrame(grid.coll, columns=coll_cols),
        predictions=None,
    )


def study(name: str, grid: Grid, *, hardware: str, predicted: bool = False):
    runs = [SimpleNamespace(spec=SimpleNamespace(device=r["spec.device"])) for r in grid.runs]
    return SimpleNamespace(
        name=name,
        hardware=hardware,
        runs=runs,
        prediction={"cluster": "x"} if predicted else None,
        assumptions=("Sequence length 4096 [assumed]", "AdamW [assumed]"),
        figures=None,
        collectives=[],
        tables_dir=f"/nonexistent/{name}/tables",
    )


RANK_COLUMNS = [
    "group_id",
    "experiments",
    "model",
    "world_size",
    "layout",
    "tp",
    "pp",
    "dp_replicate",
    "dp_shard",
    "micro_batch",
    "global_batch",
    "device_memory_cap_gib",
    "status",
    "stages_measured",
    "stages_planned",
    "rank_step_time_s",
    "peak_allocated_bytes",
    "run_ids",
]


def rank_rows() -> list[dict]:
    """rank_configs.csv of a paper-rank-like study: the 5 x 5 TP x PP grid at 256 GPUs and the
    model-size sweep, measured (ok), out of memory under the cap, and still planned."""
    out = []

    def add(experiments, model, world, tp, pp, status, step, mem_gib, micro_batch=2):
        gid = f"{model}-w{world}-t{tp}p{pp}"
        out.append(
            {
                "group_id": gid,
                "experiments": experiments,
                "model": model,
                "world_size": world,
                "layout": "+".join(["fsdp"] + (["tp"] if tp > 1 else []) + (["pp"] if pp > 1 else [])),
                "tp": tp,
                "pp": pp,
                "dp_replicate": 1,
                "dp_shard": world // (tp * pp),
                "micro_batch": micro_batch,
                "global_batch": 2 * world,
                "device_memory_cap_gib": 79.6,
                "status": status,
                "stages_measured": pp if status != "planned" else 0,
                "stages_planned": pp,
                "rank_step_time_s": step if status == "ok" else None,
                "peak_allocated_bytes": mem_gib * 2**30 if status != "planned" else None,
                "run_ids": f"{gid}-seed0",
            }
        )

    for tp in (1, 2, 4, 8, 16):
        for pp in (1, 2, 4, 8, 16):
            status = "oom" if (tp, pp) == (1, 1) else "planned" if tp * pp >= 64 else "ok"
            add("tp_pp_grid", "llama2-7b", 256, tp, pp, status, 1.7 / (tp * pp) ** 0.8, 90.0 / (tp * pp) ** 0.7)
    for model, mem in (("llama-1b", 12.0), ("llama2-7b", 40.0), ("llama2-13b", 70.0), ("llama2-70b", 300.0)):
        for world in PAPER_GPUS:
            shard = mem * 8 / world
            status = "oom" if shard + 10 > 79.6 else "planned" if world == 2048 else "ok"
            add("model_sizes", model, world, 1, 1, status, 0.5 * mem / 40, shard + 10)
    return out


def write_rank_configs(tables_dir) -> None:
    from pathlib import Path

    from scalestudy.measure.csv_format import write_csv
    from scalestudy.analysis.rank_shares import CONFIGS_FILE

    Path(tables_dir).mkdir(parents=True, exist_ok=True)
    write_csv(Path(tables_dir) / CONFIGS_FILE, RANK_COLUMNS, rank_rows())


LEDGER_COLUMNS = [
    "id",
    "group",
    "source",
    "configuration",
    "published_tokens_per_s_per_device",
    "predicted_tokens_per_s_per_device",
    "band_low",
    "band_high",
    "error_pct",
    "not_expressible",
]


def write_ledger(path) -> None:
    """A model_validation ledger CSV like `scalestudy model validate --external --out` writes: three
    sources, errors from -18% to +20%, two rows the model cannot express."""
    import csv

    rows = []
    for g, (group, base) in enumerate(
        (("torchtitan H100", 7000.0), ("torchtitan A100", 3000.0), ("Narayanan et al. 2021 Table 1", 400.0))
    ):
        for k in range(8):
            pub = base * (1 + 0.3 * k)
            err = -18.0 + 38.0 * ((g * 8 + k) % 9) / 8
            pred = pub * (1 + err / 100)
            rows.append(
                {
                    "id": f"{group.split()[0].lower()}-{k}",
                    "group": group,
                    "source": f"{group} row {k}",
                    "configuration": f"synthetic {k}",
                    "published_tokens_per_s_per_device": pub,
                    "predicted_tokens_per_s_per_device": pred,
                    "band_low": pred * 0.9,
                    "band_high": pred * 1.1,
                    "error_pct": err,
                    "not_expressible": "float8" if (g, k) in ((0, 7), (1, 7)) else "",
                }
            )
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=LEDGER_COLUMNS)
        w.writeheader()
        w.writerows(rows)


def sensitivity_rows() -> list[dict]:
    """claim_sensitivity.csv of a prediction study: 8 inputs at their low and high setting, 5 claims."""
    central = {"C1": -8.7, "C2": -0.9, "C3": 1.3, "C4": 14.6, "HSDP-2048": 3.2}
    paper = {"C1": -37.22, "C2": -5.87, "C3": 52.6, "C4": 18.9, "HSDP-2048": None}
    inputs = [
        "network latency",
        "latency model",
        "network bandwidth",
        "overlap slowdown",
        "computation rate",
        "attention kernel",
        "straggler spread",
        "power limiter window",
    ]
    rows = []
    for i, name in enumerate(inputs):
        for level, sign in (("low", -1), ("high", 1)):
            for c, v in central.items():
                rows.append(
                    {
                        "claim": c,
                        "input": name,
                        "level": level,
                        "setting": f"{level} {i}",
                        "value": v + sign * (i + 1) * 0.7,
                        "central": v,
                        "paper": paper[c],
                        "unit": " pp" if c == "C4" else "%",
                        "source": "synthetic",
                    }
                )
    return rows


def paper_fixture(tables_dir=None):
    g = paper_grid()
    s = study("paper-synthetic", g, hardware="H100 SXM 80 GB, 8 a node (synthetic)")
    if tables_dir is not None:
        write_rank_configs(tables_dir)
        s.tables_dir = str(tables_dir)
    t = tables(g)
    t.claim_sensitivity = pd.DataFrame(sensitivity_rows())
    return s, t


def smoke_fixture():
    g = smoke_grid()
    return study("smoke-synthetic", g, hardware="CPU (synthetic)"), tables(g)
