"""A minimal plain-PyTorch training loop: the yardstick the harness is measured against.

Same model class, same synthetic batch, same precision semantics (fp32 weights, bf16 autocast),
fused AdamW; no FSDP, no process group, no instrumentation. Prints one JSON line.

    python benchmarks/plain_loop.py --model llama2-7b --seq-len 4096 --micro-batch 2 [--ac] [--n-layers 8]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F

from scalestudy.harness.data import local_batch
from scalestudy.harness.llama import Transformer, init_weights
from scalestudy.harness.parallelize import apply_ac
from scalestudy.measure.metrics import flops_per_token
from scalestudy.spec.run import RunSpec


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="llama2-7b")
    p.add_argument("--n-layers", type=int, default=0)
    p.add_argument("--seq-len", type=int, default=4096)
    p.add_argument("--micro-batch", type=int, default=2)
    p.add_argument("--ac", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--warmup-iters", type=int, default=10)
    p.add_argument("--measured-iters", type=int, default=50)
    p.add_argument("--peak-tflops", type=float, default=989.4)
    a = p.parse_args()
    spec = RunSpec(model=a.model, n_layers=a.n_layers, seq_len=a.seq_len, micro_batch=a.micro_batch, device="cuda")
    cfg = spec.model_config()
    dev = torch.device("cuda")
    with torch.device("meta"):
        model = Transformer(cfg, a.seq_len)
    if a.ac:
        apply_ac(model)
    if a.compile:
        for k, block in list(model.layers.items()):
            model.layers[k] = torch.compile(block, fullgraph=True)
    model.to_empty(device=dev)
    init_weights(model, cfg, 0, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    times = []
    status, error = "ok", None
    try:
        for step in range(a.warmup_iters + a.measured_iters):
            x, y = local_batch(0, step, 0, a.micro_batch, a.seq_len, cfg.vocab_size, dev)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(x)
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(0, 1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            if step >= a.warmup_iters:
                times.append(time.perf_counter() - t0)
    except torch.OutOfMemoryError as e:
        status, error = "oom", str(e).splitlines()[0]
    tokens = a.micro_batch * a.seq_len
    fpt = flops_per_token(cfg, a.seq_len)["flops_per_token"]
    tps = tokens * len(times) / sum(times) if times else None
    print(
        json.dumps(
            {
                "bench": "plain_loop",
                "model": a.model,
                "n_layers": cfg.n_layers,
                "seq_len": a.seq_len,
                "micro_batch": a.micro_batch,
                "ac": a.ac,
                "compile": a.compile,
                "status": status,
                "error": error,
                "measured_iters": len(times),
                "tokens_per_s": tps,
                "mfu": tps * fpt / (a.peak_tflops * 1e12) if tps else None,
                "peak_tflops": a.peak_tflops,
                "step_times_s": times,
                "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
                "device": torch.cuda.get_device_name(),
                "torch": torch.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
