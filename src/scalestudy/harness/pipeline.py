"""Pipeline parallelism with torch.distributed.pipelining: split the model into stages that keep
the full model's parameter names, and build the schedule of the spec."""

from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining.schedules import (
    Schedule1F1B,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
)

from scalestudy.spec.run import RunSpec


def stage_ids(pp_rank: int, spec: RunSpec) -> list[int]:
    """Stages held by a pipeline rank: one, or pp_stages_per_rank looped (interleaved)."""
    return [pp_rank + k * spec.pp for k in range(spec.pp_stages_per_rank)]


def split_model(model: nn.Module, stage: int, n_stages: int) -> nn.Module:
    """A deep copy of the (meta-device) model holding only the layers of one stage."""
    n_layers = len(model.layers)
    per = n_layers // n_stages
    keep = {str(i) for i in range(stage * per, (stage + 1) * per)}
    part = copy.deepcopy(model)
    for key in list(part.layers.keys()):
        if key not in keep:
            del part.layers[key]
    if stage != 0:
        part.tok_embeddings = None
    if stage != n_stages - 1:
        part.norm = None
        part.output = None
    return part


SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved_1f1b": ScheduleInterleaved1F1B}


def build_schedule(
    parts: list[nn.Module], ids: list[int], spec: RunSpec, pp_group, device: torch.device, loss_fn: Callable
):
    n_stages = spec.pp * spec.pp_stages_per_rank
    stages = [PipelineStage(part, sid, n_stages, device, group=pp_group) for part, sid in zip(parts, ids)]
    cls = SCHEDULES[spec.pp_schedule]
    # scale_grads=False: the schedule would divide every gradient held, including those
    # accumulated by earlier steps of a gradient-accumulation loop; loss_fn scales instead.
    if spec.pp_schedule == "interleaved_1f1b":
        return cls(stages, n_microbatches=spec.pp_microbatches, loss_fn=loss_fn, scale_grads=False)
    return cls(stages[0], n_microbatches=spec.pp_microbatches, loss_fn=loss_fn, scale_grads=False)
