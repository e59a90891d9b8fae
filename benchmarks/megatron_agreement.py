"""Weights copied from the torch backend's model into megatron-core's GPTModel by name give the
same model: one forward and backward of both on the GPU (float32, TF32 off), comparing the loss,
the per-token losses and every parameter's gradient (the torch gradient mapped by the same name
map). Unlike the CPU tests this runs GPTModel.forward itself (rotary table on CUDA). One process,
one GPU; prints one JSON line.

    python benchmarks/megatron_agreement.py --model llama-1b --n-layers 4 --seq-len 1024 --micro-batch 2
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="llama-1b")
    p.add_argument("--n-layers", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--micro-batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    from megatron.core import parallel_state, tensor_parallel

    from scalestudy.harness.data import local_batch
    from scalestudy.harness.llama import Transformer, init_weights
    from scalestudy.harness.megatron_backend import mapping, megatron_core_version
    from scalestudy.harness.megatron_backend import model as mmodel
    from scalestudy.harness.run_start import init_distributed
    from scalestudy.spec.run import RunSpec

    started = time.perf_counter()
    spec = RunSpec(
        model=a.model,
        n_layers=a.n_layers,
        seq_len=a.seq_len,
        micro_batch=a.micro_batch,
        device="cuda",
        precision="fp32",
        backend="megatron",
        seed=a.seed,
    )
    _, _, dev = init_distributed(spec)
    cfg = spec.model_config()
    plan = mapping.plan(spec)
    parallel_state.initialize_model_parallel(**plan.parallel)
    tensor_parallel.model_parallel_cuda_manual_seed(a.seed)

    with torch.device("meta"):
        ref = Transformer(cfg, a.seq_len)
    ref.to_empty(device=dev)
    init_weights(ref, cfg, a.seed, dev)
    (gpt,) = mmodel.build_chunks(plan, mmodel.transformer_config(plan))
    mmodel.load_from_torch(gpt, cfg, mmodel.state_dict_fetch(ref.state_dict()))

    tokens, labels = local_batch(a.seed, 0, 0, a.micro_batch, a.seq_len, cfg.vocab_size, dev)
    logits = ref(tokens)
    per_token_ref = F.cross_entropy(logits.flatten(0, 1), labels.flatten(0, 1), reduction="none").view_as(labels)
    per_token_ref.mean().backward()
    pos = torch.arange(a.seq_len, device=dev).unsqueeze(0).expand(a.micro_batch, -1)
    per_token = gpt(tokens, pos, None, labels=labels)  # [b, s] per-token losses
    per_token.mean().backward()

    grads = {n: q.grad for n, q in ref.named_parameters()}
    worst_name, worst = None, 0.0
    for name, q in gpt.named_parameters():
        m = mmodel._LAYER.match(name)
        layer = mmodel.global_layer_index(gpt, int(m.group(1))) if m else None
        want, _ = mmodel.megatron_value(name, layer, cfg, grads.__getitem__)
        rel = ((q.grad - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()
        if rel > worst:
            worst_name, worst = name, rel
    out = {
        "bench": "megatron_agreement",
        "model": a.model,
        "n_layers": cfg.n_layers,
        "seq_len": a.seq_len,
        "micro_batch": a.micro_batch,
        "precision": "fp32 (TF32 off)",
        "loss_torch": per_token_ref.mean().item(),
        "loss_megatron": per_token.mean().item(),
        "per_token_loss_max_abs_diff": (per_token - per_token_ref).abs().max().item(),
        "grad_max_rel_err": worst,
        "grad_worst_param": worst_name,
        "megatron_core": megatron_core_version(),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "wall_s": time.perf_counter() - started,
    }
    print(json.dumps(out), flush=True)
    parallel_state.destroy_model_parallel()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
