"""Rank shares: what one rank of a layout computes, run alone on one device with communication
faked (spec `comm: fake`). Pure Python: the workflow plans with it and the analysis reads it.

A rank share is never a measured throughput of the full configuration: its step time holds the
rank's own computation only, and every table, figure and claim built on it carries LABEL.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

LABEL = "one rank's share, communication not executed"

# the fields that set a rank's shapes and work; a predicted run and a rank share with equal
# values here compute the same thing (warm-up counts, seeds, comm mode, memory cap do not)
KEY_FIELDS = (
    "model",
    "n_layers",
    "seq_len",
    "micro_batch",
    "global_batch",
    "dp_replicate",
    "dp_shard",
    "tp",
    "pp",
    "pp_schedule",
    "pp_microbatches",
    "pp_stages_per_rank",
    "sequence_parallel",
    "reshard_after_forward",
    "fsdp_forward_prefetch",
    "fsdp_backward_prefetch",
    "activation_checkpointing",
    "compile",
    "precision",
    "backend",
    "optimizer",
)

# A prediction study with `rank_shares: STUDY` predicts each run twice where STUDY measured a share
# of the same work: from the model alone (the run id as planned) and with the measured share's
# compute and memory (the variant "<run id>--measured-inputs").
MEASURED_INPUTS = "measured-inputs"
MEASURED_SUFFIX = f"--{MEASURED_INPUTS}"  # of the variant's run id and config id
MEASURED_SERIES = " (measured rank share)"  # of its label and its series in a figure
# A share whose GPU busy time was measured (harness/device_busy.py) gives the computation by the
# GPU's own time, the others by the wall step with communication faked (host-bound for tensor
# parallelism): a figure never joins the two in one series.
GPU_BUSY = "GPU busy time"
MEASURED_BUSY_SERIES = f" (measured rank share, {GPU_BUSY})"
MEASURED_SERIES_SUFFIXES = (MEASURED_SERIES, MEASURED_BUSY_SERIES)
CONFIGS_TABLE = "rank_configs.csv"  # analysis/rank_shares.py writes it: one row a share (configuration)
INPUT_STATUSES = ("ok", "oom")  # a share that gives a measured input (an ok compute time, or an oom verdict)


def measured_base(config_id: str) -> str | None:
    """The configuration a measured-inputs variant was planned from (None for any other)."""
    return config_id.removesuffix(MEASURED_SUFFIX) if config_id.endswith(MEASURED_SUFFIX) else None


def measured_input_names(inputs_from: dict) -> list[str]:
    """The inputs of a prediction taken from a measurement: those whose source in its
    `sources.inputs_from` (perfmodel.rank_shares.inputs_from) starts with "measured"; the
    computation named with GPU_BUSY where it is the GPU's busy time."""
    return [
        f"{k} ({GPU_BUSY})" if k == "compute" and f"({GPU_BUSY})" in str(v) else k
        for k, v in sorted(inputs_from.items())
        if str(v).startswith("measured")
    ]


def measured_series(config_id: str, measured_inputs: str | None) -> str:
    """The suffix of a configuration's series: none for the model alone, MEASURED_BUSY_SERIES for
    a measured share's GPU busy time, MEASURED_SERIES for any other measured input."""
    if measured_base(config_id) is None:
        return ""
    return MEASURED_BUSY_SERIES if f"({GPU_BUSY})" in (measured_inputs or "") else MEASURED_SERIES


def work_key(spec) -> tuple:
    """What sets a rank's work: the world size and KEY_FIELDS."""
    return (spec.world_size, *(getattr(spec, f) for f in KEY_FIELDS))


def share_group(spec) -> str:
    """The configuration a rank share belongs to: its config id without the emulated rank."""
    return spec.replace(emulate_rank=0).config_id


def measured_work(rank_study) -> dict[tuple, str]:
    """work_key -> status of the shares the rank-share study measured (status ok or oom in its
    committed configurations table); none where the table is missing."""
    path = Path(rank_study.tables_dir) / CONFIGS_TABLE
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        status = {r["group_id"]: r["status"] for r in csv.DictReader(f)}
    out = {}
    for p in rank_study.runs:
        st = status.get(share_group(p.spec))
        if p.spec.comm == "fake" and st in INPUT_STATUSES:
            out[work_key(p.spec)] = st
    return out


# How the step of a pipelined configuration is made from its stages' times (GPipe and 1F1B
# share it): M microbatches flow through pp stages, so the slowest stage, which spends
# t_stage on its M microbatches, sets a step of (M + pp - 1) slots of t_stage / M each.
PIPELINE_RULE = "step = slowest stage's time x (M + pp - 1) / M (GPipe/1F1B fill and drain, no communication)"


def pipeline_step_time(stage_times_s: list[float], microbatches: int, pp: int) -> float:
    """The step time that a GPipe or 1F1B schedule makes of its stages' compute times (each the
    time one stage spends on all M microbatches of a step)."""
    if not stage_times_s:
        raise ValueError("no stage times")
    if microbatches < 1 or pp < 1:
        raise ValueError(f"microbatches ({microbatches}) and pp ({pp}) must be at least 1")
    return max(stage_times_s) * (microbatches + pp - 1) / microbatches


def rank_of(spec, *, pp_rank: int = 0, dp_replicate_rank: int = 0, dp_shard_rank: int = 0, tp_rank: int = 0) -> int:
    """The global rank at these mesh coordinates (mesh order pp, dp_replicate, dp_shard, tp, row-major)."""
    return ((pp_rank * spec.dp_replicate + dp_replicate_rank) * spec.dp_shard + dp_shard_rank) * spec.tp + tp_rank


def pp_rank_of(spec, rank: int) -> int:
    """The pipeline rank of global `rank`."""
    return rank // (spec.world_size // spec.pp)


@dataclass(frozen=True)
class StageKind:
    """A rank's pipeline stage: first, middle, last or only, and its pipeline rank."""

    name: str  # first | middle | last | only
    pp_rank: int


def distinct_stages(spec) -> list[StageKind]:
    """The pipeline ranks whose shares differ: the first (embedding), one middle one (all middle
    stages hold the same layers' shapes) and the last (output layer and loss). Without pipeline
    parallelism every rank's share has the same shapes: rank 0 stands for all."""
    if spec.pp == 1:
        return [StageKind("only", 0)]
    kinds = [StageKind("first", 0)]
    if spec.pp > 2:
        kinds.append(StageKind("middle", 1))
    kinds.append(StageKind("last", spec.pp - 1))
    return kinds


def stage_name(spec, rank: int) -> str:
    """The pipeline stage of `rank` in words: first, middle, last, or only (no pipeline)."""
    if spec.pp == 1:
        return "only"
    p = pp_rank_of(spec, rank)
    return "first" if p == 0 else "last" if p == spec.pp - 1 else "middle"
