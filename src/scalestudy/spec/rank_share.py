"""Rank shares: what one rank of a layout computes, run alone on one device with communication
faked (spec `comm: fake`). Pure Python: the workflow plans with it and the analysis reads it.

A rank share is never a measured throughput of the full configuration: its step time holds the
rank's own computation only, and every table, figure and claim built on it carries LABEL.
"""

from __future__ import annotations

from dataclasses import dataclass

LABEL = "one rank's share, communication not executed"

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
    return rank // (spec.world_size // spec.pp)


@dataclass(frozen=True)
class StageKind:
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
    if spec.pp == 1:
        return "only"
    p = pp_rank_of(spec, rank)
    return "first" if p == 0 else "last" if p == spec.pp - 1 else "middle"
