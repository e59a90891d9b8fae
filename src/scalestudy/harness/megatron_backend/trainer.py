"""A Trainer for megatron-core: what `harness.backend.build_backend` gives the training loop in place
of the torch Trainer when `spec.backend` is megatron. Same interface (harness.backend.StepBackend:
`.step(step)`, `.global_loss(local)`, `.cfg`,
`.parts`), same synthetic data per data-parallel rank, same initial weights (the torch
backend's init by parameter name, mapped onto GPTModel), same optimizer settings; every
megatron-core argument comes from `mapping.plan`."""

from __future__ import annotations

import inspect

import torch

from scalestudy.harness.data import local_batch
from scalestudy.harness.trainer import loss_over_ranks
from scalestudy.spec.run import RunSpec

from . import mapping, require_megatron_core
from . import model as mmodel


class MegatronTrainer:
    def __init__(self, spec: RunSpec, dims, device: torch.device):
        """`dims` (the torch backend's ParallelDims) is accepted for the Trainer signature and
        not used: megatron-core builds its own process groups (parallel_state)."""
        self.version = require_megatron_core()
        from megatron.core import parallel_state, tensor_parallel  # local: megatron-core is optional
        from megatron.core.distributed import (  # local: megatron-core is optional
            DistributedDataParallel,
            DistributedDataParallelConfig,
            finalize_model_grads,
        )
        from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer  # local: megatron-core is optional
        from megatron.core.pipeline_parallel import get_forward_backward_func  # local: megatron-core is optional
        from megatron.core.transformer.module import Float16Module  # local: megatron-core is optional

        self.spec, self.device = spec, device
        self.cfg = spec.model_config()
        self.features = mmodel.installed_features()
        self.plan = mapping.plan(spec, self.features)
        if parallel_state.model_parallel_is_initialized():
            parallel_state.destroy_model_parallel()
        parallel_state.initialize_model_parallel(**self.plan.parallel)
        self.ps = parallel_state
        # megatron-core's CUDA RNG tracker: activation recomputation and sequence parallelism use it
        tensor_parallel.model_parallel_cuda_manual_seed(spec.seed)

        config = mmodel.transformer_config(self.plan)
        self.config = config
        chunks = mmodel.build_chunks(self.plan, config)
        tp_rank, tp = parallel_state.get_tensor_model_parallel_rank(), spec.tp
        fetch = mmodel.torch_init_fetch(self.cfg, spec.seed, device)
        bf16 = spec.precision == "bf16"
        exact = [mmodel.load_from_torch(c, self.cfg, fetch, tp_rank, tp, keep=bf16) for c in chunks]
        if bf16:
            chunks = [Float16Module(config, c) for c in chunks]
        ddp_config = DistributedDataParallelConfig(**self.plan.ddp)
        self.parts = [
            DistributedDataParallel(config=config, ddp_config=ddp_config, module=c, disable_bucketing=i > 0)
            for i, c in enumerate(chunks)
        ]
        for part in self.parts:
            part.train()

        opt_config = OptimizerConfig(**self.plan.optimizer)
        kwargs = {}
        params = inspect.signature(get_megatron_optimizer).parameters
        if "config_overrides" in params:
            kwargs["config_overrides"] = {}  # no overrides: weight decay on every parameter
        elif "no_weight_decay_cond" in params:
            kwargs["no_weight_decay_cond"] = lambda name, param: False
        self.optimizer = get_megatron_optimizer(opt_config, self.parts, **kwargs)
        self.optimizer_impl = self._fused_adamw()
        if bf16:
            mmodel.set_main_params(self.optimizer, self.parts, exact)
        del exact

        # hooks of the schedules, as Megatron-LM's training loop sets them
        if ddp_config.overlap_grad_reduce:
            no_sync = [p.no_sync for p in self.parts]
            grad_sync = [p.start_grad_sync for p in self.parts]
            config.no_sync_func = no_sync[0] if len(no_sync) == 1 else no_sync
            config.grad_sync_func = grad_sync[0] if len(grad_sync) == 1 else grad_sync
        config.finalize_model_grads_func = finalize_model_grads
        config.grad_scale_func = self.optimizer.scale_loss
        self.forward_backward = get_forward_backward_func()
        self.dp_rank = parallel_state.get_data_parallel_rank()
        sched = self.plan.schedule
        self.n_micro, self.mb = sched["num_microbatches"], sched["micro_batch_size"]
        self.position_ids = torch.arange(spec.seq_len, device=device).unsqueeze(0).expand(self.mb, -1)
        self.is_last = parallel_state.is_pipeline_last_stage(ignore_virtual=True)
        self.has_last = self.is_last  # the torch Trainer's name

    def _fused_adamw(self) -> str:
        """megatron-core uses Transformer Engine's or Apex's FusedAdam when it finds them, and
        otherwise torch's AdamW in its default (foreach) form. On CUDA, switch that torch AdamW to
        its fused kernel, as the torch backend runs it (and as FusedAdam would be): the foreach
        form also holds a temporary as large as the fp32 parameters, which a 7B model on one
        141 GB GPU cannot spare."""
        names = set()
        for opt in getattr(self.optimizer, "chained_optimizers", [self.optimizer]):
            inner = getattr(opt, "optimizer", None)
            if inner is None:
                continue
            if isinstance(inner, (torch.optim.Adam, torch.optim.AdamW)) and self.device.type == "cuda":
                inner.defaults.update(fused=True, foreach=False)
                for group in inner.param_groups:
                    group.update(fused=True, foreach=False)
                names.add(f"{type(inner).__module__}.{type(inner).__name__}(fused=True)")
            else:
                names.add(f"{type(inner).__module__}.{type(inner).__name__}")
        return ", ".join(sorted(names))

    def describe(self) -> dict:
        """The `backend` record: what ran, beyond the spec."""
        return {
            "backend": "megatron",
            "megatron_core": self.version,
            "plan": self.plan.record(),
            "features": sorted(self.features),
            "optimizer": self.optimizer_impl,
            "model": {
                "class": "megatron.core.models.gpt.GPTModel",
                "layer": "megatron-core local TransformerLayer",
                "core_attention": "scalestudy SDPAttention (torch scaled_dot_product_attention, causal)",
                "norm": "scalestudy RMSNorm (fp32 statistics; sequence-parallel gradient all-reduce)",
                "init": "torch backend's init by parameter name, mapped onto GPTModel; fp32 main "
                "parameters set to the exact values",
            },
        }

    def _forward_step(self, data_iterator, model):
        tokens, labels = next(data_iterator)
        out = model(tokens, self.position_ids, None, labels=labels)
        return out, self._loss

    @staticmethod
    def _loss(output_tensor):
        loss = output_tensor.float().mean()  # per-token losses of one microbatch: their mean
        # a copy: the schedule divides the returned loss by the number of microbatches in place
        return loss, {"loss": loss.detach().clone()}

    def step(self, step: int) -> torch.Tensor:
        """One optimizer step over this rank's share of the global batch; returns the local loss
        (mean over this rank's sequences; zero off the last pipeline stage)."""
        spec = self.spec
        inputs, labels = local_batch(
            spec.seed, step, self.dp_rank, spec.local_batch, spec.seq_len, self.cfg.vocab_size, self.device
        )
        mb = self.mb
        micro = [(inputs[i * mb : (i + 1) * mb], labels[i * mb : (i + 1) * mb]) for i in range(self.n_micro)]
        for part in self.parts:
            part.zero_grad_buffer()
        self.optimizer.zero_grad()
        # every chunk consumes every microbatch (only the first stage uses the tokens, the last the labels)
        data = [iter(micro) for _ in self.parts] if len(self.parts) > 1 else iter(micro)
        reduced = self.forward_backward(
            forward_step_func=self._forward_step,
            data_iterator=data,
            model=self.parts,
            num_microbatches=self.n_micro,
            seq_length=spec.seq_len,
            micro_batch_size=mb,
            forward_only=False,
        )
        ok, _grad_norm, _zeros = self.optimizer.step()
        if not ok:
            raise RuntimeError("megatron-core's optimizer skipped the step (non-finite gradients)")
        total = torch.zeros((), device=self.device)
        if self.is_last:
            total += torch.stack([r["loss"] for r in reduced]).sum() / self.n_micro
        return total

    def global_loss(self, local: torch.Tensor) -> float:
        return loss_over_ranks(local, self.is_last and self.ps.get_tensor_model_parallel_rank() == 0, self.spec.dp)

    def close(self) -> None:
        self.ps.destroy_model_parallel()
