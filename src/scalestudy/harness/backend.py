"""What the training loop asks of a backend: the model built and parallelised for one rank, one
optimizer step at a time. Two backends have it: the torch one (harness.trainer.Trainer: FSDP2,
DTensor TP, torch pipelining) and megatron-core's (harness.megatron_backend.trainer), picked by
`spec.backend`."""

from __future__ import annotations

from typing import Any, Protocol

import torch

from scalestudy.harness.megatron_backend.trainer import MegatronTrainer
from scalestudy.harness.parallel_dims import ParallelDims
from scalestudy.harness.trainer import Trainer
from scalestudy.spec.run import RunSpec


class StepBackend(Protocol):
    cfg: Any  # the model's configuration (vocab_size, the shapes FLOPs are counted from)

    def step(self, step: int) -> torch.Tensor:
        """One optimizer step over this rank's share of the global batch; the local loss."""
        ...

    def global_loss(self, local: torch.Tensor) -> float:
        """The step's loss over the whole run (a collective: every rank calls it)."""
        ...


def build_backend(spec: RunSpec, dims: ParallelDims, device: torch.device, log) -> StepBackend:
    """The spec's backend for this rank; megatron-core's says what it is in the raw log."""
    if spec.backend == "megatron":
        trainer = MegatronTrainer(spec, dims, device)
        log.log("backend", trainer.describe())
        return trainer
    return Trainer(spec, dims, device)
