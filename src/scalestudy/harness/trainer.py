"""The torch backend (harness.backend.StepBackend): the model built on the meta device, split into
pipeline stages where the spec asks, parallelised (TP, activation checkpointing, compile, FSDP2:
harness.parallelize), initialised, and one optimizer step over gradient accumulation and the
pipeline schedule."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from scalestudy.harness.data import local_batch
from scalestudy.harness.fake_comm import FakeStage
from scalestudy.harness.llama import Transformer, init_weights
from scalestudy.harness.parallel_dims import ParallelDims
from scalestudy.harness.parallelize import parallelize
from scalestudy.spec.run import RunSpec


def loss_over_ranks(local: torch.Tensor, holder: bool, dp: int) -> float:
    """The step's loss over the run: the sum of the holders' (the last pipeline stage's first tensor-
    parallel rank in each data-parallel replica) local losses, over the dp replicas. Every rank calls it."""
    t = (local if holder else torch.zeros_like(local)).float().clone()
    dist.all_reduce(t)
    return t.item() / dp


class Trainer:
    def __init__(self, spec: RunSpec, dims: ParallelDims, device: torch.device):
        self.spec, self.dims, self.device = spec, dims, device
        self.cfg = spec.model_config()
        with torch.device("meta"):
            model = Transformer(self.cfg, spec.seq_len)
        if dims.pp_enabled:
            # imported only here: torch.distributed.pipelining pulls in torch._dynamo, most of the
            # harness's import time, which a run without pipeline parallelism need not pay
            from scalestudy.harness.pipeline import split_model, stage_ids  # local: heavy; see above

            n_stages = spec.pp * spec.pp_stages_per_rank
            self.stage_ids = stage_ids(dims.pp_rank(), spec)
            self.parts = [split_model(model, sid, n_stages) for sid in self.stage_ids]
            self.has_first = 0 in self.stage_ids
            self.has_last = n_stages - 1 in self.stage_ids
        else:
            self.stage_ids, self.parts = [0], [model]
            self.has_first = self.has_last = True
        for part in self.parts:
            parallelize(part, dims, spec)
            part.to_empty(device=device)
            init_weights(part, self.cfg, spec.seed, device)
            part.train()
        params = [p for part in self.parts for p in part.parameters()]
        fast = {"fused": True} if device.type == "cuda" else {"foreach": True}
        if spec.optimizer == "adamw":
            self.optimizer = torch.optim.AdamW(
                params, lr=spec.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, **fast
            )
        else:
            self.optimizer = torch.optim.SGD(params, lr=spec.lr, **fast)
        self.schedule = None
        if dims.pp_enabled and spec.comm == "fake":
            self.schedule = FakeStage(self.parts[0], self.stage_ids[0], spec, device, self._pp_loss)
        elif dims.pp_enabled:
            from scalestudy.harness.pipeline import build_schedule  # local: heavy (torch._dynamo), pipeline only

            self.schedule = build_schedule(
                self.parts, self.stage_ids, spec, dims.pp_mesh.get_group(), device, self._pp_loss
            )

    def _pp_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten(0, 1)) / (
            self.spec.grad_accum * self.spec.pp_microbatches
        )

    def step(self, step: int) -> torch.Tensor:
        """One optimizer step over this rank's share of the global batch; returns the local loss."""
        spec = self.spec
        inputs, labels = local_batch(
            spec.seed, step, self.dims.dp_rank(), spec.local_batch, spec.seq_len, self.cfg.vocab_size, self.device
        )
        chunk = spec.micro_batch * spec.pp_microbatches
        total = torch.zeros((), device=self.device)
        for a in range(spec.grad_accum):
            x, y = inputs[a * chunk : (a + 1) * chunk], labels[a * chunk : (a + 1) * chunk]
            if self.schedule is not None:
                losses: list[torch.Tensor] = []
                args = (x,) if self.has_first else ()
                self.schedule.step(*args, target=y if self.has_last else None, losses=losses)
                if self.has_last:
                    total += torch.stack(losses).sum().detach()
            else:
                model = self.parts[0]
                if spec.grad_accum > 1:
                    model.set_requires_gradient_sync(a == spec.grad_accum - 1)
                loss = model(x, y) / spec.grad_accum
                loss.backward()
                total += loss.detach()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return total

    def global_loss(self, local: torch.Tensor) -> float:
        return loss_over_ranks(local, self.has_last and self.dims.tp_rank() == 0, self.spec.dp)
